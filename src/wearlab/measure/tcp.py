"""One TCP connection out of captured frames: link layer -> IP -> TCP decoding, the packets of
the connection of one client endpoint, and each direction's byte stream reassembled by sequence
number.

Frames are decoded from IPv4 and IPv6 (with extension headers) over Ethernet (incl. VLAN tags),
Linux cooked SLL/SLL2, BSD loopback/NULL, LOOP and raw-IP link types; IP fragments are skipped.
One connection per client endpoint is assumed: packets to/from the client (ip, port) that belong
to a different server endpoint than the first one seen are ignored. A direction's stream is
reassembled by TCP sequence number, handling retransmissions, overlaps and reordering; only
captured bytes are kept, so bytes lost to snaplen truncation or capture drops read as missing.

Decoders never crash on malformed input: undecodable packets are skipped; only an unsupported
link type raises ``ValueError``.
"""

from __future__ import annotations

import ipaddress
import struct
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from wearlab.measure.pcap import Packet

# TCP flags
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10

_MASK32 = 0xFFFFFFFF

# pcap link types (LINKTYPE_* values as stored in files, http://www.tcpdump.org/linktypes.html;
# not dpkt's platform-dependent DLT_* constants)
DLT_NULL = 0  # 4-byte address family in the capturing host's byte order
DLT_EN10MB = 1
DLT_RAW = 101  # raw IP (12 and 14 are legacy aliases)
DLT_LOOP = 108  # 4-byte address family in network byte order
DLT_LINUX_SLL = 113
DLT_LINUX_SLL2 = 276
DLT_IPV4 = 228
DLT_IPV6 = 229
SUPPORTED_LINKTYPES = (DLT_NULL, DLT_EN10MB, 12, 14, DLT_RAW, DLT_LOOP, DLT_LINUX_SLL,
                       DLT_LINUX_SLL2, DLT_IPV4, DLT_IPV6)


# ---------------------------------------------------------------------------------------------
# packet decoding (never raises on malformed frames: returns None)


class TcpSegment(NamedTuple):
    """One decoded TCP segment with its IP addresses (packed), as returned by :func:`decode_tcp`."""

    src: bytes
    dst: bytes
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload_len: int  # from the IP length fields, i.e. on the wire
    payload: bytes  # the captured part of the payload (may be shorter than payload_len)


_ETHERTYPE_IP = {0x0800: 4, 0x86DD: 6}
_VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)
_AF_INET6_VALUES = (10, 24, 28, 30)  # Linux, NetBSD/OpenBSD, FreeBSD, Darwin


def _network_start(frame: bytes, linktype: int) -> tuple[int, int] | None:
    """(IP version, offset of the IP header) or None if the frame is not IP."""
    n = len(frame)
    if linktype == DLT_EN10MB:
        off = 12
        for _ in range(8):  # VLAN / QinQ tags
            if n < off + 2:
                return None
            et = int.from_bytes(frame[off:off + 2], "big")
            if et in _VLAN_TPIDS:
                off += 4
                continue
            v = _ETHERTYPE_IP.get(et)
            return None if v is None else (v, off + 2)
        return None
    if linktype == DLT_LINUX_SLL:
        if n < 16:
            return None
        v = _ETHERTYPE_IP.get(int.from_bytes(frame[14:16], "big"))
        return None if v is None else (v, 16)
    if linktype == DLT_LINUX_SLL2:
        if n < 20:
            return None
        v = _ETHERTYPE_IP.get(int.from_bytes(frame[0:2], "big"))
        return None if v is None else (v, 20)
    if linktype in (DLT_NULL, DLT_LOOP):
        if n < 4:
            return None
        families = {int.from_bytes(frame[:4], "big")}
        if linktype == DLT_NULL:  # host byte order of the capturing machine: accept both
            families.add(int.from_bytes(frame[:4], "little"))
        if 2 in families:
            return (4, 4)
        if families.intersection(_AF_INET6_VALUES):
            return (6, 4)
        return None
    if linktype in (DLT_RAW, 12, 14, DLT_IPV4, DLT_IPV6):
        if n < 1:
            return None
        v = frame[0] >> 4
        return (v, 0) if v in (4, 6) else None
    raise ValueError(f"unsupported pcap link type {linktype} (supported: "
                     f"{', '.join(map(str, SUPPORTED_LINKTYPES))})")


def quic_initial(frame: bytes, linktype: int) -> tuple[bytes, bytes, int, int] | None:
    """(source, destination, source port, destination port) of an IPv4 UDP datagram that starts
    with a QUIC version 1 Initial packet (RFC 9000 17.2.2: long header, fixed bit, type 0,
    version 1) - a client opening a QUIC connection, or a server answering it; None otherwise."""
    at = _ipv4_udp(frame, linktype)
    if at is None:
        return None
    off, u = at
    if len(frame) < u + 8 + 5:
        return None
    first, version = frame[u + 8], int.from_bytes(frame[u + 9:u + 13], "big")
    if first & 0xC0 != 0xC0 or first & 0x30 != 0 or version != 1:
        return None
    sport, dport = struct.unpack_from("!HH", frame, u)
    return bytes(frame[off + 12:off + 16]), bytes(frame[off + 16:off + 20]), sport, dport


# QUIC version 1 long header packet types (RFC 9000 17.2, the first byte's bits 4-5).
QUIC_INITIAL, QUIC_0RTT, QUIC_HANDSHAKE, QUIC_RETRY = 0, 1, 2, 3


def _varint(b: bytes, i: int) -> tuple[int, int] | None:
    """RFC 9000 16: (value, next offset), or None when `b` ends first."""
    if i >= len(b):
        return None
    n = 1 << (b[i] >> 6)
    if i + n > len(b):
        return None
    v = b[i] & 0x3F
    for k in range(1, n):
        v = (v << 8) | b[i + k]
    return v, i + n


def quic_long_types(payload: bytes) -> list[int]:
    """The long header packet types (QUIC_INITIAL, QUIC_0RTT, ...) coalesced in one QUIC v1
    datagram's payload, in order (RFC 9000 12.2: each long header packet's Length field gives
    where the next begins), as far as the captured bytes reach; a short header packet ends it."""
    out, i = [], 0
    while i + 7 <= len(payload):
        first = payload[i]
        if first & 0xC0 != 0xC0 or int.from_bytes(payload[i + 1:i + 5], "big") != 1:
            break
        kind = (first >> 4) & 0x03
        out.append(kind)
        if kind == QUIC_RETRY:
            break
        j = i + 5
        for _ in range(2):   # destination and source connection IDs
            if j >= len(payload):
                return out
            j += 1 + payload[j]
        if kind == QUIC_INITIAL:
            token = _varint(payload, j)
            if token is None:
                return out
            j = token[1] + token[0]
        length = _varint(payload, j)
        if length is None:
            return out
        i = length[1] + length[0]
    return out


def udp_payload(frame: bytes, linktype: int) -> bytes | None:
    """The (captured part of the) payload of an IPv4 UDP datagram; None for anything else."""
    at = _ipv4_udp(frame, linktype)
    if at is None:
        return None
    u = at[1]
    return bytes(frame[u + 8:]) if len(frame) >= u + 8 else None


def _ipv4_udp(frame: bytes, linktype: int) -> tuple[int, int] | None:
    """(IP header offset, UDP header offset) of an IPv4 UDP datagram's first fragment; None for
    anything else (a later fragment carries no UDP header)."""
    ns = _network_start(frame, linktype)
    if ns is None or ns[0] != 4:
        return None
    off = ns[1]
    if len(frame) < off + 20 or frame[off] >> 4 != 4 or frame[off + 9] != 17:
        return None
    if int.from_bytes(frame[off + 6:off + 8], "big") & 0x1FFF:
        return None
    return off, off + (frame[off] & 0x0F) * 4


class IpPacket(NamedTuple):
    """A TCP or UDP packet's addresses (packed), ports and length on the wire (IP header and
    payload, from the IP length field: what a short snaplen leaves out still counts)."""

    proto: int        # 6 TCP, 17 UDP
    src: bytes
    dst: bytes
    sport: int
    dport: int
    ip_len: int


def ip_packet(frame: bytes, linktype: int) -> IpPacket | None:
    """The TCP or UDP packet a frame carries (IPv4, or IPv6 without extension headers); None for
    anything else and for later fragments (no ports)."""
    ns = _network_start(frame, linktype)
    if ns is None:
        return None
    version, off = ns
    n = len(frame)
    if version == 4:
        if n < off + 20 or frame[off] >> 4 != 4:
            return None
        ihl = (frame[off] & 0x0F) * 4
        if int.from_bytes(frame[off + 6:off + 8], "big") & 0x1FFF:
            return None
        proto, length = frame[off + 9], int.from_bytes(frame[off + 2:off + 4], "big") or n - off
        src, dst, t = frame[off + 12:off + 16], frame[off + 16:off + 20], off + ihl
    else:
        if n < off + 40 or frame[off] >> 4 != 6:
            return None
        proto, length = frame[off + 6], 40 + (int.from_bytes(frame[off + 4:off + 6], "big") or n - off - 40)
        src, dst, t = frame[off + 8:off + 24], frame[off + 24:off + 40], off + 40
    if proto not in (6, 17) or n < t + 4:
        return None
    sport, dport = struct.unpack_from("!HH", frame, t)
    return IpPacket(proto, bytes(src), bytes(dst), sport, dport, length)


def decode_tcp(frame: bytes, linktype: int) -> TcpSegment | None:
    ns = _network_start(frame, linktype)
    if ns is None:
        return None
    version, off = ns
    n = len(frame)
    if version == 4:
        if n < off + 20 or frame[off] >> 4 != 4:
            return None
        ihl = (frame[off] & 0x0F) * 4
        total = int.from_bytes(frame[off + 2:off + 4], "big")
        frag = int.from_bytes(frame[off + 6:off + 8], "big")
        if ihl < 20 or frag & 0x3FFF or frame[off + 9] != 6:  # fragment, or not TCP
            return None
        src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
        t = off + ihl
        if total:
            if total < ihl:
                return None
            ip_payload = total - ihl
        else:  # length 0: TCP segmentation offload; trust the capture
            ip_payload = n - t
    else:
        if n < off + 40 or frame[off] >> 4 != 6:
            return None
        plen = int.from_bytes(frame[off + 4:off + 6], "big")
        nh = frame[off + 6]
        src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
        t = off + 40
        ext = 0
        for _ in range(16):
            if nh == 6:
                break
            if n < t + 8:
                return None
            if nh in (0, 43, 60):  # hop-by-hop, routing, destination options
                hlen = (frame[t + 1] + 1) * 8
            elif nh == 44:  # fragment: only atomic fragments are usable
                if int.from_bytes(frame[t + 2:t + 4], "big") & 0xFFF9:
                    return None
                hlen = 8
            elif nh == 51:  # authentication header
                hlen = (frame[t + 1] + 2) * 4
            else:
                return None
            nh = frame[t]
            t += hlen
            ext += hlen
        else:
            return None
        if plen:
            if plen < ext:
                return None
            ip_payload = plen - ext
        else:  # jumbogram / offload
            ip_payload = n - t
    if n < t + 20:
        return None
    sport, dport, seq, ack, offflags = struct.unpack_from("!HHIIH", frame, t)
    doff = (offflags >> 12) * 4
    if doff < 20 or doff > ip_payload:
        return None
    plen_tcp = ip_payload - doff
    p = t + doff
    return TcpSegment(bytes(src), bytes(dst), sport, dport, seq, ack, offflags & 0x1FF, plen_tcp,
                bytes(frame[p:p + plen_tcp]))


class ConnPacket(NamedTuple):
    """One packet of a TCP connection, as returned by :func:`connection_packets`."""

    ts: float
    direction: str  # 'up' (client -> server) or 'down'
    frame_len: int  # bytes on the wire (pcap orig_len)
    seq: int
    ack: int
    flags: int  # TCP flags (FIN=1, SYN=2, RST=4, PSH=8, ACK=16, ...)
    payload_len: int  # TCP payload length on the wire
    payload: bytes  # captured TCP payload (shorter than payload_len if truncated by snaplen)


def _as_packet(p: Any) -> tuple[float, bytes, int, int]:
    if isinstance(p, Packet):
        return p[0], p[1], p[2], p.wire_len
    if len(p) == 4:
        return p[0], p[1], p[2], p[3]
    ts, frame, linktype = p
    return ts, frame, linktype, len(frame)


def _client_key(client: tuple[str, int]) -> tuple[bytes, int]:
    try:
        ip_s, port = client
        ip = ipaddress.ip_address(ip_s)
        port = int(port)
    except (TypeError, ValueError) as e:
        raise ValueError(f"client endpoint must be (ip, port), got {client!r}: {e}") from None
    if not 0 < port < 65536:
        raise ValueError(f"client port out of range: {port}")
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.packed, port


def connection_packets(packets: Iterable[Any], client: tuple[str, int],
                       redirected_to: tuple[str, int] | None = None) -> list[ConnPacket]:
    """All packets of the TCP connection whose client endpoint is ``client`` = (ip, port).

    ``packets`` are ``(ts, frame, linktype)`` tuples or :class:`Packet` objects (as returned by
    :class:`PcapReader`); plain 3-tuples count ``len(frame)`` as the wire length, 4-tuples
    ``(ts, frame, linktype, wire_len)`` are accepted too. Non-TCP and undecodable frames are
    skipped. The server endpoint is the peer of the first matching packet.

    ``redirected_to``: a connection netfilter REDIRECTed to a local socket, captured on the
    loopback, shows the client's packets addressed to that socket (after the OUTPUT hook's
    DNAT) and the replies from the original destination (NAT undone before they are sent):
    its packets to ``redirected_to`` count as the connection's too.
    """
    cip, cport = _client_key(client)
    server: tuple[bytes, int] | None = None
    local = _client_key(redirected_to) if redirected_to is not None else None
    out: list[ConnPacket] = []
    for p in packets:
        ts, frame, linktype, wire_len = _as_packet(p)
        seg = decode_tcp(frame, linktype)
        if seg is None:
            continue
        if seg.src == cip and seg.sport == cport:
            direction, peer = "up", (seg.dst, seg.dport)
        elif seg.dst == cip and seg.dport == cport:
            direction, peer = "down", (seg.src, seg.sport)
        else:
            continue
        if local is not None and direction == "up" and peer == local:
            pass                     # the redirected side: the server's packets set `server`
        elif server is None:
            server = peer
        elif peer != server:
            continue
        out.append(ConnPacket(float(ts), direction, int(wire_len), seg.seq, seg.ack, seg.flags,
                              seg.payload_len, seg.payload))
    return out


# ---------------------------------------------------------------------------------------------
# TCP stream reassembly


class ReassembledStream:
    """One direction's TCP byte stream, reassembled by sequence number.

    Offsets are relative to the first byte after the SYN (or, without a SYN in the capture, to
    the first payload byte seen). Only captured bytes are stored; ``length`` is the stream length
    implied by the packets' on-wire payload lengths.
    """

    def __init__(self, packets: Sequence[ConnPacket], direction: str):
        mine = [(i, p) for i, p in enumerate(packets) if p.direction == direction]
        base = None
        for _, p in mine:
            if p.flags & SYN:
                base = (p.seq + 1) & _MASK32
                break
        if base is None:
            for _, p in mine:
                if p.payload_len > 0 and not p.flags & RST:
                    base = p.seq
                    break
        self.segments: list[tuple[int, int, int]] = []  # (packet index, start, end), capture order
        pieces: list[tuple[int, bytes]] = []
        self.length = 0
        if base is not None:
            for i, p in mine:
                if p.payload_len <= 0 or p.flags & RST:
                    continue
                seq = (p.seq + 1) & _MASK32 if p.flags & SYN else p.seq
                rel = (seq - base) & _MASK32
                if rel >= 2**31:
                    rel -= 2**32  # before the base (e.g. reordered): wrap-around aware
                end = rel + p.payload_len
                self.segments.append((i, rel, end))
                self.length = max(self.length, end)
                data = p.payload[:p.payload_len]
                if rel < 0:
                    data, rel = data[-rel:], 0
                if data:
                    pieces.append((rel, data))
        # merge captured pieces into disjoint contiguous chunks
        pieces.sort(key=lambda x: x[0])
        self._starts: list[int] = []
        self._chunks: list[bytearray] = []
        for start, data in pieces:
            if self._chunks:
                cend = self._starts[-1] + len(self._chunks[-1])
                if start <= cend:
                    if start + len(data) > cend:
                        self._chunks[-1] += data[cend - start:]
                    continue
            self._starts.append(start)
            self._chunks.append(bytearray(data))

    def read(self, offset: int, n: int) -> bytes | None:
        """``n`` captured bytes at ``offset``, or None if any of them was not captured."""
        k = bisect_right(self._starts, offset) - 1
        if k < 0:
            return None
        rel = offset - self._starts[k]
        chunk = self._chunks[k]
        if rel + n > len(chunk):
            return None
        return bytes(chunk[rel:rel + n])

    def first_covering(self, offset: int) -> int | None:
        """Index (in capture order) of the first packet whose payload holds stream byte ``offset``."""
        for i, start, end in self.segments:
            if start <= offset < end:
                return i
        return None

