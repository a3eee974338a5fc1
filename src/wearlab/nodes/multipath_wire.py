"""The chunked multipath transport's wire format and in-order reassembly (seed 003 section 5's
framework: the byte stream split into chunks, each with its size and a global sequence number,
sent over several TCP connections and put back in order at the receiver).

One frame = a 13-byte header `!BIQ` (type, payload length, sequence number) and its payload:
- HELLO: the first frame on each path connection; payload = session id (16 bytes), path index
  and path count (`!BB`), and the app connection's original destination (IPv4 address, port;
  zeros when the app connected to the agent itself): the receiver groups a session's path
  connections by the id and connects to that destination.
- DATA: one chunk of the stream; `seq` counts chunks from 0 across all paths (global).
- ACK: `seq` of a DATA frame received on this connection, sent back on the same connection (the
  sender's per-path RTT estimate and in-flight count come from it).
- FIN: the sender's stream ends after `seq` chunks (chunks 0 .. seq-1).

Pure (no sockets): `FrameReader` parses frames from arbitrary byte pieces and `Reassembler`
delivers chunks once and in order whatever the paths' reordering and duplication (the
redundant scheduler sends every chunk on every path).
"""

from __future__ import annotations

import enum
import socket
import struct
from dataclasses import dataclass

HEADER = struct.Struct("!BIQ")
HEADER_BYTES = HEADER.size          # 13
HELLO_BODY = struct.Struct("!16sBB4sH")
MAX_CHUNK = 1 << 20                 # a frame announcing more is a protocol error, not a buffer to fill


class FrameType(enum.IntEnum):
    HELLO = 1
    DATA = 2
    ACK = 3
    FIN = 4


class ProtocolError(ValueError):
    """A peer sent what this format does not allow (unknown type, oversized chunk, bad HELLO)."""


@dataclass(frozen=True)
class Frame:
    type: FrameType
    seq: int
    payload: bytes = b""


def encode(ftype: FrameType, seq: int, payload: bytes = b"") -> bytes:
    if len(payload) > MAX_CHUNK:
        raise ProtocolError(f"chunk of {len(payload)} B is above the {MAX_CHUNK} B limit")
    return HEADER.pack(int(ftype), len(payload), seq) + payload


@dataclass(frozen=True)
class Hello:
    session: bytes
    path: int
    paths: int
    destination: tuple[str, int] | None     # the app's original (address, port)


def hello(session: bytes, path: int, paths: int, destination: tuple[str, int] | None = None) -> bytes:
    if len(session) != 16 or not 0 <= path < paths <= 255:
        raise ProtocolError(f"bad HELLO: session of {len(session)} B, path {path} of {paths}")
    addr, port = destination or ("0.0.0.0", 0)
    return encode(FrameType.HELLO, 0, HELLO_BODY.pack(session, path, paths, socket.inet_aton(addr), port))


def parse_hello(frame: Frame) -> Hello:
    if frame.type != FrameType.HELLO or len(frame.payload) != HELLO_BODY.size:
        raise ProtocolError(f"a path connection must start with HELLO, got {frame.type.name}")
    session, path, paths, addr, port = HELLO_BODY.unpack(frame.payload)
    if not 0 <= path < paths:
        raise ProtocolError(f"HELLO names path {path} of {paths}")
    return Hello(session, path, paths, (socket.inet_ntoa(addr), port) if port else None)


class FrameReader:
    """Frames out of a byte stream fed in pieces of any size (TCP keeps no message boundaries)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER_BYTES:
            ftype, length, seq = HEADER.unpack_from(self._buf)
            try:
                kind = FrameType(ftype)
            except ValueError:
                raise ProtocolError(f"unknown frame type {ftype}") from None
            if length > MAX_CHUNK:
                raise ProtocolError(f"frame announces {length} B, above the {MAX_CHUNK} B limit")
            if len(self._buf) < HEADER_BYTES + length:
                break
            out.append(Frame(kind, seq, bytes(self._buf[HEADER_BYTES:HEADER_BYTES + length])))
            del self._buf[:HEADER_BYTES + length]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)


class Reassembler:
    """Chunks by global sequence number in, the stream's bytes out: once each and in order.

    A chunk below the next expected number, or already held, is a duplicate (counted, dropped);
    a chunk ahead of a gap waits. `limit` chunks may wait at most: beyond it the sender broke its
    window (ProtocolError), so memory stays bounded."""

    def __init__(self, limit: int = 65536) -> None:
        self.next_seq = 0
        self.held: dict[int, bytes] = {}
        self.limit = limit
        self.duplicates = 0
        self.delivered_chunks = 0
        self.end: int | None = None       # FIN's count, once known

    def add(self, seq: int, payload: bytes) -> list[bytes]:
        """The payloads now deliverable in order (possibly none)."""
        if seq < self.next_seq or seq in self.held:
            self.duplicates += 1
            return []
        if self.end is not None and seq >= self.end:
            raise ProtocolError(f"chunk {seq} after the stream ended at {self.end}")
        if seq != self.next_seq:
            if len(self.held) >= self.limit:
                raise ProtocolError(f"{len(self.held)} chunks wait behind chunk {self.next_seq}")
            self.held[seq] = payload
            return []
        out = [payload]
        self.next_seq += 1
        while self.next_seq in self.held:
            out.append(self.held.pop(self.next_seq))
            self.next_seq += 1
        self.delivered_chunks += len(out)
        return out

    def fin(self, count: int) -> None:
        if self.end is not None and self.end != count:
            raise ProtocolError(f"FIN says {count} chunks, an earlier FIN said {self.end}")
        if count < self.next_seq:
            raise ProtocolError(f"FIN says {count} chunks, {self.next_seq} already delivered")
        self.end = count

    @property
    def complete(self) -> bool:
        return self.end is not None and self.next_seq >= self.end
