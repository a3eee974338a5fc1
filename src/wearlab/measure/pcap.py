"""Classic pcap files, read incrementally while tcpdump may still be writing them, and pcap
byte streams parsed as they arrive (`PcapStream`: tcpdump's `-w -` on a pipe, `wearlab capture`).

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


class PcapStream:
    """A classic pcap byte stream parsed as it arrives (a file being written, tcpdump's `-w -` on
    a pipe): :meth:`feed` takes the next bytes and returns the packets they complete; a partial
    record (or global header) waits for the next call. ``name`` says where the bytes come from in
    errors; ``consumed`` counts the bytes parsed into packets (and the header)."""

    def __init__(self, name: str = "<stream>"):
        self.name = name
        self.consumed = 0
        self.linktype: int | None = None
        self.snaplen: int | None = None
        self.nanosecond = False
        self._buf = b""
        self._rec: struct.Struct | None = None
        self._div = 1e6

    def _parse_global_header(self, hdr: bytes) -> None:
        (magic_le,) = struct.unpack("<I", hdr[:4])
        for endian in ("<", ">"):
            (magic,) = struct.unpack(endian + "I", hdr[:4])
            if magic in (_dpcap.TCPDUMP_MAGIC, _dpcap.TCPDUMP_MAGIC_NANO):
                break
        else:
            if magic_le == _PCAPNG_MAGIC:
                raise ValueError(f"{self.name}: pcapng is not supported; capture with plain "
                                 "tcpdump -w (no --pcapng) or convert with 'editcap -F pcap'")
            raise ValueError(f"{self.name}: not a pcap file (magic {hdr[:4].hex()})")
        if len(hdr) < 24:
            return
        _vmaj, _vmin, _tz, _sig, snaplen, linktype = struct.unpack(endian + "HHiIII", hdr[4:24])
        self.nanosecond = magic == _dpcap.TCPDUMP_MAGIC_NANO
        self._div = 1e9 if self.nanosecond else 1e6
        self._rec = struct.Struct(endian + "IIII")
        self.snaplen = snaplen
        # The upper 16 bits of the link type field may hold FCS information (pcap format spec).
        self.linktype = linktype & 0x0FFFFFFF

    def feed(self, data: bytes) -> list[Packet]:
        """The packets `data` completes (with what earlier calls left over)."""
        return [p for p, _ in self.feed_records(data)]

    def feed_records(self, data: bytes) -> list[tuple[Packet, int]]:
        """As :meth:`feed`, each packet with its timestamp in the stream's own units since the
        epoch (microseconds, or nanoseconds when ``nanosecond``): exact, for writing it on."""
        buf = self._buf + data if self._buf else data
        pos = 0
        if self._rec is None:
            if len(buf) >= 4:
                self._parse_global_header(buf[:24])
            if self._rec is None:
                self._buf = buf
                return []
            pos = 24
        rec = self._rec
        limit = max(self.snaplen or 0, _MAX_RECORD)
        scale = 1_000_000_000 if self.nanosecond else 1_000_000
        out: list[tuple[Packet, int]] = []
        n = len(buf)
        while n - pos >= 16:
            sec, frac, incl, orig = rec.unpack_from(buf, pos)
            if incl > limit:
                raise ValueError(f"{self.name}: corrupt pcap record at offset "
                                 f"{self.consumed + pos}: captured length {incl} > {limit}")
            if n - pos - 16 < incl:
                break  # record still being written
            frame = buf[pos + 16:pos + 16 + incl]
            out.append((Packet(sec + frac / self._div, frame, self.linktype, max(orig, incl)), sec * scale + frac))
            pos += 16 + incl
        self.consumed += pos
        self._buf = buf[pos:]
        return out


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
        self._stream = PcapStream(self.path)
        self._read = 0  # file offset of the first byte not yet read
        self._f: Any = None

    @property
    def offset(self) -> int:
        """File offset of the first byte not yet consumed into a packet (or the header)."""
        return self._stream.consumed

    @property
    def linktype(self) -> int | None:
        return self._stream.linktype

    @property
    def snaplen(self) -> int | None:
        return self._stream.snaplen

    def __enter__(self) -> PcapReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def read_new(self) -> list[Packet]:
        if self._f is None:
            try:
                self._f = open(self.path, "rb")  # noqa: SIM115 - kept open across calls
            except FileNotFoundError:
                return []
        self._f.seek(self._read)
        buf = self._f.read()
        self._read += len(buf)
        return self._stream.feed(buf)


def read_pcap(path: str | os.PathLike[str]) -> list[Packet]:
    """All complete packets of a pcap file (a truncated last record is ignored)."""
    with PcapReader(path) as r:
        pkts = r.read_new()
        if r.linktype is None:
            raise ValueError(f"{os.fspath(path)}: missing or truncated pcap header")
        return pkts
