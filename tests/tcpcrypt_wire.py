"""Read the TCP-ENO negotiation of the first TCP connection in a pcap file, independently of any daemon.

    info = eno_from_pcap("capture.pcap")            # or eno_from_pcap(path, port=8080)
    info.transcript        # A's SYN ENO option | B's SYN ENO option (RFC 8547 §4.8), or None
    info.negotiation.tep   # negotiated TEP per RFC 8547 §4.5 (tcpcrypt_rfcpeer.negotiate)
    info.eno_segments      # the connection's segments that carried an ENO option

Only the classic libpcap format that `tcpdump -w` writes is read (both byte orders, micro- and
nanosecond magic); pcapng is refused with a clear error.  Link types: Ethernet (1, with 802.1Q/802.1ad
tags), Linux cooked SLL (113, `tcpdump -i any`) and SLL2 (276), raw IP (101, 12, 14), BSD loopback
(0).  IPv4 and IPv6 (with the common extension headers).  Everything is parsed with `struct`.

"First TCP connection" = the first SYN-only segment in the file (optionally: whose destination port is
`port`).  Its peer's SYN segment is the first segment with SYN set flowing the other way (a SYN-ACK
normally; in a simultaneous open possibly a SYN-only, whose ENO option 8547 §4.6 requires to equal the
one in its SYN-ACK).  Retransmitted SYNs are ignored (8547 §4.6: hosts "MUST NOT alter SYN-form ENO
options in retransmitted segments").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import tcpcrypt_rfcpeer as rp

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_MAGIC = 0x0A0D0D0A

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_RAW_ALT = (12, 14)      # DLT_RAW values on some BSDs
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
ETH_VLAN = (0x8100, 0x88A8, 0x9100)
IPPROTO_TCP = 6
IPV6_EXT = (0, 43, 60, 51)      # hop-by-hop, routing, destination options, AH

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK, TCP_URG = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


@dataclass(frozen=True)
class Segment:
    index: int            # packet number in the file, 0-based
    ts: float
    src: str
    sport: int
    dst: str
    dport: int
    flags: int
    seq: int
    ack: int
    payload_len: int
    options: bytes        # raw TCP options field
    from_active: bool = False   # sent by the host that sent the first SYN (set by eno_from_pcap)
    payload: bytes = b""        # the segment's data

    @property
    def flag_str(self) -> str:
        return "".join(c for bit, c in ((TCP_SYN, "S"), (TCP_ACK, "A"), (TCP_FIN, "F"), (TCP_RST, "R"),
                                        (TCP_PSH, "P"), (TCP_URG, "U")) if self.flags & bit)

    @property
    def syn(self) -> bool:
        return bool(self.flags & TCP_SYN)

    @property
    def eno(self) -> list[bytes]:
        """ENO options (kind 69, whole option bytes) in this segment; [] if the options field is malformed."""
        try:
            return rp.eno_options_in(self.options)
        except ValueError:
            return []


@dataclass
class EnoWire:
    active: tuple[str, int]             # (address, port) of the host that sent the first SYN
    passive: tuple[str, int]
    syn: Segment
    synack: Optional[Segment]
    syn_eno: Optional[bytes]            # the SYN's ENO option as the receiver uses it (None if 0 or >1, 8547 §4.1)
    synack_eno: Optional[bytes]
    syn_eno_count: int
    synack_eno_count: int
    negotiation: rp.Negotiation
    segments: list[Segment] = field(default_factory=list)

    @property
    def transcript(self) -> Optional[bytes]:
        """8547 §4.8 transcript (A's option then B's, roles from the b bits), None if ENO failed."""
        return self.negotiation.transcript if self.negotiation.ok else None

    @property
    def active_role(self) -> Optional[str]:
        """TCP-ENO role of the active opener ("A" normally, 8547 §4.3), None if roles were not decided."""
        fa = self.negotiation.first_is_a
        return None if fa is None else ("A" if fa else "B")

    @property
    def eno_segments(self) -> list[Segment]:
        return [s for s in self.segments if s.eno]

    @property
    def first_ack_from_active(self) -> Optional[Segment]:
        """The active opener's first non-SYN segment (the 3rd segment of a three-way handshake)."""
        return next((s for s in self.segments if s.from_active and not s.syn and s.flags & TCP_ACK), None)

    @property
    def third_segment_has_eno(self) -> bool:
        """8547 §4.6: "an active opener MUST include a non-SYN-form ENO option in the third segment"."""
        s = self.first_ack_from_active
        return bool(s and s.eno)


# ------------------------------------------------------------------------------------- pcap reading

def _records(data: bytes) -> Iterator[tuple[int, float, bytes, int]]:
    if len(data) < 24:
        raise ValueError("file too short for a pcap global header")
    (magic_le,) = struct.unpack_from("<I", data, 0)
    if magic_le == PCAPNG_MAGIC:
        raise ValueError("pcapng is not supported: capture with `tcpdump -w` (pcap) or convert with editcap -F pcap")
    for endian in ("<", ">"):
        (magic,) = struct.unpack_from(endian + "I", data, 0)
        if magic in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            break
    else:
        raise ValueError(f"not a pcap file (magic {data[:4].hex()})")
    div = 1e6 if magic == PCAP_MAGIC_US else 1e9
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x0FFFFFFF
    off = 24
    idx = 0
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        pkt = data[off:off + incl]
        off += incl
        yield idx, sec + frac / div, pkt, linktype
        idx += 1


def _network_layer(pkt: bytes, linktype: int) -> Optional[tuple[int, bytes]]:
    """-> (ethertype, L3 bytes)."""
    if linktype == LINKTYPE_ETHERNET:
        if len(pkt) < 14:
            return None
        et = struct.unpack_from(">H", pkt, 12)[0]
        off = 14
        while et in ETH_VLAN and len(pkt) >= off + 4:
            et = struct.unpack_from(">H", pkt, off + 2)[0]
            off += 4
        return et, pkt[off:]
    if linktype == LINKTYPE_LINUX_SLL:
        return (struct.unpack_from(">H", pkt, 14)[0], pkt[16:]) if len(pkt) >= 16 else None
    if linktype == LINKTYPE_LINUX_SLL2:
        return (struct.unpack_from(">H", pkt, 0)[0], pkt[20:]) if len(pkt) >= 20 else None
    if linktype == LINKTYPE_RAW or linktype in LINKTYPE_RAW_ALT:
        if not pkt:
            return None
        return (ETH_IPV4 if pkt[0] >> 4 == 4 else ETH_IPV6), pkt
    if linktype == LINKTYPE_NULL:
        if len(pkt) < 4:
            return None
        fam = struct.unpack_from("<I", pkt, 0)[0]
        if fam > 0xFFFF:
            fam = struct.unpack_from(">I", pkt, 0)[0]
        return (ETH_IPV4 if fam == 2 else ETH_IPV6), pkt[4:]
    raise ValueError(f"unsupported pcap link type {linktype}")


def _ip_to_tcp(et: int, ip: bytes) -> Optional[tuple[str, str, bytes]]:
    import ipaddress
    if et == ETH_IPV4:
        if len(ip) < 20 or ip[0] >> 4 != 4:
            return None
        ihl = (ip[0] & 0x0F) * 4
        total = struct.unpack_from(">H", ip, 2)[0]
        frag = struct.unpack_from(">H", ip, 6)[0]
        if ip[9] != IPPROTO_TCP or frag & 0x1FFF:     # not TCP, or a non-first fragment
            return None
        end = min(len(ip), total) if total else len(ip)
        return str(ipaddress.IPv4Address(ip[12:16])), str(ipaddress.IPv4Address(ip[16:20])), ip[ihl:end]
    if et == ETH_IPV6:
        if len(ip) < 40 or ip[0] >> 4 != 6:
            return None
        plen = struct.unpack_from(">H", ip, 4)[0]
        nh = ip[6]
        off = 40
        end = min(len(ip), 40 + plen)
        while nh in IPV6_EXT and off + 2 <= end:
            hlen = (ip[off + 1] + 2) * 4 if nh == 51 else (ip[off + 1] + 1) * 8
            nh = ip[off]
            off += hlen
        if nh != IPPROTO_TCP:
            return None
        return str(ipaddress.IPv6Address(ip[8:24])), str(ipaddress.IPv6Address(ip[24:40])), ip[off:end]
    return None


def tcp_segments(path: str | Path) -> Iterator[Segment]:
    """Every TCP segment in a pcap file."""
    data = Path(path).read_bytes()
    for idx, ts, pkt, lt in _records(data):
        l3 = _network_layer(pkt, lt)
        if l3 is None:
            continue
        r = _ip_to_tcp(*l3)
        if r is None:
            continue
        src, dst, tcp = r
        if len(tcp) < 20:
            continue
        sport, dport, seq, ack, off_flags = struct.unpack_from(">HHIIH", tcp, 0)
        doff = (off_flags >> 12) * 4
        if doff < 20 or doff > len(tcp):
            continue
        yield Segment(idx, ts, src, sport, dst, dport, off_flags & 0x1FF, seq, ack, len(tcp) - doff,
                      bytes(tcp[20:doff]), payload=bytes(tcp[doff:]))


def eno_from_pcap(path: str | Path, *, port: Optional[int] = None) -> EnoWire:
    """ENO negotiation of the first TCP connection (first SYN-only segment, to `port` if given)."""
    segs = list(tcp_segments(path))
    syn = next((s for s in segs if s.flags & TCP_SYN and not s.flags & TCP_ACK
                and (port is None or s.dport == port)), None)
    if syn is None:
        raise ValueError(f"no SYN segment{'' if port is None else f' to port {port}'} in {path}")
    act, pas = (syn.src, syn.sport), (syn.dst, syn.dport)
    conn: list[Segment] = []
    for s in segs:
        if s.index < syn.index:
            continue
        if (s.src, s.sport, s.dst, s.dport) == (*act, *pas):
            conn.append(_with_active(s, True))
        elif (s.src, s.sport, s.dst, s.dport) == (*pas, *act):
            conn.append(_with_active(s, False))
    synack = next((s for s in conn if not s.from_active and s.syn), None)

    def _eno(seg: Optional[Segment]) -> tuple[Optional[bytes], int]:
        if seg is None:
            return None, 0
        try:
            enos = rp.eno_options_in(seg.options)
        except ValueError:
            return None, 0
        return (enos[0] if len(enos) == 1 else None), len(enos)   # 8547 §4.1: >1 ENO = none

    syn_eno, n1 = _eno(syn)
    synack_eno, n2 = _eno(synack)
    neg = rp.negotiate(syn_eno, synack_eno)
    return EnoWire(act, pas, conn[0], synack, syn_eno, synack_eno, n1, n2, neg, conn)


def _with_active(s: Segment, active: bool) -> Segment:
    return Segment(s.index, s.ts, s.src, s.sport, s.dst, s.dport, s.flags, s.seq, s.ack, s.payload_len,
                   s.options, active, s.payload)


# ------------------------------------------------------------------------------------- pcap writing
# (used by the unit tests to build synthetic captures; kept here so interop tests can reuse it)

def build_tcp_segment(src: str, sport: int, dst: str, dport: int, *, flags: int, seq: int = 0, ack: int = 0,
                      options: bytes = b"", payload: bytes = b"", linktype: int = LINKTYPE_ETHERNET) -> bytes:
    """One IPv4/TCP packet (Ethernet-framed unless linktype is RAW).  Options are padded with zero (EOL)
    bytes to a multiple of 4 (RFC 793 §3.1).  Checksums are left zero (readers here do not check them)."""
    import ipaddress
    opts = options + b"\x00" * (-len(options) % 4)
    doff = (20 + len(opts)) // 4
    tcp = struct.pack(">HHIIHHHH", sport, dport, seq, ack, (doff << 12) | flags, 65535, 0, 0) + opts + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, IPPROTO_TCP, 0,
                     ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed) + tcp
    if linktype == LINKTYPE_RAW:
        return ip
    return b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + struct.pack(">H", ETH_IPV4) + ip


def write_pcap(path: str | Path, packets: list[bytes], *, linktype: int = LINKTYPE_ETHERNET,
               big_endian: bool = False) -> None:
    e = ">" if big_endian else "<"
    out = bytearray(struct.pack(e + "IHHiIII", PCAP_MAGIC_US, 2, 4, 0, 0, 262144, linktype))
    for i, p in enumerate(packets):
        out += struct.pack(e + "IIII", 1_700_000_000, i * 1000, len(p), len(p)) + p
    Path(path).write_bytes(bytes(out))
