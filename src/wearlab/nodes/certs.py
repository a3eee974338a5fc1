"""A throwaway certificate authority and server certificates, made fresh for every experiment,
so HTTPS clients validate a real chain (validation is part of the TLS cost the seeds measure)
without any key ever leaving the run's work directory.

Made in-process with `cryptography` (OpenSSL underneath): five openssl CLI runs cost about a
second in a UML guest, this costs a few tens of milliseconds.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_KINDS = {
    "rsa2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "ecdsa-p256": lambda: ec.generate_private_key(ec.SECP256R1()),
}


@dataclass(frozen=True)
class ServerCert:
    kind: str
    cert: Path
    key: Path


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_pki(directory: Path, server_name: str, kinds=tuple(CERT_KINDS)) -> tuple[Path, dict[str, ServerCert]]:
    """Return (CA certificate, {kind: server certificate}) for `server_name`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("wearlab test CA")).issuer_name(_name("wearlab test CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    ca_crt = directory / "ca.pem"
    ca_crt.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    certs = {}
    for kind in kinds:
        key = CERT_KINDS[kind]()
        crt = (x509.CertificateBuilder().subject_name(_name(server_name)).issuer_name(ca.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.SubjectAlternativeName([x509.DNSName(server_name)]), critical=False)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
               .sign(ca_key, hashes.SHA256()))
        cert_path, key_path = directory / f"{kind}.pem", directory / f"{kind}.key"
        cert_path.write_bytes(crt.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
        certs[kind] = ServerCert(kind, cert_path, key_path)
    return ca_crt, certs
