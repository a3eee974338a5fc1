"""Unit tests of the independent RFC 8547/8548 test peer (tests/tcpcrypt_rfcpeer.py) and the pcap ENO
extractor (tests/tcpcrypt_wire.py).  Host-only, no root, no network namespaces: two Peers talk over
socket.socketpair()."""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import re
import socket
import struct
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

import tcpcrypt_rfcpeer as rp
import tcpcrypt_wire as wire

# The RFC texts: shared/ beside the checkout (as CI has it), else this workplace's copy.
RFC_DIR = next((d for d in (Path(__file__).resolve().parents[2] / "shared" / "docs" / "rfc",
                            Path("/work/shared/docs/rfc")) if d.is_dir()), Path("/work/shared/docs/rfc"))
X, Y, Z = 0x21, 0x23, 0x24     # three TEP ids standing in for the X, Y, Z of RFC 8547 §6


# ===================================================================== helpers

def _pair(tep=rp.TEP_CURVE25519, aead=rp.AEAD_AES_128_GCM, a_ciphers=None, b_ciphers=None, **kw):
    a_opt = rp.encode_eno_syn([tep])
    b_opt = rp.encode_eno_syn([tep], b=1)
    t = rp.transcript(a_opt, b_opt)
    s1, s2 = socket.socketpair()
    for s in (s1, s2):
        s.settimeout(10)
    A = rp.Peer(s1, "A", tep, t, ciphers=a_ciphers or [aead], **kw)
    B = rp.Peer(s2, "B", tep, t, ciphers=b_ciphers or [aead], **kw)
    _both(A.handshake, B.handshake)
    return A, B


def _both(f, g):
    """Run g in a thread and f here; re-raise the thread's exception."""
    err: list[BaseException] = []
    res: list = []

    def run():
        try:
            res.append(g())
        except BaseException as e:   # noqa: BLE001
            err.append(e)

    th = threading.Thread(target=run)
    th.start()
    try:
        r = f()
    finally:
        th.join(20)
    if err:
        raise err[0]
    return r, res[0] if res else None


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@functools.lru_cache(maxsize=None)
def _rfc_text(rfc: str) -> str | None:
    path = RFC_DIR / f"rfc{rfc}.txt"
    return _norm(path.read_text()) if path.exists() else None


# ===================================================================== RFC constants, quoted

QUOTES = [
    # (rfc, text quoted from the RFC, value in the module, expected value)
    ("8547", "| 69   | N      | Encryption Negotiation (TCP-ENO) | RFC 8547  |", rp.ENO_KIND, 69),
    ("8547", "| 0x20      | Experimental Use             | RFC 8547  |", rp.TEP_EXPERIMENTAL, 0x20),
    ("8547", "A unique 7-bit value in the range 0x20-0x7f", (rp.TEP_MIN, rp.TEP_MAX), (0x20, 0x7F)),
    ("8547", "| 0 | 0 | 0 |z1 |z2 |z3 | a | b |", (rp.GLOBAL_A, rp.GLOBAL_B, rp.GLOBAL_Z), (0x02, 0x01, 0x1C)),
    ("8547", "| 1   0   0         nnnnn       |", rp.LENGTH_BYTE_TAG, 0x80),
    ("8547", "a length byte can designate anywhere from 1 to 32 bytes of suboption data", rp.LENGTH_MAX, 32),
    ("8547", "The session ID MUST be at least 33 bytes", rp.SESSION_ID_MIN_LEN, 33),
    ("8548", "| 0x21  | TCPCRYPT_ECDHE_P256       | [RFC8548] |", rp.TEP_P256, 0x21),
    ("8548", "| 0x22  | TCPCRYPT_ECDHE_P521       | [RFC8548] |", rp.TEP_P521, 0x22),
    ("8548", "| 0x23  | TCPCRYPT_ECDHE_Curve25519 | [RFC8548] |", rp.TEP_CURVE25519, 0x23),
    ("8548", "| 0x24  | TCPCRYPT_ECDHE_Curve448   | [RFC8548] |", rp.TEP_CURVE448, 0x24),
    ("8548", "| 0x0001 | AEAD_AES_128_GCM       | [RFC8548], Section 6 |", rp.AEAD_AES_128_GCM, 0x0001),
    ("8548", "| 0x0002 | AEAD_AES_256_GCM       | [RFC8548], Section 6 |", rp.AEAD_AES_256_GCM, 0x0002),
    ("8548", "| 0x0010 | AEAD_CHACHA20_POLY1305 | [RFC8548], Section 6 |", rp.AEAD_CHACHA20_POLY1305, 0x0010),
    ("8548", "| 0x01       | CONST_NEXTK  |", rp.CONST_NEXTK, 0x01),
    ("8548", "| 0x02       | CONST_SESSID |", rp.CONST_SESSID, 0x02),
    ("8548", "| 0x03       | CONST_REKEY  |", rp.CONST_REKEY, 0x03),
    ("8548", "| 0x04       | CONST_KEY_A  |", rp.CONST_KEY_A, 0x04),
    ("8548", "| 0x05       | CONST_KEY_B  |", rp.CONST_KEY_B, 0x05),
    ("8548", "| 0x06       | CONST_RESUME |", rp.CONST_RESUME, 0x06),
    ("8548", "| 0x15101a0e | INIT1_MAGIC  |", rp.INIT1_MAGIC, 0x15101A0E),
    ("8548", "| 0x097105e0 | INIT2_MAGIC  |", rp.INIT2_MAGIC, 0x097105E0),
    ("8548", "N_A_LEN: 32 bytes", rp.N_A_LEN, 32),
    ("8548", "N_B_LEN: 32 bytes", rp.N_B_LEN, 32),
    ("8548", "K_LEN: 32 bytes", rp.K_LEN, 32),
    ("8548", "resume[i] = CPRF(ss[i], CONST_RESUME, 18)", rp.RESUME_ID_LEN, 18),
    ("8548", "The nonce value MUST have length between 0 and 8 bytes.", rp.RESUME_NONCE_MAX, 8),
    ("8548", "32 bytes for ECDHE-Curve25519", rp.X25519_PUB_LEN, 32),
    ("8548", "| AEAD_AES_128_GCM       | REQUIRED    | 16 bytes   | 12 bytes     |",
     (rp.AEADS[1].key_len, rp.AEADS[1].nonce_len), (16, 12)),
    ("8548", "| AEAD_AES_256_GCM       | RECOMMENDED | 32 bytes   | 12 bytes     |",
     (rp.AEADS[2].key_len, rp.AEADS[2].nonce_len), (32, 12)),
    ("8548", "| AEAD_CHACHA20_POLY1305 | RECOMMENDED | 32 bytes   | 12 bytes     |",
     (rp.AEADS[0x10].key_len, rp.AEADS[0x10].nonce_len), (32, 12)),
    ("8548", "The 8-byte offset field contains an integer in big-endian format.", rp.FRAME_OFFSET_LEN, 8),
    ("8548", "has length less than 2^16 bytes", rp.CLEN_LIMIT, 1 << 16),
]


@pytest.mark.parametrize("rfc,quote,value,expected", QUOTES, ids=[q[1][:40] for q in QUOTES])
def test_rfc_constant_as_quoted(rfc, quote, value, expected):
    assert value == expected
    text = _rfc_text(rfc)
    if text is not None:    # the quote really is RFC text (whitespace-normalised)
        assert _norm(quote) in text, f"not found in RFC {rfc}: {quote!r}"


def test_hkdf_matches_rfc5869_and_library():
    # 8548 §3.1 Figure 1: CPRF = HKDF-Expand with SHA-256, Extract = HMAC(salt, IKM).
    prk = os.urandom(32)
    for const in (b"\x01", b"\x03" + os.urandom(16)):
        for n in (18, 28, 32, 44, 100):
            lib = HKDFExpand(hashes.SHA256(), n, const).derive(prk)
            assert rp.cprf(prk, const, n) == lib
    salt, ikm = os.urandom(32), os.urandom(77)
    assert rp.extract(salt, ikm) == hmac.new(salt, ikm, hashlib.sha256).digest()


def test_key_schedule_shapes():
    ss0 = os.urandom(32)
    assert rp.session_secret(ss0, 0) == ss0                              # ss[0] = PRK
    assert rp.session_secret(ss0, 2) == rp.cprf(rp.cprf(ss0, b"\x01", 32), b"\x01", 32)
    assert rp.master_key(ss0) == rp.cprf(ss0, b"\x03", 32)               # sn[0] empty
    assert rp.master_key(ss0, b"ab", 1) == rp.cprf(rp.cprf(ss0, b"\x03ab", 32), b"\x03", 32)
    for aid, p in rp.AEADS.items():
        k_ab, k_ba = rp.traffic_keys(rp.master_key(ss0), aid)
        assert len(k_ab) == len(k_ba) == p.key_len + p.nonce_len and k_ab != k_ba
    sid = rp.session_id(0x23, ss0)
    assert len(sid) == 33 and sid[0] == 0x23 and sid[1:] == rp.cprf(ss0, b"\x02", 32)
    assert len(rp.resume_identifier(ss0)) == 18


def test_frame_id_and_nonce():
    nr = bytes(range(1, 13))
    off = 0x0102030405060708
    fid = bytes(4) + off.to_bytes(8, "big")                             # 8548 §4.2.3
    assert rp.aead_nonce(off, nr) == bytes(a ^ b for a, b in zip(fid, nr))
    assert rp.aead_nonce(0, nr) == nr
    with pytest.raises(rp.ProtocolError):
        rp.aead_nonce(1 << 64, nr)


# ===================================================================== ENO option encoding/parsing

def test_eno_option_forms():
    assert rp.encode_eno_nonsyn() == b"\x45\x02"                        # 8547 Figure 3, N = 0
    assert rp.encode_eno_syn([0x23]) == b"\x45\x03\x23"                 # implicit global 0x00
    assert rp.encode_eno_syn([0x23], b=1) == b"\x45\x04\x01\x23"        # passive: explicit b = 1
    assert rp.encode_eno_syn([0x23], b=1, a=1) == b"\x45\x04\x03\x23"
    o = rp.parse_eno_syn(b"\x45\x03\x23")
    assert o.global_byte is None and o.b == 0 and o.a == 0 and o.teps == (0x23,)
    with pytest.raises(rp.EnoParseError):
        rp.parse_eno_syn(b"\x45\x04\x23")           # length byte mismatch
    with pytest.raises(rp.EnoParseError):
        rp.parse_eno_syn(b"\x44\x03\x23")           # not kind 69


def test_eno_suboption_data_lengths():
    # Last suboption with v=1: data to end of option (8547 §4.4), may exceed 32 bytes.
    long = bytes(range(35))
    enc = rp.encode_eno_syn([0x21, rp.Suboption(0x23, True, long)])
    assert enc == bytes([69, 2 + 1 + 1 + 35, 0x21, 0xA3]) + long
    o = rp.parse_eno_syn(enc)
    assert o.suboptions[1] == rp.Suboption(0x23, True, long, False)
    assert o.suboptions[1].tep_byte == 0xA3
    # Non-last suboption with data needs a length byte 100nnnnn, nnnnn = len - 1 (8547 Figure 6/7).
    enc = rp.encode_eno_syn([rp.Suboption(0x23, True, b"\xAA" * 10), 0x21], b=1)
    assert enc == bytes([69, 2 + 1 + 1 + 1 + 10 + 1, 0x01, 0x80 | 9, 0xA3]) + b"\xAA" * 10 + b"\x21"
    o = rp.parse_eno_syn(enc)
    assert o.b == 1 and o.teps == (0x23, 0x21) and o.suboptions[0].data == b"\xAA" * 10
    assert o.suboptions[0].length_byte
    # 32 is the maximum with a length byte (nnnnn = 31).
    enc = rp.encode_eno_syn([rp.Suboption(0x22, True, b"\x01" * 32), 0x21])
    assert enc[2] == 0x9F and rp.parse_eno_syn(enc).suboptions[0].data == b"\x01" * 32
    with pytest.raises(ValueError):
        rp.encode_eno_syn([rp.Suboption(0x22, True, b"\x01" * 33), 0x21])
    # v = 1 with zero data bytes as the last byte of the option parses (data = b"").
    assert rp.parse_eno_syn(b"\x45\x03\xa3").suboptions == (rp.Suboption(0x23, True, b""),)


@pytest.mark.parametrize("body", [
    b"\x85\x23\x01",              # length byte followed by 0x23 (v = 0): 8547 §4.4 rule 2
    b"\x82\x05\x01\x02\x03",      # length byte followed by 0x05 (glt < 0x20)
    b"\x80\x9f\x00",              # followed by another length byte (0x80-0x9f)
    b"\x85\xa3\x01\x02",          # 6 bytes of data announced, 2 present: rule 1
    b"\x21\x80",                  # length byte at the very end
])
def test_eno_ill_formed_rejected(body):
    opt = bytes([69, 2 + len(body)]) + body
    with pytest.raises(rp.EnoParseError):
        rp.parse_eno_syn(opt)
    n = rp.negotiate(opt, rp.encode_eno_syn([0x23], b=1))
    assert not n.ok and "ill-formed" in n.reason


def test_global_suboption_rules():
    # Only the first global suboption counts (8547 §4.2); z bits ignored.
    o = rp.parse_eno_syn(b"\x45\x06\x1d\x23\x00\x02")
    assert o.global_byte == 0x1D and o.ignored_globals == (0x00, 0x02) and o.b == 1 and o.a == 0
    assert o.teps == (0x23,)
    # Global suboption need not be first.
    o = rp.parse_eno_syn(b"\x45\x04\x23\x01")
    assert o.b == 1 and o.teps == (0x23,)


# ===================================================================== RFC 8547 §6 examples

def test_figure9_three_way_success():
    # (1) A -> B: SYN ENO<X,Y>   (2) B -> A: SYN-ACK ENO<b=1,Y>   (3) A -> B: ACK ENO<>
    syn, synack = rp.encode_eno_syn([X, Y]), rp.encode_eno_syn([Y], b=1)
    n = rp.negotiate(syn, synack)
    assert n.ok and n.tep == Y and n.tep_byte == Y and n.first_is_a
    assert n.transcript == syn + synack == bytes([69, 4, X, Y, 69, 4, 0x01, Y])
    assert n.fresh
    # Arguments in the other order: roles still come from the b bits.
    n2 = rp.negotiate(synack, syn)
    assert n2.ok and n2.tep == Y and not n2.first_is_a and n2.transcript == n.transcript
    assert rp.split_transcript(n.transcript) == (syn, synack)
    assert rp.encode_eno_nonsyn() == bytes([69, 2])


def test_figure10_failed_negotiation():
    syn = rp.encode_eno_syn([X, Y])
    # Case 1/2/4: no ENO option in the SYN-ACK (or in the SYN as received).
    assert not rp.negotiate(syn, None).ok
    assert not rp.negotiate(None, rp.encode_eno_syn([Y], b=1)).ok
    # Case 3: B in mandatory application-aware mode, A's implicit global has a = 0.
    n = rp.negotiate(syn, rp.encode_eno_syn([Y], b=1, a=1), mandatory_app_aware=True)
    assert not n.ok and "application-aware" in n.reason
    ok = rp.negotiate(rp.encode_eno_syn([X, Y], a=1), rp.encode_eno_syn([Y], b=1, a=1),
                      mandatory_app_aware=True)
    assert ok.ok and ok.app_aware == (1, 1)
    # B supports neither TEP: nothing in common.
    assert not rp.negotiate(syn, rp.encode_eno_syn([Z], b=1)).ok


def test_figure11_option_stripping():
    # SYN-ACK ENO<b=1,X> stripped by a middlebox: A sees no ENO -> unencrypted.
    assert not rp.negotiate(rp.encode_eno_syn([X, Y]), None).ok


def test_figure12_simultaneous_open():
    # (1) A -> B: SYN ENO<Y,X>  (2) B -> A: SYN ENO<b=1,X,Y,Z>  ... negotiated TEP is Y
    a_opt = rp.encode_eno_syn([Y, X])
    b_opt = rp.encode_eno_syn([X, Y, Z], b=1)
    n = rp.negotiate(a_opt, b_opt)
    assert n.ok and n.tep == Y      # Z is last in B's option but A never sent it
    assert n.transcript == a_opt + b_opt


def test_negotiation_edge_cases():
    a = rp.encode_eno_syn([X, Y])
    # Last valid TEP of B's option wins (8547 §4.5), B's order is priority.
    assert rp.negotiate(a, rp.encode_eno_syn([Y, X], b=1)).tep == X
    # Same b on both sides (default b = 0, or echoing load balancer §8.1) -> fail.
    assert not rp.negotiate(a, a).ok
    assert not rp.negotiate(rp.encode_eno_syn([Y], b=1), rp.encode_eno_syn([Y], b=1)).ok
    # Vacuous options -> fail (8547 §4.6).
    n = rp.negotiate(a, rp.encode_eno_syn([], b=1))
    assert not n.ok and "vacuous" in n.reason
    # Local support restricts the choice.
    assert rp.negotiate(a, rp.encode_eno_syn([X, Y], b=1), supported=[X]).tep == X
    # A repeated tcpcrypt TEP is not well-defined (reading R6): skipped.
    rep = rp.encode_eno_syn([X, Y, Y])
    assert rp.negotiate(rep, rp.encode_eno_syn([X, Y], b=1)).tep == X
    assert rp.negotiate(rep, rp.encode_eno_syn([X, Y], b=1), allow_repeat=[Y]).tep == Y
    # More than one ENO option in a SYN = no ENO option (8547 §4.1).
    two = rp.encode_eno_syn([Y]) + rp.encode_eno_syn([X])
    assert rp.syn_eno_option(two) is None
    assert rp.syn_eno_option(b"\x01\x01" + rp.encode_eno_syn([Y])) == rp.encode_eno_syn([Y])


def test_resumption_suboptions_and_v_bit():
    ss = os.urandom(32)
    rid = rp.resume_identifier(ss)
    sa = rp.resumption_suboption(Y, ss, "A", b"12345678")
    sb = rp.resumption_suboption(Y, ss, "B", b"abcd")
    assert sa.data[:9] + sb.data[:9] == rid and sa.tep_byte == Y | 0x80
    a_opt = rp.encode_eno_syn([X, sa])
    b_opt = rp.encode_eno_syn([sb], b=1)
    n = rp.negotiate(a_opt, b_opt)
    assert n.ok and n.tep == Y and n.tep_byte == 0xA3 and not n.fresh
    # < 9 bytes of data with v = 1 means fresh key exchange (8548 §3.5); TEP byte keeps v (R7).
    n = rp.negotiate(a_opt, rp.encode_eno_syn([rp.Suboption(Y, True, b"short")], b=1))
    assert n.ok and n.fresh and n.tep_byte == 0xA3
    with pytest.raises(ValueError):
        rp.resumption_suboption(Y, ss, "A", b"123456789")


# ===================================================================== Init1 / Init2 encodings

def test_init1_layout():
    n_a, pub = bytes(range(32)), bytes(range(100, 132))
    m = rp.encode_init1([0x0001, 0x0010], n_a, pub)
    k = 2
    assert struct.unpack(">I", m[0:4])[0] == 0x15101A0E
    assert struct.unpack(">I", m[4:8])[0] == len(m) == 9 + 2 * k + 32 + 32
    assert m[8] == k and m[9:11] == b"\x00\x01" and m[11:13] == b"\x00\x10"
    assert m[2 * k + 9:2 * k + 9 + 32] == n_a and m[2 * k + 9 + 32:] == pub
    d = rp.decode_init1(m, rp.scheme_for(0x23))
    assert d.sym_ciphers == (1, 0x10) and d.n_a == n_a and d.pub_a == pub and d.ignored == b""
    # Receivers MUST permit and ignore bytes after Pub_A (8548 §4.1).
    m2 = rp.encode_init1([1], n_a, pub, ignored=b"trailing")
    d2 = rp.decode_init1(m2, rp.scheme_for(0x23))
    assert d2.pub_a == pub and d2.ignored == b"trailing" and d2.raw == m2
    # message_len too short for the fields, and bad magic.
    bad = bytearray(m)
    bad[4:8] = struct.pack(">I", len(m) - 1)
    with pytest.raises(rp.HandshakeError):
        rp.decode_init1(bytes(bad[:-1]), rp.scheme_for(0x23))
    with pytest.raises(rp.HandshakeError):
        rp.decode_init1(b"\x15\x10\x1a\x0f" + m[4:], rp.scheme_for(0x23))
    with pytest.raises(rp.HandshakeError):
        rp.decode_init2(m, rp.scheme_for(0x23))


def test_init2_layout():
    n_b, pub = os.urandom(32), os.urandom(32)
    m = rp.encode_init2(0x0002, n_b, pub)
    assert m[:4] == bytes.fromhex("097105e0") and struct.unpack(">I", m[4:8])[0] == len(m) == 74
    assert m[8:10] == b"\x00\x02" and m[10:42] == n_b and m[42:] == pub
    d = rp.decode_init2(m + b"", rp.scheme_for(0x23))
    assert d.sym_cipher == 2 and d.n_b == n_b and d.pub_b == pub


def test_p256_pubkey_encoding():
    sch = rp.scheme_for(0x21)
    priv = sch.generate()
    field = sch.encode_pub(priv)
    # 8548 §5: two-byte big-endian pubkey_len, then the compressed point (33 bytes for P-256).
    assert len(field) == 35 and field[:2] == b"\x00\x21" and field[2] in (2, 3)
    assert sch.decode_pub(field).public_numbers() == priv.public_key().public_numbers()
    m = rp.encode_init1([1], os.urandom(32), field)
    assert len(m) == 9 + 2 + 32 + 35 and rp.decode_init1(m, sch).pub_a == field
    unc = priv.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    with pytest.raises(rp.HandshakeError):
        sch.decode_pub(struct.pack(">H", len(unc)) + unc)                    # strict: not compressed
    assert rp.scheme_for(0x21, strict_p256=False).decode_pub(struct.pack(">H", len(unc)) + unc)
    with pytest.raises(rp.HandshakeError):
        sch.decode_pub(b"\x00\x21\x02" + b"\xff" * 32)                      # x >= p: not on curve


# ===================================================================== Peer over socketpair

@pytest.mark.parametrize("tep", [rp.TEP_CURVE25519, rp.TEP_P256])
@pytest.mark.parametrize("aead", [rp.AEAD_AES_128_GCM, rp.AEAD_AES_256_GCM, rp.AEAD_CHACHA20_POLY1305])
def test_peer_handshake_and_data(tep, aead):
    A, B = _pair(tep, aead)
    assert A.aead == B.aead == aead
    assert A.session_id == B.session_id and len(A.session_id) == 33 and A.session_id[0] == tep
    assert A.init1 == B.init1 and A.init2 == B.init2
    big = os.urandom(1_200_000)
    # A -> B: empty frame, small, big; B -> A concurrently.
    back = os.urandom(70_000)

    def a_side():
        A.send(b"")
        A.send(b"x")
        A.send(big)
        A.shutdown_write()
        return A.recv_all()

    def b_side():
        got = B.recv_all()
        return got

    def b_send():
        B.send(back)
        B.send(b"")
        B.shutdown_write()

    t = threading.Thread(target=b_send)
    t.start()
    got_a, got_b = _both(a_side, b_side)
    t.join(10)
    assert got_b == b"x" + big
    assert got_a == back
    assert A.fin_received and B.fin_received and A.fin_sent and B.fin_sent
    assert A.recv() == b"" and B.recv() == b""          # EOF is sticky
    B.expect_tcp_eof()
    A.expect_tcp_eof()


def test_cipher_selection_by_b_preference():
    A, B = _pair(a_ciphers=[1, 2, 0x10], b_ciphers=[0x10, 2])
    assert A.aead == B.aead == 0x10
    assert rp.decode_init1(A.init1, rp.scheme_for(0x23)).sym_ciphers == (1, 2, 0x10)


def test_no_common_cipher_aborts():
    t = rp.transcript(rp.encode_eno_syn([0x23]), rp.encode_eno_syn([0x23], b=1))
    s1, s2 = socket.socketpair()
    s1.settimeout(5)
    A, B = rp.Peer(s1, "A", 0x23, t, ciphers=[1]), rp.Peer(s2, "B", 0x23, t, ciphers=[2])
    a_err: list[Exception] = []

    def a_side():
        try:
            A.handshake()
        except rp.TcpcryptError as e:
            a_err.append(e)

    with pytest.raises(rp.HandshakeError, match="no acceptable AEAD"):
        _both(a_side, B.handshake)          # B aborts (8548 §3.3) ...
    assert B.aborted
    assert isinstance(a_err[0], rp.TruncationError)   # ... so A sees the stream end mid-handshake


def _raw_b(tep=rp.TEP_CURVE25519):
    """A Peer A against a hand-driven raw socket playing B."""
    t = rp.transcript(rp.encode_eno_syn([tep]), rp.encode_eno_syn([tep], b=1))
    s1, s2 = socket.socketpair()
    s1.settimeout(5)
    s2.settimeout(5)
    return rp.Peer(s1, "A", tep, t, ciphers=[1]), s2, t


def _recv_n(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        assert c
        b += c
    return b


def test_init2_with_unoffered_cipher_aborts():
    A, raw, t = _raw_b()

    def fake_b():
        hdr = _recv_n(raw, 8)
        _recv_n(raw, struct.unpack(">I", hdr[4:])[0] - 8)
        pub = x25519.X25519PrivateKey.generate().public_key().public_bytes_raw()
        raw.sendall(rp.encode_init2(0x0002, os.urandom(32), pub))

    with pytest.raises(rp.HandshakeError, match="not offered"):
        _both(A.handshake, fake_b)


def test_x25519_all_zero_shared_secret_aborts():
    A, raw, t = _raw_b()

    def fake_b():
        hdr = _recv_n(raw, 8)
        _recv_n(raw, struct.unpack(">I", hdr[4:])[0] - 8)
        raw.sendall(rp.encode_init2(0x0001, os.urandom(32), bytes(32)))   # low-order point -> ES = 0

    with pytest.raises(rp.HandshakeError):
        _both(A.handshake, fake_b)


def test_independent_key_schedule_recomputation():
    """Play host A by hand (Init1 with trailing ignored bytes, R2), let Peer B answer, recompute the whole
    key schedule from 8548 §3.3/§3.4/§3.6 with library primitives and decrypt B's first frame."""
    tep = rp.TEP_CURVE25519
    t = rp.transcript(rp.encode_eno_syn([tep]), rp.encode_eno_syn([tep], b=1))
    s1, s2 = socket.socketpair()
    s1.settimeout(5)
    B = rp.Peer(s2, "B", tep, t, ciphers=[rp.AEAD_AES_128_GCM])
    priv = x25519.X25519PrivateKey.generate()
    n_a = os.urandom(32)
    init1 = rp.encode_init1([1], n_a, priv.public_key().public_bytes_raw(), ignored=b"IGNORED")
    s1.sendall(init1)
    B.handshake()
    B.send(b"hello from B")
    hdr = _recv_n(s1, 8)
    init2 = hdr + _recv_n(s1, struct.unpack(">I", hdr[4:])[0] - 8)
    es = priv.exchange(x25519.X25519PublicKey.from_public_bytes(init2[42:74]))
    prk = hmac.new(n_a, t + init1 + init2 + es, hashlib.sha256).digest()
    assert B.session_id == bytes([tep]) + HKDFExpand(hashes.SHA256(), 32, b"\x02").derive(prk)
    mk0 = HKDFExpand(hashes.SHA256(), 32, b"\x03").derive(prk)
    k_ba = HKDFExpand(hashes.SHA256(), 16 + 12, b"\x05").derive(mk0)
    key, nr = k_ba[:16], k_ba[16:]
    control, clen = struct.unpack(">BH", _recv_n(s1, 3))
    ct = _recv_n(s1, clen)
    offset = len(init2)                                  # reading R1: B's stream starts with Init2
    nonce = bytes(x ^ y for x, y in zip(bytes(4) + offset.to_bytes(8, "big"), nr))
    pt = AESGCM(key).decrypt(nonce, ct, struct.pack(">BH", control, clen))
    assert control == 0 and pt == b"\x00hello from B"


def test_offset_base_frames_variant_interoperates_only_with_itself():
    A, B = _pair(offset_base="frames", record=True)
    A.send(b"abc")
    assert B.recv() == b"abc" and A.sent_frames[0].offset == 0
    A2, B2 = _pair(record=True)
    A2.send(b"abc")
    assert B2.recv() == b"abc" and A2.sent_frames[0].offset == len(A2.init1)


def test_tampered_ciphertext_raises():
    A, B = _pair()
    f = bytearray(A.seal(b"secret payload"))
    f[3 + 5] ^= 0x01
    A.send_raw(bytes(f))
    with pytest.raises(rp.AuthenticationError):
        B.recv()


def test_tampered_tag_raises():
    A, B = _pair(aead=rp.AEAD_CHACHA20_POLY1305)
    f = bytearray(A.seal(b"secret payload"))
    f[-1] ^= 0x80
    A.send_raw(bytes(f))
    with pytest.raises(rp.AuthenticationError):
        B.recv()


@pytest.mark.parametrize("delta", [-1, +1])
def test_tampered_clen_raises(delta):
    A, B = _pair()
    f1 = bytearray(A.seal(b"first frame data"))
    f2 = A.seal(b"second frame")
    clen = struct.unpack(">H", f1[1:3])[0]
    f1[1:3] = struct.pack(">H", clen + delta)
    A.send_raw(bytes(f1) + f2)
    with pytest.raises(rp.AuthenticationError):
        B.recv()


@pytest.mark.parametrize("bit", [0x01, 0x80])   # rekey bit (wrong key generation) / a cres bit (in AD)
def test_tampered_control_raises(bit):
    A, B = _pair()
    f = bytearray(A.seal(b"data"))
    f[0] ^= bit
    A.send_raw(bytes(f))
    with pytest.raises(rp.AuthenticationError):
        B.recv()


def test_tcp_eof_without_finp_is_not_eof():
    A, B = _pair()
    A.send(b"partial")
    A.sock.shutdown(socket.SHUT_WR)            # TCP FIN without a FINp frame
    assert B.recv() == b"partial"
    with pytest.raises(rp.TruncationError):
        B.recv()


def test_truncated_frame_raises():
    A, B = _pair()
    f = A.seal(b"0123456789")
    A.send_raw(f[:-3])
    A.sock.shutdown(socket.SHUT_WR)
    with pytest.raises(rp.TruncationError):
        B.recv()


def test_no_frames_after_finp():
    A, B = _pair()
    A.shutdown_write(b"last")
    with pytest.raises(rp.ProtocolError):
        A.send(b"more")
    assert B.recv_all() == b"last"


@pytest.mark.parametrize("aead", sorted(rp.AEADS))
def test_frame_overhead_16k(aead):
    A, B = _pair(aead=aead)
    f = A.seal(b"\x00" * 16384)
    # 8548 §4.2: control(1) + clen(2) + ciphertext; ciphertext = AEAD(flags(1) | data) = 1 + 16384 + tag(16)
    assert len(f) == 16384 + 3 + 1 + 16 == 16384 + rp.frame_overhead(aead)
    assert struct.unpack(">H", f[1:3])[0] == 16384 + 1 + 16
    assert rp.max_frame_data(aead) == 65535 - 17
    big = A.seal(b"\x01" * rp.max_frame_data(aead))
    assert struct.unpack(">H", big[1:3])[0] == 65535
    with pytest.raises(ValueError):
        A.seal(b"\x01" * (rp.max_frame_data(aead) + 1))
    A.send_raw(f + big)
    assert B.recv_exactly(16384 + rp.max_frame_data(aead)) == b"\x00" * 16384 + b"\x01" * (65535 - 17)


def test_nonces_never_repeat():
    A, B = _pair(record=True, chunk=97)
    data = os.urandom(97 * 3000 + 13)
    _both(lambda: (A.send(data), A.send(b""), A.rekey(), A.send(b"x" * 500), A.shutdown_write()),
          lambda: B.recv_all())
    frames = A.sent_frames
    assert len(frames) > 3000
    # Offsets are contiguous from len(Init1) (R1) and every (generation, nonce) is unique.
    off = len(A.init1)
    for fr in frames:
        assert fr.offset == off
        off += 3 + fr.clen
    assert len({(fr.generation, fr.nonce) for fr in frames}) == len(frames)
    assert len({fr.nonce for fr in frames if fr.generation == 0}) == sum(fr.generation == 0 for fr in frames)
    # The receiver reconstructed the same nonces (frame ID implicit in the stream, 8548 §3.6).
    assert [(r.offset, r.nonce) for r in B.recv_frames] == [(s.offset, s.nonce) for s in frames]
    # B's own frames (the rekey response) use different keys, so nonces across directions are unrelated.
    assert frames[-1].fin and sum(fr.fin for fr in frames) == 1


def test_rekey_and_response():
    A, B = _pair(record=True)
    A.send(b"before")
    assert B.recv() == b"before"
    A.rekey()                                     # empty frame with rekey = 1 under generation 1
    A.send(b"after")
    assert B.recv() == b"after"
    # B matched the generation and answered with a rekey = 1 frame (8548 §3.8).
    assert B.local_generation == B.remote_generation == 1
    assert B.sent_frames[-1].control & rp.CONTROL_REKEY and B.sent_frames[-1].generation == 1
    B.send(b"reply")
    assert A.recv() == b"reply"
    assert A.remote_generation == 1 and A.local_generation == 1
    assert [f.control & 1 for f in A.sent_frames] == [0, 1, 0]
    # A did not answer B's rekey frame (reading R4): no extra frame from A.
    A.shutdown_write()
    assert B.recv_all() == b""
    assert [f.generation for f in B.recv_frames] == [0, 1, 1, 1]


def test_double_empty_rekey_refused():
    A, B = _pair()
    A.rekey()
    with pytest.raises(rp.ProtocolError):
        A.rekey()


def test_urgent_field():
    A, B = _pair()
    A.send_urgent(b"!!", 1)
    A.send(b"tail")
    assert B.recv_exactly(6) == b"!!tail"
    assert B.urgent_events == [(len(A.init1), 1)]


def test_session_resumption():
    A, B = _pair(tep=rp.TEP_P256, aead=rp.AEAD_AES_256_GCM)
    ss1_a, ss1_b = A.session_secret(1), B.session_secret(1)
    assert ss1_a == ss1_b != A.ss0
    # New connection: the original B now actively opens (role A) -- keys still follow the original roles.
    nonce_from_orig_b, nonce_from_orig_a = os.urandom(8), b""
    sa = rp.resumption_suboption(rp.TEP_P256, ss1_b, "B", nonce_from_orig_b)   # new A = orig. B: Figure 3
    sb = rp.resumption_suboption(rp.TEP_P256, ss1_a, "A", nonce_from_orig_a)   # new B = orig. A: Figure 2
    assert sa.data[:9] == rp.resume_identifier(ss1_b)[9:] and sb.data[:9] == rp.resume_identifier(ss1_a)[:9]
    n = rp.negotiate(rp.encode_eno_syn([sa]), rp.encode_eno_syn([sb], b=1))
    assert n.ok and not n.fresh and n.tep_byte == 0xA1
    # 8548 §3.5: sn[i] = nonce_a | nonce_b, named after the original roles (reading R12).
    sn = rp.session_nonce(sb, sa)
    assert sn == nonce_from_orig_a + nonce_from_orig_b
    s1, s2 = socket.socketpair()
    newA = rp.Peer(s1, "A", rp.TEP_P256, n.transcript, resume=rp.Resume(ss1_b, sn, "B"), aead=A.aead).handshake()
    newB = rp.Peer(s2, "B", rp.TEP_P256, n.transcript, resume=rp.Resume(ss1_a, sn, "A"), aead=A.aead).handshake()
    assert newA.session_id == newB.session_id and newA.session_id[0] == 0xA1
    assert newA.session_id != A.session_id and len(newA.session_id) == 33
    newA.send(b"resumed A->B")
    newB.send(b"resumed B->A")
    assert newB.recv() == b"resumed A->B" and newA.recv() == b"resumed B->A"
    # Wrong original role on one side -> that side encrypts with the wrong key -> tag failure.
    s3, s4 = socket.socketpair()
    x = rp.Peer(s3, "A", rp.TEP_P256, n.transcript, resume=rp.Resume(ss1_b, sn, "A"), aead=A.aead).handshake()
    y = rp.Peer(s4, "B", rp.TEP_P256, n.transcript, resume=rp.Resume(ss1_a, sn, "A"), aead=A.aead).handshake()
    x.send(b"z")
    with pytest.raises(rp.AuthenticationError):
        y.recv()


def test_transcript_mismatch_gives_different_keys():
    # 8547 §4.8: altered SYN options must make the TEP fail: different transcripts -> different keys.
    tep = rp.TEP_CURVE25519
    t1 = rp.transcript(rp.encode_eno_syn([tep]), rp.encode_eno_syn([tep], b=1))
    t2 = rp.transcript(rp.encode_eno_syn([0x21, tep]), rp.encode_eno_syn([tep], b=1))
    s1, s2 = socket.socketpair()
    A, B = rp.Peer(s1, "A", tep, t1), rp.Peer(s2, "B", tep, t2)
    _both(A.handshake, B.handshake)
    assert A.session_id != B.session_id
    A.send(b"hi")
    with pytest.raises(rp.AuthenticationError):
        B.recv()


def test_api_guards():
    s1, s2 = socket.socketpair()
    p = rp.Peer(s1, "A", 0x23, b"\x45\x03\x23\x45\x04\x01\x23")
    with pytest.raises(rp.TcpcryptError):
        p.send(b"x")
    with pytest.raises(ValueError):
        rp.Peer(s1, "C", 0x23, b"")
    with pytest.raises(ValueError):
        rp.Peer(s1, "A", 0x24, b"")          # Curve448 not implemented here
    with pytest.raises(ValueError):
        rp.encode_eno_syn([0x1F])
    with pytest.raises(ValueError):
        rp.encode_eno_syn([rp.Suboption(0x23, True, b"\x00" * 40)])   # > 40 bytes of TCP options


# ===================================================================== pcap extraction

def _handshake_pcap(tmp_path, *, synack_eno=True, ack_eno=True, extra_conn=False, linktype=wire.LINKTYPE_ETHERNET,
                    big_endian=False, syn_enos=None):
    c, s = "10.0.0.1", "10.0.0.2"
    syn_eno = rp.encode_eno_syn([0x21, 0x23])
    sa_eno = rp.encode_eno_syn([0x23], b=1)
    mss = b"\x02\x04\x05\xb4"
    sackok = b"\x04\x02"
    ts = b"\x08\x0a" + struct.pack(">II", 1, 0)
    ws = b"\x03\x03\x07"
    syn_opts = mss + sackok + ts + b"\x01" + ws + b"".join(syn_enos if syn_enos is not None else [syn_eno])
    sa_opts = mss + sackok + ts + b"\x01" + ws + (sa_eno if synack_eno else b"")
    pk = []
    if extra_conn:   # an earlier, unrelated connection to another port
        pk.append(wire.build_tcp_segment(c, 40000, s, 22, flags=wire.TCP_SYN, seq=5, options=mss,
                                         linktype=linktype))
    pk += [
        wire.build_tcp_segment(c, 41000, s, 8080, flags=wire.TCP_SYN, seq=100, options=syn_opts, linktype=linktype),
        wire.build_tcp_segment(s, 8080, c, 41000, flags=wire.TCP_SYN | wire.TCP_ACK, seq=900, ack=101,
                               options=sa_opts, linktype=linktype),
        wire.build_tcp_segment(c, 41000, s, 8080, flags=wire.TCP_ACK, seq=101, ack=901,
                               options=b"\x01\x01" + (rp.encode_eno_nonsyn() if ack_eno else b""), linktype=linktype),
        wire.build_tcp_segment(c, 41000, s, 8080, flags=wire.TCP_ACK | wire.TCP_PSH, seq=101, ack=901,
                               payload=b"\x15\x10\x1a\x0e" + bytes(71), linktype=linktype),
        wire.build_tcp_segment(s, 8080, c, 41000, flags=wire.TCP_ACK, seq=901, ack=176, linktype=linktype),
    ]
    path = tmp_path / "hs.pcap"
    wire.write_pcap(path, pk, linktype=linktype, big_endian=big_endian)
    return path, syn_eno, sa_eno


@pytest.mark.parametrize("linktype,big_endian", [(wire.LINKTYPE_ETHERNET, False), (wire.LINKTYPE_ETHERNET, True),
                                                 (wire.LINKTYPE_RAW, False)])
def test_pcap_transcript_extraction(tmp_path, linktype, big_endian):
    path, syn_eno, sa_eno = _handshake_pcap(tmp_path, linktype=linktype, big_endian=big_endian)
    info = wire.eno_from_pcap(path)
    assert info.active == ("10.0.0.1", 41000) and info.passive == ("10.0.0.2", 8080)
    assert info.syn_eno == syn_eno and info.synack_eno == sa_eno
    assert info.transcript == syn_eno + sa_eno
    assert info.negotiation.ok and info.negotiation.tep == 0x23 and info.active_role == "A"
    assert [s.index for s in info.eno_segments] == [0, 1, 2]
    assert [s.flag_str for s in info.eno_segments] == ["S", "SA", "A"]
    assert info.third_segment_has_eno
    assert info.eno_segments[2].eno == [b"\x45\x02"]
    assert [s.payload_len for s in info.segments] == [0, 0, 0, 75, 0]


def test_pcap_first_connection_and_port_filter(tmp_path):
    path, syn_eno, sa_eno = _handshake_pcap(tmp_path, extra_conn=True)
    first = wire.eno_from_pcap(path)
    assert first.passive[1] == 22 and first.syn_eno is None and first.synack is None
    assert first.transcript is None and not first.negotiation.ok
    info = wire.eno_from_pcap(path, port=8080)
    assert info.transcript == syn_eno + sa_eno and info.syn.index == 1
    with pytest.raises(ValueError):
        wire.eno_from_pcap(path, port=9999)


def test_pcap_failed_negotiations(tmp_path):
    path, _, _ = _handshake_pcap(tmp_path, synack_eno=False, ack_eno=False)
    info = wire.eno_from_pcap(path)
    assert info.synack_eno is None and info.transcript is None and not info.third_segment_has_eno
    assert [s.index for s in info.eno_segments] == [0]
    # Two ENO options in the SYN: the receiver must act as if there were none (8547 §4.1).
    path, _, _ = _handshake_pcap(tmp_path, syn_enos=[rp.encode_eno_syn([0x23]), rp.encode_eno_syn([0x21])])
    info = wire.eno_from_pcap(path)
    assert info.syn_eno_count == 2 and info.syn_eno is None and info.transcript is None


def test_pcap_rejects_pcapng(tmp_path):
    p = tmp_path / "x.pcapng"
    p.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))
    with pytest.raises(ValueError, match="pcapng"):
        wire.eno_from_pcap(p)


def test_pcap_transcript_drives_peers(tmp_path):
    """The transcript read from the wire is what the Peers feed into PRK (the interop-test path)."""
    path, _, _ = _handshake_pcap(tmp_path)
    info = wire.eno_from_pcap(path)
    s1, s2 = socket.socketpair()
    A = rp.Peer(s1, info.active_role, info.negotiation.tep, info.transcript)
    B = rp.Peer(s2, "B", info.negotiation.tep, info.transcript, tep_byte=info.negotiation.tep_byte)
    _both(A.handshake, B.handshake)
    assert A.session_id == B.session_id
    A.send(b"ping")
    assert B.recv() == b"ping"
