"""A throwaway certificate authority and server certificates, made fresh for every experiment
with the openssl CLI, so HTTPS clients validate a real chain (validation is part of the TLS cost
the seeds measure) without any key ever leaving the run's work directory."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CERT_KINDS = {
    "rsa2048": ["-newkey", "rsa:2048"],
    "ecdsa-p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
}


@dataclass(frozen=True)
class ServerCert:
    kind: str
    cert: Path
    key: Path


def _openssl(*args: str) -> None:
    res = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {res.stderr.strip()}")


def make_pki(directory: Path, server_name: str, kinds=tuple(CERT_KINDS)) -> tuple[Path, dict[str, ServerCert]]:
    """Return (CA certificate, {kind: server certificate}) for `server_name`."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = directory / "ca.key", directory / "ca.pem"
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(ca_key), "-out", str(ca_crt), "-days", "2", "-subj", "/CN=wearlab test CA")
    certs = {}
    for kind in kinds:
        key, csr, crt = directory / f"{kind}.key", directory / f"{kind}.csr", directory / f"{kind}.pem"
        ext = directory / f"{kind}.ext"
        ext.write_text(f"subjectAltName=DNS:{server_name}\nbasicConstraints=CA:FALSE\n"
                       "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
        _openssl("req", "-new", *CERT_KINDS[kind], "-nodes", "-keyout", str(key), "-out", str(csr),
                 "-subj", f"/CN={server_name}")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
                 "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext))
        certs[kind] = ServerCert(kind, crt, key)
    return ca_crt, certs
