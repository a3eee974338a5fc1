"""A pcapng writer: one Section Header Block, an Interface Description Block per interface (its
name and description as options, so Wireshark's interface column says node and link), then an
Enhanced Packet Block per packet naming its interface. Enough for `wearlab capture` to merge
several interfaces into one stream that `wireshark -k -i -` and `tshark -r` read
(the format: IETF draft-ietf-opsawg-pcapng; little-endian here, as the SHB's byte-order magic says).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

SHB, IDB, EPB = 0x0A0D0D0A, 0x00000001, 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_END, OPT_COMMENT = 0, 1
SHB_USERAPPL = 4
IF_NAME, IF_DESCRIPTION, IF_TSRESOL = 2, 3, 9
LINKTYPE_ETHERNET = 1


@dataclass(frozen=True)
class Interface:
    name: str                 # if_name, e.g. watch:watch-phone
    description: str = ""     # if_description, e.g. "watch eth0, link watch-phone (to phone)"
    linktype: int = LINKTYPE_ETHERNET
    snaplen: int = 0          # 0: no limit
    nanosecond: bool = True   # timestamps in ns (if_tsresol 9), else in us


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


class PcapngWriter:
    """Writes to a binary file object; `interfaces` get ids 0, 1, ... in order."""

    def __init__(self, out: BinaryIO, interfaces: list[Interface], application: str = "wearlab"):
        self.out = out
        self.interfaces = list(interfaces)
        head = [_block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1)
                       + _option(SHB_USERAPPL, application.encode()) + _option(OPT_END, b""))]
        for i in self.interfaces:
            opts = _option(IF_NAME, i.name.encode())
            if i.description:
                opts += _option(IF_DESCRIPTION, i.description.encode())
            opts += _option(IF_TSRESOL, bytes([9 if i.nanosecond else 6])) + _option(OPT_END, b"")
            head.append(_block(IDB, struct.pack("<HHI", i.linktype, 0, i.snaplen) + opts))
        self.out.write(b"".join(head))

    def packet(self, interface: int, timestamp: int, frame: bytes, wire_len: int | None = None) -> bytes:
        """The EPB of one packet (`timestamp` in its interface's units since the epoch); written
        with :meth:`write` (several at once: one write per batch)."""
        body = struct.pack("<IIIII", interface, timestamp >> 32, timestamp & 0xFFFFFFFF, len(frame),
                           len(frame) if wire_len is None else wire_len) + frame
        return _block(EPB, body)

    def write(self, blocks: list[bytes]) -> None:
        self.out.write(b"".join(blocks))
        self.out.flush()
