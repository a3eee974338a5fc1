"""Independent tcpcrypt (RFC 8548) + TCP-ENO (RFC 8547) test peer, written from the RFC text only.

This module is deliberately self-contained: it was written from
/work/shared/docs/rfc/rfc8547.txt and rfc8548.txt, without looking at wearlab's own tcpcrypt
daemon, so that interop tests against the daemon are an independent check of both.

It runs tcpcrypt *in user space over an ordinary, already-connected TCP byte stream*: the TCP-ENO
part (SYN options) cannot be produced from user space, so the caller supplies the negotiated TEP
and the ENO negotiation transcript (e.g. taken from the wire with tcpcrypt_wire.py), and `Peer`
runs everything that lives in the TCP *data* stream: Init1/Init2 key exchange (RFC 8548 §3.3,
§4.1) and encryption frames (§3.6, §4.2).

Citations: "8547 §x" = RFC 8547 (TCP-ENO), "8548 §x" = RFC 8548 (tcpcrypt).

Ambiguities and the readings chosen (also repeated where the code applies them):

 R1  Frame-ID offset base (8548 §3.6).  "the zero-indexed byte offset of the beginning of the
     current encryption frame in the underlying TCP datastream.  (That is, the offset in the
     framing stream, not the plaintext application stream.)"  Read literally, offset 0 is the
     first byte of the host's TCP data stream, so for a fresh key exchange the first frame of host
     A sits at offset len(Init1) and host B's first frame at len(Init2) (Init1/Init2 are "at the
     start of the data streams of host A and host B", §3.3).  With resumption there is no Init
     message so the first frame is at offset 0.  The parenthesis only contrasts "framing stream"
     with "plaintext application stream" (frame headers, flags and tags count), it does not say
     the Init messages are excluded.  Default: literal reading.  `Peer(offset_base="frames")`
     selects the other reading (offset 0 = first frame byte) so an interop failure can be
     diagnosed as "the other side chose the other reading".
 R2  "Init1 and Init2 are the transmitted encodings" (8548 §3.3, PRK input): we hash the whole
     message exactly as transmitted, i.e. all message_len bytes including any trailing "ignored"
     bytes (§4.1) the sender may have appended.
 R3  CONST_* values (8548 §4.3) are single octets (they are written as 0x01..0x06 and §3.1 says
     the HKDF counter is a single octet to the right of CONST; "CONST_REKEY | sn[i]" is that octet
     followed by the session nonce).  INIT1_MAGIC/INIT2_MAGIC fill the 4-byte magic field of
     §4.1, big-endian like every other multi-byte field of §4.
 R4  Rekey response (8548 §3.8): "If the remote generation number is now greater than the local
     generation number, the receiver MUST immediately increment its local generation number to
     match.  Moreover, if the receiver has not yet transmitted a segment with the FIN flag set, it
     MUST immediately send a frame ... with rekey = 1."  We read the "Moreover" sentence as part
     of the "remote > local" case: if it applied to every rekey=1 frame, the initiator would have
     to answer the responder's rekey=1 frame, and so on forever.
 R5  P-256 public keys (8548 §5): Pub is a 2-byte big-endian pubkey_len L followed by the
     IEEE 1363 E.2.3 octet string, which "MUST" be in compressed format, so L = 33 and Pub
     occupies 35 bytes of Init1/Init2.  We always send compressed.  On receive we are strict (this
     is a conformance peer): a point that is not compressed (first octet not 0x02/0x03, or
     L != 33) is rejected as a key-validation failure; `Peer(strict_p256=False)` accepts any
     encoding the IEEE 1363 conversion primitive defines (compressed or uncompressed).  The shared
     secret ES for ECSVDP-DH is the x coordinate of the shared point as a 32-byte big-endian
     string (IEEE 1363 ECSVDP-DH output, field-element-to-octet-string).
 R6  Multiple suboptions with the same TEP (8547 §4.5 rule 3): tcpcrypt does not define the
     repetition of one TEP identifier in a SYN (8548 §3.5 forbids two resumption suboptions with
     the same TEP and only allows non-resumption suboptions "describing other TEPs"), so a tcpcrypt
     TEP repeated within one ENO option is treated as not valid.  `negotiate(allow_repeat=...)`
     can override that for a TEP that defines repetition.
 R7  The session-ID TEP-byte (8548 §3.4, 8547 §5.1) is the byte *as host B transmitted it*,
     v bit included, even in the 8548 §3.5 case where a v = 1 suboption with < 9 bytes of data is
     treated "as if the same TEP had been sent with v = 0".
 R8  Empty encryption frames (data of length zero) are legal: 8548 §3.8/§3.9 explicitly send
     frames "with empty application data".  `send(b"")` emits one; `recv()` skips them (an empty
     frame is not end-of-file: only FINp is, 8548 §3.7).
 R9  Mandatory application-aware mode (8547 §4.2, §4.6 rule 3): a host in that mode itself sends
     a = 1 (8547 §8.4) and disables ENO if the remote a = 0, so from a third party's viewpoint the
     mode succeeds iff both a bits are 1; `negotiate(mandatory_app_aware=True)` checks exactly
     that.
 R10 The RFCs set no upper bound on Init1/Init2 message_len.  To avoid being made to buffer
     unbounded data we refuse message_len > MAX_INIT_LEN (64 KiB), an implementation limit.
 R12 Resumption session nonce (8548 §3.5): "sn[i] = nonce_a | nonce_b".  Figures 2 and 3 put nonce_a
     in the suboption "sent when original role was 'A'" (next to resume[i]{0..8}) and nonce_b in the
     one sent when the original role was "B".  So nonce_a/nonce_b are named after the roles of the
     *original* session (consistent with the keys, which also follow the original roles), not after
     the current connection's TCP-ENO roles; sn[i] = (nonce of the host that was originally A) |
     (nonce of the host that was originally B).  See session_nonce().  The AEAD of a resumed session
     is likewise not renegotiated (there are no Init messages); we reuse the original session's.
 R11 8548 §4.1 gives nciphers one byte (offset 8, ciphers start at 9, N_A at 2*K + 9).  K = 0 is
     not forbidden by the encoding; host B then has nothing to select and aborts.

Nothing here is tuned to the daemon; where the RFC offers freedom (cipher order, chunk size) the
choice is a constructor argument.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

# =====================================================================================
# Constants
# =====================================================================================

# --- RFC 8547 (TCP-ENO) -------------------------------------------------------------
ENO_KIND = 69                 # 8547 §4.1 Figure 1 "Kind=69"; §11 Table 2 "| 69 | N | Encryption Negotiation"
ENO_MAX_OPTION_LEN = 40       # 8547 §4.4: "the TCP header itself can only accommodate a maximum of 40 bytes of options"
GLOBAL_MAX = 0x1F             # 8547 §4.1 Table 1: glt 0x00-0x1f = global suboption (v=0) / length byte (v=1)
TEP_MIN = 0x20                # 8547 §3 "A unique 7-bit value in the range 0x20-0x7f"
TEP_MAX = 0x7F
TEP_EXPERIMENTAL = 0x20       # 8547 §11 Table 3 "| 0x20 | Experimental Use |"
TEP_RESERVED_EXTENDED = range(0x70, 0x80)   # 8547 §11 Table 3 "| 0x70-0x7f | Reserved for extended values |"
V_BIT = 0x80                  # 8547 §4.1 Figure 4: bit 7 "v"
GLOBAL_B = 0x01               # 8547 §4.2 Figure 5: bit 0 "b - Passive role bit"
GLOBAL_A = 0x02               # 8547 §4.2 Figure 5: bit 1 "a - Application-aware bit"
GLOBAL_Z = 0x1C               # 8547 §4.2 Figure 5: z1 z2 z3 (bits 4,3,2), reserved, sent 0, ignored
LENGTH_BYTE_TAG = 0x80        # 8547 §4.4 Figure 6: "| 1 0 0 nnnnn |"
LENGTH_MAX = 32               # 8547 §4.4: "a length byte can designate anywhere from 1 to 32 bytes"
SESSION_ID_MIN_LEN = 33       # 8547 §5.1: "The session ID MUST be at least 33 bytes"

# --- RFC 8548 (tcpcrypt) ------------------------------------------------------------
# 8548 §7 Table 4: TEP identifiers for use with tcpcrypt.
TEP_P256 = 0x21               # "| 0x21  | TCPCRYPT_ECDHE_P256       |"
TEP_P521 = 0x22               # "| 0x22  | TCPCRYPT_ECDHE_P521       |"  (not implemented here)
TEP_CURVE25519 = 0x23         # "| 0x23  | TCPCRYPT_ECDHE_Curve25519 |"
TEP_CURVE448 = 0x24           # "| 0x24  | TCPCRYPT_ECDHE_Curve448   |"  (not implemented here)
TCPCRYPT_TEPS = (TEP_P256, TEP_P521, TEP_CURVE25519, TEP_CURVE448)
IMPLEMENTED_TEPS = (TEP_P256, TEP_CURVE25519)

# 8548 §7 Table 5: tcpcrypt AEAD algorithm identifiers (two-byte, 0x0001-0xFFFF).
AEAD_AES_128_GCM = 0x0001        # "| 0x0001 | AEAD_AES_128_GCM       |"
AEAD_AES_256_GCM = 0x0002        # "| 0x0002 | AEAD_AES_256_GCM       |"
AEAD_CHACHA20_POLY1305 = 0x0010  # "| 0x0010 | AEAD_CHACHA20_POLY1305 |"

# 8548 §4.3 Table 1: constant values (see R3: CONST_* are one octet).
CONST_NEXTK = 0x01
CONST_SESSID = 0x02
CONST_REKEY = 0x03
CONST_KEY_A = 0x04
CONST_KEY_B = 0x05
CONST_RESUME = 0x06
INIT1_MAGIC = 0x15101A0E
INIT2_MAGIC = 0x097105E0

# 8548 §5: "N_A_LEN: 32 bytes / N_B_LEN: 32 bytes / K_LEN: 32 bytes" for all TEPs of this document.
N_A_LEN = 32
N_B_LEN = 32
K_LEN = 32

# 8548 §3.5: resume[i] = CPRF(ss[i], CONST_RESUME, 18); halves {0..8} and {9..17}; nonce 0..8 bytes.
RESUME_ID_LEN = 18
RESUME_HALF_LEN = 9
RESUME_NONCE_MAX = 8

# 8548 §4.2: control byte = cres(7 bits) | rekey(bit 0); flags = fres(6) | URGp(bit 1) | FINp(bit 0).
CONTROL_REKEY = 0x01
FLAG_FINP = 0x01
FLAG_URGP = 0x02
FRAME_HEADER_LEN = 3          # 8548 §4.2: control (1) + clen (2)
PLAINTEXT_FLAGS_LEN = 1       # 8548 §4.2.1: flags (1) [+ urgent (2) when URGp]
URGENT_LEN = 2
CLEN_LIMIT = 1 << 16          # 8548 §3.6: "ciphertext ... has length less than 2^16 bytes"
FRAME_OFFSET_LEN = 8          # 8548 §4.2.3: "The 8-byte offset field"
OFFSET_LIMIT = 1 << 64        # 8548 §3.6: "MUST NOT transmit more than 2^64 bytes ... before rekeying"

# Init message fixed-size parts (8548 §4.1 figures).
INIT_HEADER_LEN = 8           # magic (4) + message_len (4)
INIT1_FIXED_LEN = 9           # + nciphers (1); sym_cipher[0] begins at byte 9
INIT2_FIXED_LEN = 10          # + sym_cipher (2); N_B begins at byte 10
P256_PUBKEY_PREFIX_LEN = 2    # 8548 §5: two-byte pubkey_len
P256_COMPRESSED_LEN = 33      # IEEE 1363 E.2.3 compressed point for a 256-bit field: 1 + 32
X25519_PUB_LEN = 32           # 8548 §5: "32 bytes for ECDHE-Curve25519"
MAX_INIT_LEN = 64 * 1024      # R10: implementation limit, not from the RFC


@dataclass(frozen=True)
class AeadParams:
    ident: int
    name: str
    key_len: int      # ae_key_len, 8548 §6 Table 3
    nonce_len: int    # ae_nonce_len, 8548 §6 Table 3
    tag_len: int      # RFC 5116 §5.1/§5.2 (GCM: 16-octet tag), RFC 8439 §2.8 (Poly1305: 16-octet tag)
    factory: Callable[[bytes], object]


# 8548 §6 Table 3:
# | AEAD_AES_128_GCM       | REQUIRED    | 16 bytes   | 12 bytes     |
# | AEAD_AES_256_GCM       | RECOMMENDED | 32 bytes   | 12 bytes     |
# | AEAD_CHACHA20_POLY1305 | RECOMMENDED | 32 bytes   | 12 bytes     |
AEADS: dict[int, AeadParams] = {
    AEAD_AES_128_GCM: AeadParams(AEAD_AES_128_GCM, "AEAD_AES_128_GCM", 16, 12, 16, AESGCM),
    AEAD_AES_256_GCM: AeadParams(AEAD_AES_256_GCM, "AEAD_AES_256_GCM", 32, 12, 16, AESGCM),
    AEAD_CHACHA20_POLY1305: AeadParams(AEAD_CHACHA20_POLY1305, "AEAD_CHACHA20_POLY1305", 32, 12, 16,
                                       ChaCha20Poly1305),
}
DEFAULT_CIPHERS = (AEAD_AES_128_GCM, AEAD_AES_256_GCM, AEAD_CHACHA20_POLY1305)


def frame_overhead(aead_id: int, urgent: bool = False) -> int:
    """Bytes a frame adds on the wire beyond its application data (8548 §4.2, §4.2.1):
    control(1) + clen(2) + flags(1) [+ urgent(2)] + AEAD tag."""
    return FRAME_HEADER_LEN + PLAINTEXT_FLAGS_LEN + (URGENT_LEN if urgent else 0) + AEADS[aead_id].tag_len


def max_frame_data(aead_id: int, urgent: bool = False) -> int:
    """Largest application-data chunk whose ciphertext still has clen < 2^16 (8548 §3.6)."""
    return CLEN_LIMIT - 1 - (frame_overhead(aead_id, urgent) - FRAME_HEADER_LEN)


# =====================================================================================
# Errors
# =====================================================================================

class TcpcryptError(Exception):
    """Base class.  Every error here is "distinct from the end-of-file condition" (8548 §3.3,
    §3.6, §3.7, §8): end of file is reported only as recv() returning b"" after FINp."""


class EnoParseError(TcpcryptError, ValueError):
    """Ill-formed SYN-form ENO option: the host "MUST ignore" it and disable encryption (8547 §4.4, §4.6)."""


class HandshakeError(TcpcryptError):
    """Init1/Init2 malformed, unknown magic, key-validation failure, bad cipher choice (8548 §3.3, §4.1, §5)."""


class AuthenticationError(TcpcryptError):
    """AEAD decryption returned FAIL (8548 §3.6): tampered ciphertext, clen, control byte, or wrong key."""


class ProtocolError(TcpcryptError):
    """Framing violations: data after FINp, truncated frame, short plaintext, offset wrap."""


class PeerAbortError(ProtocolError):
    """The remote host reset the connection (e.g. it aborted per 8548 §3.3/§3.6), wraps ConnectionResetError."""


class TruncationError(ProtocolError):
    """TCP end of stream without an authenticated FINp frame (8548 §3.7: "SHOULD abort the connection
    and raise an error condition distinct from the end-of-file condition")."""


# =====================================================================================
# RFC 8547: ENO option encoding / parsing
# =====================================================================================

@dataclass(frozen=True)
class Suboption:
    """A TEP suboption (8547 §4.1, Table 1: glt 0x20-0x7f).

    `v` is the v bit as transmitted; `data` the suboption data (8547 §4.4); `length_byte` whether it
    was (or is to be) introduced by an explicit length byte."""
    tep: int
    v: bool = False
    data: bytes = b""
    length_byte: bool = False

    @property
    def tep_byte(self) -> int:
        """The initial suboption byte "v | glt" (8547 §4.1 Figure 4); the byte 8548 §3.4 puts first in
        the session ID."""
        return (V_BIT if self.v else 0) | self.tep


@dataclass(frozen=True)
class EnoSynOption:
    """A parsed SYN-form ENO option (8547 §4.1 Figure 2)."""
    raw: bytes                       # the whole option, kind and length included (transcript form, 8547 §4.8)
    global_byte: Optional[int]       # first explicit global suboption, None if implicit (8547 §4.2)
    ignored_globals: tuple[int, ...]  # later global suboptions: "MUST ignore all but the first" (8547 §4.2)
    suboptions: tuple[Suboption, ...]

    @property
    def effective_global(self) -> int:
        # 8547 §4.2: "A SYN segment without an explicit global suboption has an implicit global
        # suboption of 0x00."
        return 0 if self.global_byte is None else self.global_byte

    @property
    def b(self) -> int:
        return self.effective_global & GLOBAL_B

    @property
    def a(self) -> int:
        return (self.effective_global & GLOBAL_A) >> 1

    @property
    def teps(self) -> tuple[int, ...]:
        return tuple(s.tep for s in self.suboptions)

    @property
    def vacuous(self) -> bool:
        # 8547 §4.6: "a SYN-form ENO option containing zero TEP identifier suboptions ... 'vacuous'"
        return not self.suboptions


def encode_global(b: int = 0, a: int = 0) -> int:
    """Global suboption byte (8547 §4.2 Figure 5): 0 0 0 z1 z2 z3 a b, z bits "MUST be set to zero"."""
    if b not in (0, 1) or a not in (0, 1):
        raise ValueError("a and b are single bits")
    return (a << 1) | b


def encode_eno_syn(suboptions: Iterable[Suboption | int], *, b: int = 0, a: int = 0,
                   explicit_global: Optional[bool] = None) -> bytes:
    """Encode a SYN-form ENO option (8547 §4.1 Figure 2), kind and length included.

    `suboptions` are Suboption objects or bare TEP ids (v = 0).  The global suboption is emitted
    first when `explicit_global` is True, or (default None) whenever b or a is 1 -- 8547 §4.2: a
    passive opener "MUST include an explicit global suboption" because b = 1, while an all-zero global
    may stay implicit.  A TEP with data that is not the last suboption gets a length byte (8547 §4.4
    "the sender MUST explicitly specify the suboption data length"); the last suboption with data
    (or with v = 1 and no data) relies on the option length instead.
    """
    subs = [Suboption(s) if isinstance(s, int) else s for s in suboptions]
    if explicit_global is False and (a or b):
        raise ValueError("a or b = 1 needs an explicit global suboption (8547 §4.2)")
    out = bytearray()
    if explicit_global or (explicit_global is None and (a or b)):
        out.append(encode_global(b, a))
    for idx, s in enumerate(subs):
        if not TEP_MIN <= s.tep <= TEP_MAX:
            raise ValueError(f"TEP id {s.tep:#x} outside 0x20-0x7f (8547 §3)")
        last = idx == len(subs) - 1
        has_data = bool(s.data)
        if has_data and not s.v:
            raise ValueError("suboption data requires v = 1 (8547 §4.1)")
        if s.v and not last:
            # 8547 §4.4: a non-last v=1 suboption needs a length byte, which encodes 1..32 bytes,
            # so a non-last suboption cannot carry zero bytes of data.
            if not 1 <= len(s.data) <= LENGTH_MAX:
                raise ValueError("a non-last suboption with data needs 1..32 data bytes (8547 §4.4)")
            out.append(LENGTH_BYTE_TAG | (len(s.data) - 1))
        elif s.v and s.length_byte:
            if not 1 <= len(s.data) <= LENGTH_MAX:
                raise ValueError("length byte encodes 1..32 data bytes (8547 §4.4)")
            out.append(LENGTH_BYTE_TAG | (len(s.data) - 1))
        out.append(s.tep_byte)
        out += s.data
    total = 2 + len(out)
    if total > ENO_MAX_OPTION_LEN:
        raise ValueError(f"ENO option of {total} bytes does not fit in TCP option space (8547 §4.4)")
    return bytes([ENO_KIND, total]) + bytes(out)


def encode_eno_nonsyn(contents: bytes = b"") -> bytes:
    """Non-SYN-form ENO option (8547 §4.1 Figure 3).  Without TEP-assigned meaning the contents
    "MUST be zero bytes (i.e., N = 0) in sent segments"."""
    return bytes([ENO_KIND, 2 + len(contents)]) + contents


def _check_option_header(opt: bytes) -> None:
    if len(opt) < 2 or opt[0] != ENO_KIND:
        raise EnoParseError("not an ENO option (kind must be 69, 8547 §4.1)")
    if opt[1] != len(opt) or opt[1] < 2:
        raise EnoParseError("ENO option length byte does not match (8547 §4.1 Figure 1: Len = N+2)")


def parse_eno_syn(opt: bytes) -> EnoSynOption:
    """Parse a SYN-form ENO option given as the full option bytes (kind, length, contents).

    Raises EnoParseError in the two cases where 8547 §4.4 says "A host MUST ignore an ENO option in a
    SYN segment and MUST disable encryption":
      1. "A length byte indicates that suboption data would extend beyond the end of the TCP ENO option."
      2. "A length byte is followed by an octet in the range 0x00-0x9f"
    """
    opt = bytes(opt)
    _check_option_header(opt)
    body = opt[2:]
    i = 0
    global_byte: Optional[int] = None
    ignored: list[int] = []
    subs: list[Suboption] = []
    while i < len(body):
        byte = body[i]
        v = bool(byte & V_BIT)
        glt = byte & 0x7F
        if glt <= GLOBAL_MAX and not v:
            # 8547 Table 1: glt 0x00-0x1f, v=0 -> global suboption.  §4.2: "A receiver MUST ignore all
            # but the first suboption in this range".
            if global_byte is None:
                global_byte = byte
            else:
                ignored.append(byte)
            i += 1
        elif glt <= GLOBAL_MAX and v:
            # 8547 Table 1: glt 0x00-0x1f, v=1 -> length byte (Figure 6, "1 0 0 nnnnn"), data length nnnnn+1.
            dlen = (byte & 0x1F) + 1
            if i + 1 >= len(body):
                raise EnoParseError("length byte at end of option (8547 §4.4 rule 1)")
            nxt = body[i + 1]
            if nxt < 0xA0:
                raise EnoParseError(f"length byte followed by {nxt:#04x} in 0x00-0x9f (8547 §4.4 rule 2)")
            if i + 2 + dlen > len(body):
                raise EnoParseError("suboption data extends beyond the ENO option (8547 §4.4 rule 1)")
            subs.append(Suboption(nxt & 0x7F, True, body[i + 2:i + 2 + dlen], True))
            i += 2 + dlen
        elif not v:
            # glt >= 0x20, v=0: "TEP identifier without suboption data"
            subs.append(Suboption(glt))
            i += 1
        else:
            # glt >= 0x20, v=1, no length byte: 8547 §4.4 "extends to the end of the TCP option".
            # Zero bytes of data (0xa0+ as the very last byte) is accepted: nothing forbids it and
            # 8548 §3.5 gives it a meaning (< 9 bytes of data = fresh key exchange).
            subs.append(Suboption(glt, True, body[i + 1:], False))
            i = len(body)
    return EnoSynOption(opt, global_byte, tuple(ignored), tuple(subs))


def parse_tcp_options(opts: bytes) -> list[tuple[int, bytes]]:
    """Split a TCP options field into (kind, whole option bytes) (RFC 793 §3.1: kind 0 = end of list,
    kind 1 = no-operation, others kind/length/data).  Raises ValueError on a malformed length."""
    out: list[tuple[int, bytes]] = []
    i = 0
    while i < len(opts):
        kind = opts[i]
        if kind == 0:
            break
        if kind == 1:
            out.append((1, opts[i:i + 1]))
            i += 1
            continue
        if i + 1 >= len(opts) or opts[i + 1] < 2 or i + opts[i + 1] > len(opts):
            raise ValueError(f"malformed TCP option of kind {kind} at byte {i}")
        out.append((kind, bytes(opts[i:i + opts[i + 1]])))
        i += opts[i + 1]
    return out


def eno_options_in(opts: bytes) -> list[bytes]:
    """All ENO options (kind 69) in a TCP options field."""
    return [o for k, o in parse_tcp_options(opts) if k == ENO_KIND]


def syn_eno_option(opts: bytes) -> Optional[bytes]:
    """The ENO option a receiver uses from a SYN segment's options field, or None.
    8547 §4.1: "If a SYN segment contains more than one ENO option, the receiver MUST behave as
    though the segment contained no ENO options"."""
    enos = eno_options_in(opts)
    return enos[0] if len(enos) == 1 else None


@dataclass(frozen=True)
class Negotiation:
    ok: bool
    reason: str
    tep: Optional[int] = None              # negotiated TEP id (glt), 8547 §4.5
    tep_byte: Optional[int] = None         # B's suboption byte incl. v (8548 §3.4 session-ID first byte)
    b_suboption: Optional[Suboption] = None
    a_suboptions: tuple[Suboption, ...] = ()
    first_is_a: Optional[bool] = None      # whether the first argument was host A's option
    a_option: Optional[bytes] = None
    b_option: Optional[bytes] = None
    transcript: Optional[bytes] = None     # 8547 §4.8: A's option | B's option
    app_aware: tuple[int, int] = (0, 0)    # (a bit of A, a bit of B)

    @property
    def fresh(self) -> bool:
        """8548 §3.2: B sent the negotiated TEP with v = 0 -> fresh key agreement (§3.3).  Also when the
        resumption data of B's suboption is shorter than 9 bytes (8548 §3.5)."""
        s = self.b_suboption
        return s is not None and (not s.v or len(s.data) < RESUME_HALF_LEN)


def transcript(a_option: bytes, b_option: bytes) -> bytes:
    """8547 §4.8: "a packed data structure consisting of two TCP-ENO options exactly as they appeared in
    the TCP header (including the TCP option kind and TCP option length byte ...)": host A's SYN ENO
    option, then host B's."""
    _check_option_header(a_option)
    _check_option_header(b_option)
    return bytes(a_option) + bytes(b_option)


def split_transcript(t: bytes) -> tuple[bytes, bytes]:
    """Inverse of transcript(): 8547 §4.8 "the transcript unambiguously delimits A's and B's ENO options"."""
    if len(t) < 4 or t[0] != ENO_KIND or t[1] < 2 or t[1] + 2 > len(t):
        raise EnoParseError("not an ENO transcript")
    a, rest = t[:t[1]], t[t[1]:]
    _check_option_header(rest)
    return a, rest


def negotiate(syn1: Optional[bytes], syn2: Optional[bytes], *,
              supported: Optional[Iterable[int]] = None,
              valid: Optional[Callable[[int, Sequence[Suboption], Sequence[Suboption]], bool]] = None,
              allow_repeat: Iterable[int] = (),
              mandatory_app_aware: bool = False) -> Negotiation:
    """Run TCP-ENO negotiation (8547 §4.3, §4.5, §4.6) over the two hosts' SYN-form ENO options.

    The arguments may be in either order (e.g. the SYN's and the SYN-ACK's options); roles come from
    the b bits (8547 §4.3).  None (no ENO option) fails (8547 §4.6 rule 1).

    supported: TEP ids the deciding host is willing to use (None = any TEP id; this only matters for
        simulating a host, not for observing two compliant hosts).
    valid(tep, a_subs, b_subs): TEP-specific validity of suboption data (8547 §4.5 rule 2); default:
        everything valid.
    allow_repeat: TEPs whose repetition in one option is well-defined (8547 §4.5 rule 3); see R6.
    mandatory_app_aware: require a = 1 from both sides (8547 §4.2 "a", §4.6 rule 3); see R9.
    """
    if syn1 is None or syn2 is None:
        return Negotiation(False, "a SYN segment carried no ENO option (8547 §4.6 rule 1)")
    try:
        o1, o2 = parse_eno_syn(syn1), parse_eno_syn(syn2)
    except EnoParseError as e:
        return Negotiation(False, f"ill-formed SYN-form ENO option: {e}")
    # 8547 §4.3: "The host that sent an implicit or explicit suboption with b = 0 plays the A role.
    # The host that sent b = 1 plays the B role."  §4.6 rule 3: same b -> incompatible.
    if o1.b == o2.b:
        return Negotiation(False, f"both hosts sent b = {o1.b} (8547 §4.3, §4.6 rule 3)")
    first_is_a = o1.b == 0
    oa, ob = (o1, o2) if first_is_a else (o2, o1)
    if mandatory_app_aware and not (oa.a and ob.a):
        return Negotiation(False, "mandatory application-aware mode and a remote a = 0 (8547 §4.2, §4.6 rule 3)",
                           first_is_a=first_is_a)
    sup = None if supported is None else set(supported)
    allow = set(allow_repeat)
    # 8547 §4.5: "the negotiated TEP is defined as the last valid TEP identifier in host B's SYN-form ENO
    # option".  Valid = (1) both sides sent it, (2) data valid per the TEP, (3) repetition well-defined.
    for s in reversed(ob.suboptions):
        a_subs = [x for x in oa.suboptions if x.tep == s.tep]
        b_subs = [x for x in ob.suboptions if x.tep == s.tep]
        if not a_subs:
            continue                                          # rule 1
        if sup is not None and s.tep not in sup:
            continue                                          # runtime constraint (rule 2)
        if valid is not None and not valid(s.tep, a_subs, b_subs):
            continue                                          # rule 2
        if (len(a_subs) > 1 or len(b_subs) > 1) and s.tep not in allow:
            continue                                          # rule 3 (R6)
        return Negotiation(True, "ok", s.tep, s.tep_byte, s, tuple(a_subs), first_is_a,
                           oa.raw, ob.raw, oa.raw + ob.raw, (oa.a, ob.a))
    why = "vacuous ENO option" if (oa.vacuous or ob.vacuous) else "no valid TEP identifier"
    return Negotiation(False, f"{why} (8547 §4.5, §4.6 rule 2)", first_is_a=first_is_a,
                       a_option=oa.raw, b_option=ob.raw, app_aware=(oa.a, ob.a))


# =====================================================================================
# RFC 8548 §3.1: Extract / CPRF (HKDF with SHA-256, §5)
# =====================================================================================

def extract(salt: bytes, ikm: bytes) -> bytes:
    """8548 §3.1 Figure 1: PRK = HMAC-Hash(salt, IKM), Hash = SHA-256 (§5)."""
    return hmac.new(salt, ikm, hashlib.sha256).digest()


def cprf(key: bytes, const: bytes, length: int) -> bytes:
    """8548 §3.1 Figure 1, HKDF-Expand(PRK, CONST, L): T(n) = HMAC(PRK, T(n-1) | CONST | n), n one octet;
    OKM = first L octets; L <= 255*32."""
    if length > 255 * 32:
        raise ValueError("L <= 255*OutputLength(Hash)")
    okm = b""
    t = b""
    n = 1
    while len(okm) < length:
        t = hmac.new(key, t + const + bytes([n]), hashlib.sha256).digest()
        okm += t
        n += 1
    return okm[:length]


def _c(const: int) -> bytes:
    return bytes([const])          # R3: CONST_* are single octets


def next_session_secret(ss: bytes) -> bytes:
    """8548 §3.3: ss[i] = CPRF(ss[i-1], CONST_NEXTK, K_LEN)."""
    return cprf(ss, _c(CONST_NEXTK), K_LEN)


def session_secret(ss0: bytes, i: int) -> bytes:
    ss = ss0                       # 8548 §3.3: ss[0] = PRK
    for _ in range(i):
        ss = next_session_secret(ss)
    return ss


def master_key(ss_i: bytes, sn: bytes = b"", j: int = 0) -> bytes:
    """8548 §3.3: mk[0] = CPRF(ss[i], CONST_REKEY | sn[i], K_LEN); mk[j] = CPRF(mk[j-1], CONST_REKEY, K_LEN).
    sn[0] is empty (fresh session); sn[i] = nonce_a | nonce_b for a resumed one (§3.5)."""
    mk = cprf(ss_i, _c(CONST_REKEY) + sn, K_LEN)
    for _ in range(j):
        mk = cprf(mk, _c(CONST_REKEY), K_LEN)
    return mk


def traffic_keys(mk: bytes, aead_id: int) -> tuple[bytes, bytes]:
    """8548 §3.3: k_ab[j] = CPRF(mk[j], CONST_KEY_A, ae_key_len + ae_nonce_len), k_ba[j] likewise with
    CONST_KEY_B."""
    p = AEADS[aead_id]
    n = p.key_len + p.nonce_len
    return cprf(mk, _c(CONST_KEY_A), n), cprf(mk, _c(CONST_KEY_B), n)


def session_id(tep_byte: int, ss_i: bytes, sn: bytes = b"") -> bytes:
    """8548 §3.4: session_id[i] = TEP-byte | CPRF(ss[i], CONST_SESSID | sn[i], K_LEN)  (33 bytes here,
    meeting 8547 §5.1's minimum of 33)."""
    return bytes([tep_byte]) + cprf(ss_i, _c(CONST_SESSID) + sn, K_LEN)


def resume_identifier(ss_i: bytes) -> bytes:
    """8548 §3.5: resume[i] = CPRF(ss[i], CONST_RESUME, 18)."""
    return cprf(ss_i, _c(CONST_RESUME), RESUME_ID_LEN)


def resumption_suboption(tep: int, ss_i: bytes, original_role: str, nonce: bytes) -> Suboption:
    """8548 §3.5 Figures 2/3: TEP-byte (v = 1) | resume[i]{0..8} | nonce_a if the host's role in the
    original session was "A", resume[i]{9..17} | nonce_b if it was "B"; nonce 0..8 bytes."""
    if len(nonce) > RESUME_NONCE_MAX:
        raise ValueError("resumption nonce is 0..8 bytes (8548 §3.5)")
    rid = resume_identifier(ss_i)
    half = rid[:RESUME_HALF_LEN] if original_role == "A" else rid[RESUME_HALF_LEN:]
    return Suboption(tep, True, half + nonce)


def session_nonce(sub_from_original_a: Suboption, sub_from_original_b: Suboption) -> bytes:
    """8548 §3.5: sn[i] = nonce_a | nonce_b, the nonces following the 9-byte identifier halves of the
    resumption suboptions of the hosts that were originally "A" and "B" (Figures 2/3, reading R12)."""
    return sub_from_original_a.data[RESUME_HALF_LEN:] + sub_from_original_b.data[RESUME_HALF_LEN:]


def aead_nonce(offset: int, nr: bytes) -> bytes:
    """8548 §4.2.3 frame ID (ae_nonce_len - 8 zero bytes | 8-byte big-endian offset), then §3.6
    N = frame_ID XOR NR."""
    if not 0 <= offset < OFFSET_LIMIT:
        raise ProtocolError("frame offset outside 0..2^64-1 (8548 §3.6)")
    fid = bytes(len(nr) - FRAME_OFFSET_LEN) + offset.to_bytes(FRAME_OFFSET_LEN, "big")
    return bytes(x ^ y for x, y in zip(fid, nr))


class FrameKey:
    """One traffic key k_ab[j] / k_ba[j] split per 8548 §3.6 Figure 4: first ae_key_len bytes = K,
    next ae_nonce_len bytes = NR."""

    def __init__(self, aead_id: int, traffic_key: bytes):
        p = AEADS[aead_id]
        if len(traffic_key) != p.key_len + p.nonce_len:
            raise ValueError("traffic key length must be ae_key_len + ae_nonce_len")
        self.params = p
        self.key = traffic_key[:p.key_len]
        self.nr = traffic_key[p.key_len:]
        self._aead = p.factory(self.key)

    def seal(self, offset: int, control: int, plaintext: bytes) -> bytes:
        """Build one encryption frame (8548 §4.2): control | clen | ciphertext, with associated data
        control | clen (§4.2.2) and nonce from the frame's stream offset (§3.6, §4.2.3)."""
        clen = len(plaintext) + self.params.tag_len
        if clen >= CLEN_LIMIT:
            raise ValueError("ciphertext must be shorter than 2^16 bytes (8548 §3.6)")
        ad = struct.pack(">BH", control, clen)
        ct = self._aead.encrypt(aead_nonce(offset, self.nr), plaintext, ad)
        assert len(ct) == clen
        return ad + ct

    def open(self, offset: int, control: int, clen: int, ciphertext: bytes) -> bytes:
        ad = struct.pack(">BH", control, clen)
        try:
            return self._aead.decrypt(aead_nonce(offset, self.nr), ciphertext, ad)
        except InvalidTag:
            raise AuthenticationError(f"AEAD FAIL on frame at stream offset {offset} (8548 §3.6)") from None


def encode_plaintext(data: bytes, *, fin: bool = False, urgent: Optional[int] = None) -> bytes:
    """8548 §4.2.1: flags | data, or flags | urgent(2, big-endian) | data when URGp; fres bits zero."""
    flags = (FLAG_FINP if fin else 0) | (FLAG_URGP if urgent is not None else 0)
    if urgent is not None:
        return struct.pack(">BH", flags, urgent) + data
    return bytes([flags]) + data


@dataclass(frozen=True)
class Plaintext:
    fin: bool
    urgent: Optional[int]
    data: bytes


def decode_plaintext(pt: bytes) -> Plaintext:
    if len(pt) < PLAINTEXT_FLAGS_LEN:
        raise ProtocolError("plaintext lacks the flags byte (8548 §4.2.1)")
    flags = pt[0]                  # fres (bits 2-7) "MUST ignore them when receiving" (8548 §4.2.1)
    if flags & FLAG_URGP:
        if len(pt) < PLAINTEXT_FLAGS_LEN + URGENT_LEN:
            raise ProtocolError("URGp set but no urgent field (8548 §4.2.1)")
        (urg,) = struct.unpack(">H", pt[1:3])
        return Plaintext(bool(flags & FLAG_FINP), urg, pt[3:])
    return Plaintext(bool(flags & FLAG_FINP), None, pt[1:])


# =====================================================================================
# RFC 8548 §5: key-agreement schemes
# =====================================================================================

class _Scheme:
    tep: int

    def generate(self): raise NotImplementedError
    def encode_pub(self, priv) -> bytes: raise NotImplementedError
    def pub_field_len(self, buf: bytes, off: int) -> Optional[int]: raise NotImplementedError
    def decode_pub(self, field_bytes: bytes): raise NotImplementedError
    def exchange(self, priv, pub) -> bytes: raise NotImplementedError


class _Curve25519(_Scheme):
    """8548 §5 ECDHE-Curve25519: X25519 (RFC 7748); Pub "transmitted directly with no length prefix:
    32 bytes"; "MUST check whether the computed Diffie-Hellman shared secret is the all-zero value and
    abort if so"."""
    tep = TEP_CURVE25519

    def generate(self):
        return x25519.X25519PrivateKey.generate()

    def encode_pub(self, priv) -> bytes:
        return priv.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)

    def pub_field_len(self, buf: bytes, off: int) -> Optional[int]:
        return X25519_PUB_LEN

    def decode_pub(self, field_bytes: bytes):
        return x25519.X25519PublicKey.from_public_bytes(field_bytes)

    def exchange(self, priv, pub) -> bytes:
        try:
            es = priv.exchange(pub)
        except ValueError as e:          # the library itself refuses an all-zero result
            raise HandshakeError(f"X25519 failed / all-zero shared secret (8548 §5): {e}") from None
        if es == bytes(len(es)):
            raise HandshakeError("X25519 shared secret is all-zero (8548 §5, RFC 7748 §6)")
        return es


class _P256(_Scheme):
    """8548 §5 ECDHE-P256: ECSVDP-DH (IEEE 1363); Pub = pubkey_len(2, big-endian) | compressed point
    (IEEE 1363 E.2.3); "MUST validate these pubkey values" (IEEE 1363 A.16.10).  See R5."""
    tep = TEP_P256

    def __init__(self, strict: bool = True):
        self.strict = strict

    def generate(self):
        return ec.generate_private_key(ec.SECP256R1())

    def encode_pub(self, priv) -> bytes:
        pt = priv.public_key().public_bytes(serialization.Encoding.X962,
                                            serialization.PublicFormat.CompressedPoint)
        return struct.pack(">H", len(pt)) + pt

    def pub_field_len(self, buf: bytes, off: int) -> Optional[int]:
        if len(buf) < off + P256_PUBKEY_PREFIX_LEN:
            return None
        (plen,) = struct.unpack_from(">H", buf, off)
        return P256_PUBKEY_PREFIX_LEN + plen

    def decode_pub(self, field_bytes: bytes):
        pt = field_bytes[P256_PUBKEY_PREFIX_LEN:]
        if self.strict and (len(pt) != P256_COMPRESSED_LEN or pt[0] not in (2, 3)):
            raise HandshakeError("P-256 pubkey not in compressed format (8548 §5 'MUST encode ... compressed')")
        try:
            # from_encoded_point checks the point lies on the curve (the A.16.10 validation); P-256 has
            # cofactor 1, so on-curve and not infinity suffice.
            return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), pt)
        except ValueError as e:
            raise HandshakeError(f"P-256 public key failed validation (8548 §5): {e}") from None

    def exchange(self, priv, pub) -> bytes:
        # ECSVDP-DH output: x coordinate of the shared point, 32 octets big-endian (R5).
        return priv.exchange(ec.ECDH(), pub)


def scheme_for(tep: int, *, strict_p256: bool = True) -> _Scheme:
    if tep == TEP_CURVE25519:
        return _Curve25519()
    if tep == TEP_P256:
        return _P256(strict_p256)
    raise ValueError(f"TEP {tep:#x} not implemented by this peer (have 0x21, 0x23)")


# =====================================================================================
# RFC 8548 §4.1: Init1 / Init2
# =====================================================================================

@dataclass(frozen=True)
class Init1:
    sym_ciphers: tuple[int, ...]
    n_a: bytes
    pub_a: bytes            # the Pub_A field as on the wire (P-256: length prefix included)
    ignored: bytes = b""
    raw: bytes = b""        # the transmitted encoding (all message_len bytes)


@dataclass(frozen=True)
class Init2:
    sym_cipher: int
    n_b: bytes
    pub_b: bytes
    ignored: bytes = b""
    raw: bytes = b""


def encode_init1(ciphers: Sequence[int], n_a: bytes, pub_a: bytes, ignored: bytes = b"") -> bytes:
    """8548 §4.1 Init1: INIT1_MAGIC(4) | message_len(4, big-endian, whole message) | nciphers(1) |
    sym_cipher[K](2 each) | N_A | Pub_A | ignored.  Senders "MUST construct Init1 such that the ignored
    field has zero length" -- `ignored` exists only to test receivers."""
    if len(n_a) != N_A_LEN:
        raise ValueError("N_A is N_A_LEN = 32 bytes (8548 §5)")
    if len(ciphers) > 255:
        raise ValueError("nciphers is one byte")
    body = bytes([len(ciphers)]) + b"".join(struct.pack(">H", c) for c in ciphers) + n_a + pub_a + ignored
    return struct.pack(">II", INIT1_MAGIC, INIT_HEADER_LEN + len(body)) + body


def encode_init2(cipher: int, n_b: bytes, pub_b: bytes, ignored: bytes = b"") -> bytes:
    """8548 §4.1 Init2: INIT2_MAGIC(4) | message_len(4) | sym_cipher(2) | N_B | Pub_B | ignored."""
    if len(n_b) != N_B_LEN:
        raise ValueError("N_B is N_B_LEN = 32 bytes (8548 §5)")
    body = struct.pack(">H", cipher) + n_b + pub_b + ignored
    return struct.pack(">II", INIT2_MAGIC, INIT_HEADER_LEN + len(body)) + body


def _init_header(buf: bytes, magic: int, name: str) -> int:
    if len(buf) < INIT_HEADER_LEN:
        raise HandshakeError(f"{name} shorter than its 8-byte header")
    m, mlen = struct.unpack_from(">II", buf)
    if m != magic:
        raise HandshakeError(f"{name} magic {m:#010x} != {magic:#010x} (8548 §4.3)")
    if mlen > MAX_INIT_LEN:
        raise HandshakeError(f"{name} message_len {mlen} exceeds implementation limit (R10)")
    return mlen


def decode_init1(buf: bytes, scheme: _Scheme) -> Init1:
    """Decode a complete Init1 (exactly message_len bytes).  "When receiving Init1, however,
    implementations MUST permit and ignore any bytes following Pub_A" (8548 §4.1)."""
    mlen = _init_header(buf, INIT1_MAGIC, "Init1")
    if len(buf) != mlen:
        raise HandshakeError("Init1 buffer length != message_len")
    need = init1_required_len(buf, scheme)
    if need is None or need > mlen:
        raise HandshakeError(f"Init1 message_len {mlen} too short for its fields (8548 §4.1)")
    k = buf[8]
    ciphers = tuple(struct.unpack_from(">H", buf, 9 + 2 * i)[0] for i in range(k))
    na_off = 2 * k + 9                               # 8548 §4.1: N_A starts at byte 2*K + 9
    pub_off = na_off + N_A_LEN                       # Pub_A at 2*K + 9 + N_A_LEN
    return Init1(ciphers, buf[na_off:pub_off], buf[pub_off:need], buf[need:], bytes(buf))


def init1_required_len(buf: bytes, scheme: _Scheme) -> Optional[int]:
    """Bytes of Init1 needed through the end of Pub_A, or None if `buf` is too short to know yet."""
    if len(buf) < INIT1_FIXED_LEN:
        return None
    k = buf[8]
    pub_off = 2 * k + 9 + N_A_LEN
    plen = scheme.pub_field_len(buf, pub_off)
    return None if plen is None else pub_off + plen


def decode_init2(buf: bytes, scheme: _Scheme) -> Init2:
    mlen = _init_header(buf, INIT2_MAGIC, "Init2")
    if len(buf) != mlen:
        raise HandshakeError("Init2 buffer length != message_len")
    need = init2_required_len(buf, scheme)
    if need is None or need > mlen:
        raise HandshakeError(f"Init2 message_len {mlen} too short for its fields (8548 §4.1)")
    (cipher,) = struct.unpack_from(">H", buf, 8)
    pub_off = INIT2_FIXED_LEN + N_B_LEN              # 8548 §4.1: Pub_B at 10 + N_B_LEN
    return Init2(cipher, buf[INIT2_FIXED_LEN:pub_off], buf[pub_off:need], buf[need:], bytes(buf))


def init2_required_len(buf: bytes, scheme: _Scheme) -> Optional[int]:
    pub_off = INIT2_FIXED_LEN + N_B_LEN
    plen = scheme.pub_field_len(buf, pub_off)
    return None if plen is None else pub_off + plen


def derive_prk(n_a: bytes, eno_transcript: bytes, init1: bytes, init2: bytes, es: bytes) -> bytes:
    """8548 §3.3: PRK = Extract(N_A, eno_transcript | Init1 | Init2 | ES)."""
    return extract(n_a, eno_transcript + init1 + init2 + es)


# =====================================================================================
# Peer
# =====================================================================================

@dataclass(frozen=True)
class Resume:
    """Parameters for a resumed session (8548 §3.5): the cached session secret ss[i], the session nonce
    sn[i] = nonce_a | nonce_b, and the role this host played in the *original* session (it decides
    whether the host encrypts with k_ab or k_ba, 8548 §3.3/§3.5)."""
    ss: bytes
    sn: bytes
    original_role: str


@dataclass
class FrameRecord:
    offset: int
    control: int
    clen: int
    nonce: bytes
    generation: int
    fin: bool
    data_len: int


class Peer:
    """tcpcrypt endpoint over an already-connected TCP socket (or anything with sendall/recv/shutdown).

    Peer(sock, role, tep, eno_transcript, *, tep_byte=None, ciphers=DEFAULT_CIPHERS, chunk=16384,
         resume=None, offset_base="stream", strict_p256=True, record=False)

    role: "A" or "B" (TCP-ENO role, 8547 §4.3; A = active opener normally).
    tep: negotiated TEP id, 0x23 (Curve25519) or 0x21 (P-256).
    eno_transcript: A's SYN ENO option | B's SYN-ACK ENO option, kind+len included (8547 §4.8).
    tep_byte: the byte B sent for the negotiated TEP (v bit included), session-ID first byte (8548 §3.4);
        default `tep` (v = 0, fresh key exchange) or `tep | 0x80` with `resume`.
    ciphers: as A, the sym_cipher_list offered in Init1 (in this order); as B, the preference order
        used to select from A's list (8548 §3.3).
    chunk: application bytes per frame for send() (<= max_frame_data()).
    resume: a Resume(...) for a resumed session (no Init messages, 8548 §3.5).
    offset_base: "stream" (default, reading R1) or "frames".
    record: keep a FrameRecord per frame sent/received in .sent_frames / .recv_frames.
    aead: with `resume`, the AEAD id of the original session (R12).
    abort_on_error: on a handshake/AEAD/framing error, abort the connection (RST via SO_LINGER 0 on a TCP
        socket, 8548 §3.3 "abort the connection") before raising; .aborted tells it happened.

    handshake() performs Init1/Init2 (blocking).  Then send(data), recv() -> bytes (b"" = authenticated
    end of file), recv_exactly(n), recv_all(), shutdown_write() (FINp frame + TCP FIN), rekey(),
    seal(data, fin=False) -> frame bytes without sending (for tamper tests), session_id, aead,
    session_secret(i).
    """

    def __init__(self, sock, role: str, tep: int, eno_transcript: bytes, *, tep_byte: Optional[int] = None,
                 ciphers: Sequence[int] = DEFAULT_CIPHERS, chunk: int = 16384, resume: Optional[Resume] = None,
                 offset_base: str = "stream", strict_p256: bool = True, record: bool = False,
                 aead: Optional[int] = None, abort_on_error: bool = True):
        if role not in ("A", "B"):
            raise ValueError("role must be 'A' or 'B'")
        if offset_base not in ("stream", "frames"):
            raise ValueError("offset_base is 'stream' or 'frames'")
        if not ciphers:
            raise ValueError("need at least one AEAD")
        for c in ciphers:
            if c not in AEADS:
                raise ValueError(f"unknown AEAD {c:#06x}")
        self.sock = sock
        self.role = role
        self.tep = tep
        self.transcript = bytes(eno_transcript)
        self.resume = resume
        if tep_byte is None:
            tep_byte = tep | (V_BIT if resume else 0)
        if tep_byte & 0x7F != tep:
            raise ValueError("tep_byte does not carry the negotiated TEP id")
        self.tep_byte = tep_byte
        self.ciphers = tuple(ciphers)
        self.scheme = scheme_for(tep, strict_p256=strict_p256) if resume is None else None
        self.offset_base = offset_base
        self.record = record
        self.sent_frames: list[FrameRecord] = []
        self.recv_frames: list[FrameRecord] = []
        self.urgent_events: list[tuple[int, int]] = []   # (frame offset, urgent field), 8548 §3.7
        self.chunk = chunk
        self._forced_aead = aead        # for resumption: AEAD agreed in the original session
        self.abort_on_error = abort_on_error
        self.aborted = False
        self._rbuf = bytearray()
        self._app_buf = bytearray()
        self._send_lock = threading.Lock()
        self._recv_lock = threading.Lock()
        # Filled by handshake():
        self.init1: Optional[bytes] = None
        self.init2: Optional[bytes] = None
        self.aead: Optional[int] = None
        self.ss0: Optional[bytes] = None     # for resume: ss[i] as given
        self.sn = b""
        self.session_id: Optional[bytes] = None
        self._ready = False
        self._send_off = 0
        self._recv_off = 0
        self._local_gen = 0      # 8548 §3.8 "Initially, these two generation numbers are set to zero."
        self._remote_gen = 0
        self._rekey_pending = False
        self._rekey_inflight_empty = False
        self.fin_sent = False
        self.fin_received = False
        self._mk_cache: dict[int, bytes] = {}
        self._keys: dict[tuple[int, str], FrameKey] = {}

    # ---------------------------------------------------------------- I/O helpers
    def _read_exact(self, n: int, what: str) -> bytes:
        while len(self._rbuf) < n:
            try:
                chunk = self.sock.recv(max(65536, n - len(self._rbuf)))
            except ConnectionResetError as e:
                raise PeerAbortError(f"connection reset by peer while reading {what}") from e
            if not chunk:
                raise TruncationError(f"TCP end of stream while reading {what}")
            self._rbuf += chunk
        out = bytes(self._rbuf[:n])
        del self._rbuf[:n]
        return out

    def _read_init(self, magic: int, name: str) -> bytes:
        hdr = self._read_exact(INIT_HEADER_LEN, name)
        mlen = _init_header(hdr, magic, name)
        if mlen < INIT_HEADER_LEN:
            raise HandshakeError(f"{name} message_len {mlen} shorter than its header")
        return hdr + self._read_exact(mlen - INIT_HEADER_LEN, name)

    # ---------------------------------------------------------------- handshake
    def handshake(self) -> "Peer":
        """8548 §3.3: "A -> B: Init1 ...; B -> A: Init2 ..." at the start of each host's data stream."""
        if self._ready:
            return self
        try:
            if self.resume is not None:
                self._setup_resumed()
            elif self.role == "A":
                self._handshake_a()
            else:
                self._handshake_b()
        except TcpcryptError:
            self._abort_if_configured()
            raise
        self._ready = True
        return self

    def _handshake_a(self) -> None:
        sch = self.scheme
        priv = sch.generate()
        n_a = os.urandom(N_A_LEN)                 # "Nonces chosen at random" (8548 §3.3)
        init1 = encode_init1(self.ciphers, n_a, sch.encode_pub(priv))
        self.sock.sendall(init1)
        raw2 = self._read_init(INIT2_MAGIC, "Init2")
        m2 = decode_init2(raw2, sch)
        # 8548 §3.3: "If host A receives Init2 with a sym_cipher value that was not present in the
        # sym_cipher_list it previously transmitted in Init1, it MUST abort the connection".
        if m2.sym_cipher not in self.ciphers:
            raise HandshakeError(f"Init2 selected sym_cipher {m2.sym_cipher:#06x} not offered in Init1")
        es = sch.exchange(priv, sch.decode_pub(m2.pub_b))
        self._finish_fresh(n_a, init1, raw2, es, m2.sym_cipher)

    def _handshake_b(self) -> None:
        sch = self.scheme
        raw1 = self._read_init(INIT1_MAGIC, "Init1")
        m1 = decode_init1(raw1, sch)
        pub_a = sch.decode_pub(m1.pub_a)
        # 8548 §3.3: "sym_cipher: The symmetric cipher selected by host B from the sym_cipher_list".
        choice = next((c for c in self.ciphers if c in m1.sym_ciphers), None)
        if choice is None:
            raise HandshakeError(f"no acceptable AEAD among {[hex(c) for c in m1.sym_ciphers]}")
        priv = sch.generate()
        n_b = os.urandom(N_B_LEN)
        init2 = encode_init2(choice, n_b, sch.encode_pub(priv))
        es = sch.exchange(priv, pub_a)
        self.sock.sendall(init2)
        self._finish_fresh(m1.n_a, raw1, init2, es, choice)

    def _finish_fresh(self, n_a: bytes, init1: bytes, init2: bytes, es: bytes, aead: int) -> None:
        self.init1, self.init2, self.aead = init1, init2, aead
        self.ss0 = derive_prk(n_a, self.transcript, init1, init2, es)     # ss[0] = PRK (8548 §3.3)
        self.sn = b""                                                    # sn[0] is zero bytes long
        self.session_id = session_id(self.tep_byte, self.ss0, self.sn)
        self._key_role = self.role      # fresh: A encrypts with k_ab, B with k_ba (8548 §3.3)
        if self.offset_base == "stream":                                 # R1
            own, peer = (init1, init2) if self.role == "A" else (init2, init1)
            self._send_off, self._recv_off = len(own), len(peer)

    def _setup_resumed(self) -> None:
        r = self.resume
        if self._forced_aead is None:
            raise ValueError("a resumed Peer needs aead= (the AEAD of the original session)")
        # Reading: 8548 §3.5 does not renegotiate the AEAD for resumed sessions (no Init messages);
        # we reuse the original session's sym_cipher, the only value both hosts hold.
        self.aead = self._forced_aead
        self.ss0 = r.ss
        self.sn = r.sn
        self.session_id = session_id(self.tep_byte, r.ss, r.sn)         # 8548 §3.5 "constructed in the same way"
        self._key_role = r.original_role                                # 8548 §3.5 last paragraphs
        self._send_off = self._recv_off = 0

    def session_secret(self, i: int) -> bytes:
        """ss[i] derived from this session's ss (8548 §3.3) -- for resumption tests (8548 §3.5)."""
        self._need_ready()
        return session_secret(self.ss0, i)

    # ---------------------------------------------------------------- keys
    def _mk(self, j: int) -> bytes:
        if j not in self._mk_cache:
            self._mk_cache[j] = master_key(self.ss0, self.sn, 0) if j == 0 else \
                cprf(self._mk(j - 1), _c(CONST_REKEY), K_LEN)
        return self._mk_cache[j]

    def _key(self, j: int, direction: str) -> FrameKey:
        """direction 'send' / 'recv' -> FrameKey for generation j."""
        k = (j, direction)
        if k not in self._keys:
            k_ab, k_ba = traffic_keys(self._mk(j), self.aead)
            mine, theirs = (k_ab, k_ba) if self._key_role == "A" else (k_ba, k_ab)
            self._keys[k] = FrameKey(self.aead, mine if direction == "send" else theirs)
        return self._keys[k]

    def _need_ready(self) -> None:
        if not self._ready:
            raise TcpcryptError("handshake() first (8547 §5.1: no session ID before the connection is up)")

    # ---------------------------------------------------------------- sending
    def _seal_locked(self, data: bytes, fin: bool, urgent: Optional[int] = None) -> bytes:
        if self.fin_sent:
            raise ProtocolError("FINp already sent: 'MUST NOT set FINp on any other frame' (8548 §3.7)")
        control = 0
        if self._rekey_pending:
            # 8548 §3.8: first frame under the new key set carries rekey = 1; all others rekey = 0.
            control |= CONTROL_REKEY
            self._rekey_pending = False
        pt = encode_plaintext(data, fin=fin, urgent=urgent)
        fk = self._key(self._local_gen, "send")
        off = self._send_off
        frame = fk.seal(off, control, pt)
        if off + len(frame) > OFFSET_LIMIT:
            raise ProtocolError("would exceed 2^64 stream bytes (8548 §3.6)")
        self._send_off += len(frame)
        if fin:
            self.fin_sent = True
        if self.record:
            self.sent_frames.append(FrameRecord(off, control, len(frame) - FRAME_HEADER_LEN,
                                                aead_nonce(off, fk.nr), self._local_gen, fin, len(data)))
        return frame

    def seal(self, data: bytes, *, fin: bool = False, urgent: Optional[int] = None) -> bytes:
        """Produce the next frame's bytes and advance the send offset, *without* sending them."""
        self._need_ready()
        with self._send_lock:
            return self._seal_locked(data, fin, urgent)

    def send_raw(self, b: bytes) -> None:
        self.sock.sendall(b)

    def send(self, data: bytes) -> None:
        """Send application data as frames of at most `chunk` bytes; b"" sends one empty frame (R8)."""
        self._need_ready()
        data = bytes(data)
        limit = min(self.chunk, max_frame_data(self.aead))
        with self._send_lock:
            if not data:
                self.sock.sendall(self._seal_locked(b"", False))
                return
            for i in range(0, len(data), limit):
                self.sock.sendall(self._seal_locked(data[i:i + limit], False))

    def send_urgent(self, data: bytes, urgent: int) -> None:
        """One frame with URGp and the urgent field (8548 §3.7, §4.2.1)."""
        self._need_ready()
        with self._send_lock:
            self.sock.sendall(self._seal_locked(bytes(data), False, urgent))

    def shutdown_write(self, data: bytes = b"") -> None:
        """8548 §3.7: "A sender MUST set the FINp bit on the last frame it sends", then TCP FIN."""
        self._need_ready()
        with self._send_lock:
            self.sock.sendall(self._seal_locked(bytes(data), True))
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def rekey(self, send_empty: bool = True) -> None:
        """Initiate rekeying (8548 §3.8): local generation += 1; the next frame sent carries rekey = 1.
        With send_empty, send that frame now with empty data (8548 §3.9 keep-alive)."""
        self._need_ready()
        with self._send_lock:
            if send_empty and self._rekey_inflight_empty and self._remote_gen < self._local_gen:
                # 8548 §3.8: "MUST NOT initiate rekeying with an empty encryption frame more than once while
                # its record of the remote generation number is less than its own."
                raise ProtocolError("an empty-frame rekey is already outstanding (8548 §3.8)")
            self._local_gen += 1
            self._rekey_pending = True
            if send_empty:
                self._rekey_inflight_empty = True
                self.sock.sendall(self._seal_locked(b"", False))

    @property
    def local_generation(self) -> int:
        return self._local_gen

    @property
    def remote_generation(self) -> int:
        return self._remote_gen

    # ---------------------------------------------------------------- receiving
    def _read_frame(self) -> Plaintext:
        """Read and authenticate one frame (8548 §3.6, §4.2) at the current receive offset."""
        hdr = self._read_exact(FRAME_HEADER_LEN, "frame header")
        control, clen = struct.unpack(">BH", hdr)
        ct = self._read_exact(clen, "frame ciphertext")
        off = self._recv_off
        gen = self._remote_gen
        if control & CONTROL_REKEY:
            # 8548 §3.8: "When a host receives a frame with rekey = 1, it increments its record of the
            # remote generation number."  The frame itself is the first under the new key set.
            gen += 1
        fk = self._key(gen, "recv")
        pt = decode_plaintext(fk.open(off, control, clen, ct))   # cres bits ignored but authenticated (AD)
        self._recv_off += FRAME_HEADER_LEN + clen
        if self.record:
            self.recv_frames.append(FrameRecord(off, control, clen, aead_nonce(off, fk.nr), gen, pt.fin,
                                                len(pt.data)))
        if control & CONTROL_REKEY:
            self._remote_gen = gen
            self._on_remote_rekey()
        if pt.urgent is not None:
            self.urgent_events.append((off, pt.urgent))
        return pt

    def _on_remote_rekey(self) -> None:
        with self._send_lock:
            if self._remote_gen <= self._local_gen:
                if self._remote_gen == self._local_gen:
                    self._rekey_inflight_empty = False
                return
            # 8548 §3.8 (reading R4): remote > local -> match it, and unless we already sent TCP FIN,
            # "immediately send a frame (with empty application data if necessary) with rekey = 1".
            self._local_gen = self._remote_gen
            if self.fin_sent:
                return
            self._rekey_pending = True
            self.sock.sendall(self._seal_locked(b"", False))

    def recv(self, max_bytes: Optional[int] = None) -> bytes:
        """Next non-empty chunk of application data (at most max_bytes if given); b"" once a FINp frame
        has been authenticated (8548 §3.7: end of file "when and only when it receives a frame with the
        FINp bit set").  Raises AuthenticationError on AEAD FAIL, TruncationError on TCP EOF without
        FINp, ProtocolError on other framing violations."""
        self._need_ready()
        with self._recv_lock:
            while not self._app_buf and not self.fin_received:
                try:
                    pt = self._read_frame()
                except TcpcryptError:
                    self._abort_if_configured()
                    raise
                if pt.fin:
                    self.fin_received = True
                self._app_buf += pt.data            # empty frames add nothing (R8)
            n = len(self._app_buf) if max_bytes is None else min(max_bytes, len(self._app_buf))
            out = bytes(self._app_buf[:n])
            del self._app_buf[:n]
            return out

    def recv_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            d = self.recv(n - len(out))
            if not d:
                raise ProtocolError(f"end of file after {len(out)} of {n} bytes")
            out += d
        return bytes(out)

    def recv_all(self) -> bytes:
        """Everything until the authenticated end of file (FINp)."""
        out = bytearray()
        while True:
            d = self.recv()
            if not d:
                return bytes(out)
            out += d

    def expect_tcp_eof(self) -> None:
        """After FINp: the TCP stream must end there (the FINp frame is the last frame, 8548 §3.7)."""
        if self._rbuf:
            raise ProtocolError("bytes after the FINp frame")
        if self.sock.recv(1):
            raise ProtocolError("bytes after the FINp frame")

    def _abort_if_configured(self) -> None:
        if self.abort_on_error:
            self.abort()

    def abort(self) -> None:
        """8548 §3.3: to "abort the connection" = RFC 793 Abort: the connection is destroyed and RESET is
        sent.  With a real TCP socket SO_LINGER(on, 0) makes close() send RST; other sockets just close."""
        self.aborted = True
        try:
            if self.sock.family in (socket.AF_INET, socket.AF_INET6) and self.sock.type == socket.SOCK_STREAM:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                self.sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
