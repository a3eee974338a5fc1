"""The handshake protocols in a reassembled TCP stream: TLS records and tcpcrypt's Init1.

TLS: a direction's byte stream is walked record by record (5-byte header: content type, version,
length); the walk stops at the first header that is not a TLS 1.0-1.3 record's or was not
captured, and says why. Only the record headers need to be in the capture, not their bodies. The
version the server selected is read from its ServerHello (legacy version, or the
supported_versions extension for TLS 1.3).

tcpcrypt (RFC 8548): the client->server stream starts with Init1 (INIT1_MAGIC 0x15101a0e, then
its 4-byte big-endian message_len, §4.1); a stream that does not start with INIT1_MAGIC fell back
to plain TCP.

Which record or byte starts which phase is the phase rules' (``measure.phases``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from wearlab.measure.tcp import ConnPacket, ReassembledStream

TCPCRYPT = "tcpcrypt"          # pseudo TLS version: tcpcrypt's Init1/Init2 instead of a TLS handshake
INIT1_MAGIC = 0x15101A0E      # RFC 8548 §4.3

_MAX_TLS_RECORD = 2**14 + 2048  # largest legal TLSCiphertext.length (RFC 5246 6.2.3)
_TLS_CONTENT_TYPES = (20, 21, 22, 23, 24)
_TLS_WIRE_VERSIONS = {0x0301: "1.0", 0x0302: "1.1", 0x0303: "1.2", 0x0304: "1.3"}


def walk_tls_records(stream: ReassembledStream) -> tuple[list[tuple[int, int]], str | None]:
    """[(stream offset, content type)] of the TLS records in ``stream``, plus the reason the walk
    stopped early (None if it reached the end of the stream)."""
    records: list[tuple[int, int]] = []
    o = 0
    while o < stream.length:
        if o + 5 > stream.length:
            return records, None  # stream ends inside a record header
        h = stream.read(o, 5)
        if h is None:
            return records, f"bytes {o}..{o + 4} of the stream were not captured"
        typ, major, minor, length = h[0], h[1], h[2], int.from_bytes(h[3:5], "big")
        if typ not in _TLS_CONTENT_TYPES or major != 3 or minor > 4 or length > _MAX_TLS_RECORD:
            return records, f"invalid TLS record header {h.hex()} at stream offset {o}"
        records.append((o, typ))
        o += 5 + length
    return records, None


class _Hello(NamedTuple):
    """A ServerHello's fields that say what was negotiated and whether it resumed."""

    version: int                                  # legacy_version (supported_versions overrides it)
    session_id: bytes
    extensions: list[tuple[int, int, bytes]]      # (type, declared length, the bytes captured of its data)
    end: int                                      # stream offset right after the ServerHello message


def _server_hello(down: ReassembledStream) -> _Hello | None:
    """The server's ServerHello (RFC 5246 7.4.1.3, RFC 8446 4.1.3), or None if it was not captured
    or is not a ServerHello."""
    h = down.read(0, 9)
    if h is None or h[0] != 22 or h[1] != 3 or h[5] != 2:  # handshake record, ServerHello
        return None
    rec_len = int.from_bytes(h[3:5], "big")
    msg_len = int.from_bytes(h[6:9], "big")
    body = down.read(9, min(msg_len, rec_len - 4))
    if body is None or len(body) < 38:
        return None
    version = int.from_bytes(body[0:2], "big")
    session_id = body[35:35 + body[34]]
    p = 35 + body[34] + 3   # version(2) random(32) session_id_len(1) session_id, cipher suite(2), compression(1)
    extensions: list[tuple[int, int, bytes]] = []
    if len(body) >= p + 2:
        end = min(len(body), p + 2 + int.from_bytes(body[p:p + 2], "big"))
        p += 2
        while p + 4 <= end:
            elen = int.from_bytes(body[p + 2:p + 4], "big")
            extensions.append((int.from_bytes(body[p:p + 2], "big"), elen, body[p + 4:min(p + 4 + elen, end)]))
            p += 4 + elen
    return _Hello(version, session_id, extensions, 9 + msg_len)


def _client_hello_session_id(up: ReassembledStream) -> bytes | None:
    """The legacy_session_id of the client's ClientHello (RFC 5246 7.4.1.2): version(2),
    random(32), then its length and bytes; None if not captured or not a ClientHello."""
    h = up.read(0, 44)
    if h is None or h[0] != 22 or h[1] != 3 or h[5] != 1:  # handshake record, ClientHello
        return None
    sid = up.read(44, h[43]) if h[43] else b""
    return sid


def server_hello_version(down: ReassembledStream) -> str | None:
    """The TLS version the server selected, from its ServerHello (None if not found/parseable)."""
    hello = _server_hello(down)
    if hello is None:
        return None
    version = hello.version
    for etype, elen, data in hello.extensions:
        if etype == 43 and elen == 2 and len(data) == 2:  # supported_versions
            version = int.from_bytes(data, "big")
            break
    return _TLS_WIRE_VERSIONS.get(version)


PRE_SHARED_KEY = 41   # the pre_shared_key extension (RFC 8446 4.2.11)


def server_hello_extensions(down: ReassembledStream) -> tuple[int, ...] | None:
    """The extension types of the server's ServerHello, in order (None if it was not captured or
    is not a ServerHello). In TLS 1.3 the ServerHello is the one server message in clear that
    says whether the handshake resumed: it carries pre_shared_key exactly when the server
    accepted one of the client's tickets (RFC 8446 4.2.11); the Certificate that a full handshake
    sends is encrypted."""
    hello = _server_hello(down)
    return None if hello is None else tuple(etype for etype, _, _ in hello.extensions)


# What follows a TLS 1.2 ServerHello: in a full handshake the server's Certificate,
# ServerKeyExchange, CertificateRequest or ServerHelloDone (RFC 5246 7.3, 7.4); in an abbreviated
# one (a session resumed by its ID, RFC 5246 7.3, or by a ticket, RFC 5077 3.1) its
# ChangeCipherSpec, after a NewSessionTicket where it issues a new ticket.
_FULL_FLIGHT = (11, 12, 13, 14)
_NEW_SESSION_TICKET = 4
_CHANGE_CIPHER_SPEC = 20


def _after_server_hello(down: ReassembledStream, hello: _Hello) -> bool | None:
    """TLS 1.2: True if the server's ChangeCipherSpec comes before any message of a full
    handshake's flight, False if such a message comes first, None if neither was captured."""
    o = hello.end                       # in the ServerHello's record, further messages may follow it
    rec_end = 5 + int.from_bytes(down.read(3, 2) or b"\0\0", "big")
    typ = 22
    while True:
        while typ == 22 and o + 4 <= rec_end:
            head = down.read(o, 4)
            if head is None:
                return None
            if head[0] in _FULL_FLIGHT:
                return False
            if head[0] != _NEW_SESSION_TICKET:
                return None
            o += 4 + int.from_bytes(head[1:4], "big")
        h = down.read(rec_end, 5)
        if h is None:
            return None
        # a message longer than its record goes on in the next one, after that record's header
        typ, o, rec_end = h[0], max(o, rec_end) + 5, rec_end + 5 + int.from_bytes(h[3:5], "big")
        if typ == _CHANGE_CIPHER_SPEC:
            return True
        if typ != 22:
            return None


def tls_resumed(up: ReassembledStream, down: ReassembledStream) -> bool | None:
    """Whether a TLS connection's handshake resumed a session, from what is in clear; None if
    what says it was not captured. TLS 1.3: the ServerHello carries pre_shared_key (RFC 8446
    4.2.11; server_hello_extensions). TLS 1.2 and before: a server that resumes echoes the client's
    non-empty session ID (RFC 5246 7.4.1.3; with a ticket, RFC 5077 3.4), any other is a new
    session; where the client sent none, the abbreviated handshake is told by its ChangeCipherSpec
    following the ServerHello with no Certificate, key exchange or ServerHelloDone between."""
    hello = _server_hello(down)
    if hello is None:
        return None
    if server_hello_version(down) == "1.3":
        return PRE_SHARED_KEY in (etype for etype, _, _ in hello.extensions)
    offered = _client_hello_session_id(up)
    if offered:
        return hello.session_id == offered
    return _after_server_hello(down, hello)


def detect_tls_version(packets: Sequence[ConnPacket]) -> str | None:
    """"1.0".."1.3" as selected by the server's ServerHello, or None if the client did not start a
    TLS handshake (plain TCP/HTTP). Raises ValueError if the client started TLS but no parseable
    ServerHello was captured."""
    packets = list(packets)
    up = ReassembledStream(packets, "up")
    h = up.read(0, 3)
    if h is None or h[0] != 22 or h[1] != 3:
        return None
    v = server_hello_version(ReassembledStream(packets, "down"))
    if v is None:
        raise ValueError("the client started a TLS handshake but no parseable ServerHello "
                         "(TLS 1.0-1.3) was captured")
    return v


def tcpcrypt_init1_end(up: ReassembledStream) -> int | None:
    """Stream offset of the byte right after the client's Init1, or None if the stream does not
    start with INIT1_MAGIC (tcpcrypt fell back to plain TCP, or the start was not captured)."""
    head = up.read(0, 8)
    if head is None or int.from_bytes(head[:4], "big") != INIT1_MAGIC:
        return None
    return int.from_bytes(head[4:8], "big")  # message_len counts the whole Init1
