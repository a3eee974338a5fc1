"""Classic pcap files, read incrementally while tcpdump may still be writing them.

A record's captured bytes (``incl_len``, possibly cut short by snaplen) are the packet's
``frame``; its *original* length (``orig_len``: the frame's length on the wire, link-layer header
included) is kept as ``wire_len``, which snaplen truncation does not change. pcapng is not
supported (run tcpdump without ``--pcapng``). A file that is not a classic pcap, or whose record
header is corrupt, raises ``ValueError``.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from dpkt import pcap as _dpcap

_PCAPNG_MAGIC = 0x0A0D0D0A
_MAX_RECORD = 256 * 1024  # tcpdump's default (and maximum useful) snaplen is 262144


class Packet(tuple):
    """One captured packet: a 3-tuple ``(ts, frame, linktype)`` that also carries ``wire_len``,
    the record's original length on the wire (``len(frame)`` may be smaller after snaplen
    truncation)."""

    def __new__(cls, ts: float, frame: bytes, linktype: int, wire_len: int | None = None):
        self = super().__new__(cls, (ts, frame, linktype))
        self.wire_len = len(frame) if wire_len is None else wire_len
        return self

    def __getnewargs__(self):  # pickling / copying
        return (self[0], self[1], self[2], self.wire_len)

    ts = property(lambda self: self[0])
    frame = property(lambda self: self[1])
    linktype = property(lambda self: self[2])

    def __repr__(self) -> str:
        return (f"Packet(ts={self[0]!r}, frame=<{len(self[1])} bytes>, linktype={self[2]}, "
                f"wire_len={self.wire_len})")


class PcapReader:
    """Incremental reader of a classic pcap file, possibly still being written by ``tcpdump -U``.

    Each :meth:`read_new` returns the packets completed since the previous call, as
    :class:`Packet` ``(ts, frame, linktype)`` tuples (with ``.wire_len``). A partially written
    last record (or global header) is left for the next call. A file that does not exist yet
    reads as empty. Raises ``ValueError`` if the file is not a pcap (e.g. pcapng) or a record
    header is corrupt.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        self.offset = 0  # file offset of the first byte not yet consumed
        self.linktype: int | None = None
        self.snaplen: int | None = None
        self._f: Any = None
        self._rec: struct.Struct | None = None
        self._div = 1e6

    def __enter__(self) -> PcapReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def _parse_global_header(self, hdr: bytes) -> None:
        (magic_le,) = struct.unpack("<I", hdr[:4])
        for endian in ("<", ">"):
            (magic,) = struct.unpack(endian + "I", hdr[:4])
            if magic in (_dpcap.TCPDUMP_MAGIC, _dpcap.TCPDUMP_MAGIC_NANO):
                break
        else:
            if magic_le == _PCAPNG_MAGIC:
                raise ValueError(f"{self.path}: pcapng is not supported; capture with plain "
                                 "tcpdump -w (no --pcapng) or convert with 'editcap -F pcap'")
            raise ValueError(f"{self.path}: not a pcap file (magic {hdr[:4].hex()})")
        if len(hdr) < 24:
            return
        _vmaj, _vmin, _tz, _sig, snaplen, linktype = struct.unpack(endian + "HHiIII", hdr[4:24])
        self._div = 1e9 if magic == _dpcap.TCPDUMP_MAGIC_NANO else 1e6
        self._rec = struct.Struct(endian + "IIII")
        self.snaplen = snaplen
        # The upper 16 bits of the link type field may hold FCS information (pcap format spec).
        self.linktype = linktype & 0x0FFFFFFF

    def read_new(self) -> list[Packet]:
        if self._f is None:
            try:
                self._f = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
            except FileNotFoundError:
                return []
        self._f.seek(self.offset)
        buf = self._f.read()
        pos = 0
        if self._rec is None:
            if len(buf) >= 4:
                self._parse_global_header(buf[:24])
            if self._rec is None:
                return []
            pos = 24
        rec = self._rec
        limit = max(self.snaplen or 0, _MAX_RECORD)
        out: list[Packet] = []
        n = len(buf)
        while n - pos >= 16:
            sec, frac, incl, orig = rec.unpack_from(buf, pos)
            if incl > limit:
                raise ValueError(f"{self.path}: corrupt pcap record at file offset "
                                 f"{self.offset + pos}: captured length {incl} > {limit}")
            if n - pos - 16 < incl:
                break  # record still being written
            frame = buf[pos + 16:pos + 16 + incl]
            out.append(Packet(sec + frac / self._div, frame, self.linktype, max(orig, incl)))
            pos += 16 + incl
        self.offset += pos
        return out


def read_pcap(path: str | os.PathLike[str]) -> list[Packet]:
    """All complete packets of a pcap file (a truncated last record is ignored)."""
    with PcapReader(path) as r:
        pkts = r.read_new()
        if r.linktype is None:
            raise ValueError(f"{os.fspath(path)}: missing or truncated pcap header")
        return pkts
