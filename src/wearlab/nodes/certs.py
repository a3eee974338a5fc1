"""A throwaway public-key infrastructure, made fresh for every experiment, so HTTPS clients validate
a real certificate chain (validation is part of the TLS cost the seeds measure) without any key
ever leaving the run's work directory.

A server sends a chain as deployed servers do: its certificate and the intermediate CA
certificates up to (not including) a root the client trusts. `cert:` names the chain
(CERT_CHAINS): its key types from the leaf to the root, joined by `/`, so its depth too -
`rsa2048/rsa2048/rsa2048/rsa2048` is an RSA-2048 leaf, two RSA-2048 intermediates and an RSA-2048
root (three certificates sent). A bare key type is the chain most servers deploy: the leaf and one
intermediate of that type under a root of that type (`rsa2048` = `rsa2048/rsa2048/rsa2048`, two
certificates sent). Until issue 20 a bare key type meant the leaf alone, signed directly by an
ECDSA P-256 test root and sent without any CA certificate: that is `rsa2048/ecdsa-p256` and
`ecdsa-p256/ecdsa-p256` now.

The certificates carry what a public CA's of the seeds' time carry (names with country and
organisation, key and extended key usage, key identifiers, CRL distribution point, authority
information access, certificate policies), so the bytes a handshake sends are those of a deployed
chain, not of a minimal test certificate. Nothing fetches the URLs they name.

Made in-process with `cryptography` (OpenSSL underneath): the openssl CLI costs about a second in
a UML guest, this a few hundred milliseconds for every chain.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import AuthorityInformationAccessOID, ExtendedKeyUsageOID, NameOID

# Key types a certificate may have, and how to make one.
CERT_KEYS = {
    "rsa2048": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
    "ecdsa-p256": lambda: ec.generate_private_key(ec.SECP256R1()),
}

# The chains a server can send: name -> key types from the leaf to the root (the root is the
# client's trust anchor, never sent). The server's HTTPS port per chain is model.ports.HTTPS.
CERT_CHAINS: dict[str, tuple[str, ...]] = {
    "rsa2048": ("rsa2048", "rsa2048", "rsa2048"),
    "ecdsa-p256": ("ecdsa-p256", "ecdsa-p256", "ecdsa-p256"),
    "rsa2048/rsa2048": ("rsa2048", "rsa2048"),
    "rsa2048/rsa2048/rsa2048/rsa2048": ("rsa2048", "rsa2048", "rsa2048", "rsa2048"),
    "rsa2048/ecdsa-p256": ("rsa2048", "ecdsa-p256"),
    "ecdsa-p256/ecdsa-p256": ("ecdsa-p256", "ecdsa-p256"),
}
# What `cert:` takes (the workload's parameter): every chain by name.
CERT_KINDS = tuple(CERT_CHAINS)


def leaf_key(cert: str) -> str:
    """The key type of the server's own certificate in chain `cert` (what its cipher suite must
    authenticate with)."""
    return CERT_CHAINS[cert][0]


def describe_chain(cert: str) -> str:
    """`rsa2048` -> 'RSA-2048 leaf + 1 intermediate (RSA-2048) sent, under an RSA-2048 root'."""
    keys = CERT_CHAINS[cert]
    show = {"rsa2048": "RSA-2048", "ecdsa-p256": "ECDSA P-256"}
    mids = keys[1:-1]
    sent = f" + {len(mids)} intermediate{'s' if len(mids) != 1 else ''} ({', '.join(show[k] for k in mids)})" if mids else " alone"
    root = show[keys[-1]]
    return f"{show[keys[0]]} leaf{sent} sent, under {'an' if root[0] in 'AEIOU' else 'a'} {root} root"


@dataclass(frozen=True)
class ServerCert:
    kind: str                 # the chain's name (CERT_CHAINS)
    cert: Path                # the chain the server sends: its certificate, then the intermediates
    key: Path
    sent_der_bytes: tuple[int, ...] = ()   # each sent certificate's DER size, leaf first


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


_SHOW = {"rsa2048": "RSA 2048", "ecdsa-p256": "ECC P-256"}
_DV_POLICY = x509.ObjectIdentifier("2.23.140.1.2.1")   # CA/Browser Forum: domain validated


def _ca_name(keytype: str, level: int) -> x509.Name:
    cn = f"wearlab test Root CA {_SHOW[keytype]}" if level == 0 else \
        f"wearlab test Domain Validation Secure Server CA {level} {_SHOW[keytype]}"
    return x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "AU"),
                      x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "New South Wales"),
                      x509.NameAttribute(NameOID.LOCALITY_NAME, "Sydney"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "wearlab test certification authority"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _issued_by(issuer_name: x509.Name, ca_slug: str, ocsp: bool = True) -> list[tuple[x509.ExtensionType, bool]]:
    """The extensions a public CA puts in what it issues: where its CRL and its own certificate
    are, its OCSP responder (unless `ocsp` is false), and the policy it issued under."""
    base = f"http://{ca_slug}.pki.wearlab.invalid"
    access = [x509.AccessDescription(AuthorityInformationAccessOID.CA_ISSUERS,
                                     x509.UniformResourceIdentifier(f"{base}/cert/{ca_slug}.crt"))]
    if ocsp:
        access.append(x509.AccessDescription(AuthorityInformationAccessOID.OCSP,
                                             x509.UniformResourceIdentifier(f"{base}/ocsp")))
    return [
        (x509.CRLDistributionPoints([x509.DistributionPoint(
            full_name=[x509.UniformResourceIdentifier(f"{base}/crl/{ca_slug}.crl")], relative_name=None,
            reasons=None, crl_issuer=None)]), False),
        (x509.AuthorityInformationAccess(access), False),
        (x509.CertificatePolicies([x509.PolicyInformation(_DV_POLICY, [f"{base}/cps"])]), False),
    ]


def _key_usage(*, sign_certs: bool, key_encipherment: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, key_cert_sign=sign_certs, crl_sign=sign_certs,
                         content_commitment=False, key_encipherment=key_encipherment, data_encipherment=False,
                         key_agreement=False, encipher_only=False, decipher_only=False)


def make_pki(directory: Path, server_name: str, kinds=CERT_KINDS, also_names: tuple[str, ...] = (),
             ocsp: bool = True) -> tuple[Path, dict[str, ServerCert]]:
    """Return (the roots the client trusts, one PEM bundle; {chain: the server's certificate
    chain}) for `server_name`. One root per key type; an intermediate per key type and level,
    shared by the chains that have it there; one server key per key type. `kinds`: the chains
    to make (CERT_CHAINS' names); `also_names`: more host names the server's certificates carry
    (a server node serving several of a page's origins); `ocsp`: whether the certificates name an
    OCSP responder (a server that staples, as Caddy does for every certificate it loads, would
    try to reach it: such a server gets certificates without one)."""
    chains = tuple(kinds)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=2)
    keys: dict[tuple[str, int | str], object] = {}

    def key(keytype: str, slot: int | str):
        if (keytype, slot) not in keys:
            keys[(keytype, slot)] = CERT_KEYS[keytype]()
        return keys[(keytype, slot)]

    def sign_with(k) -> hashes.HashAlgorithm:
        return hashes.SHA256()

    roots: dict[str, x509.Certificate] = {}
    for keytype in sorted({CERT_CHAINS[c][-1] for c in chains}):
        k = key(keytype, "root")
        name = _ca_name(keytype, 0)
        ski = x509.SubjectKeyIdentifier.from_public_key(k.public_key())
        roots[keytype] = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                          .public_key(k.public_key()).serial_number(x509.random_serial_number())
                          .not_valid_before(start).not_valid_after(end)
                          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                          .add_extension(_key_usage(sign_certs=True, key_encipherment=False), critical=True)
                          .add_extension(ski, critical=False)
                          .sign(k, sign_with(k)))
    bundle = directory / "ca.pem"
    bundle.write_bytes(b"".join(r.public_bytes(serialization.Encoding.PEM) for r in roots.values()))

    # CA certificates below the root, keyed by the chain above them (so chains share them).
    cas: dict[tuple[str, ...], tuple[x509.Certificate, object]] = {}

    def ca_for(above: tuple[str, ...]) -> tuple[x509.Certificate, object]:
        """The CA whose key type is above[0], issued by the chain above[1:] (up to the root)."""
        if len(above) == 1:
            return roots[above[0]], key(above[0], "root")
        if above not in cas:
            issuer, issuer_key = ca_for(above[1:])
            level = len(above) - 1
            k = key(above[0], f"ca{level}-{'/'.join(above[1:])}")
            slug = f"ca{level}-{above[0]}"
            builder = (x509.CertificateBuilder().subject_name(_ca_name(above[0], level)).issuer_name(issuer.subject)
                       .public_key(k.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(start).not_valid_after(end)
                       # no path length: the CA below a root is shared by chains of different depths
                       .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                       .add_extension(_key_usage(sign_certs=True, key_encipherment=False), critical=True)
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                             ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                       .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False)
                       .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                      critical=False))
            for ext, critical in _issued_by(issuer.subject, f"root-{above[-1]}" if len(above) == 2 else slug, ocsp):
                builder = builder.add_extension(ext, critical)
            cas[above] = (builder.sign(issuer_key, sign_with(issuer_key)), k)
        return cas[above]

    certs = {}
    for chain in chains:
        types = CERT_CHAINS[chain]
        issuer, issuer_key = ca_for(types[1:])
        k = key(types[0], "leaf")
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)]))
                   .issuer_name(issuer.subject)
                   .public_key(k.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(start).not_valid_after(end)
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dict.fromkeys(
                       (server_name, f"www.{server_name}", *also_names))]), critical=False)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(_key_usage(sign_certs=False, key_encipherment=types[0] == "rsa2048"), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                                  critical=False))
        for ext, critical in _issued_by(issuer.subject, f"ca{len(types) - 2}-{types[1]}" if len(types) > 2
                                        else f"root-{types[1]}", ocsp):
            builder = builder.add_extension(ext, critical)
        leaf = builder.sign(issuer_key, sign_with(issuer_key))
        sent = [leaf] + [ca_for(types[i:])[0] for i in range(1, len(types) - 1)]
        slug = chain.replace("/", "_")
        cert_path, key_path = directory / f"{slug}.pem", directory / f"{slug}.key"
        cert_path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in sent))
        _write_key(key_path, k)
        certs[chain] = ServerCert(chain, cert_path, key_path,
                                  tuple(len(c.public_bytes(serialization.Encoding.DER)) for c in sent))
    return bundle, certs
