"""The two endpoints of the chunked multipath transport (wire format: wearlab.nodes.multipath_wire;
schedulers: wearlab.nodes.multipath_schedulers), as in seed 003 section 5's framework.

- `watch`: accepts the app's TCP connection on a local port (the wearable's netfilter REDIRECTs
  the app's (server, port) there, as the phone's proxies do), opens one TCP connection per path
  to the server-side agent (each bound to its own source address, so the watch's routing sends
  it over its own link: WiFi straight to the AP, BT through the phone), and runs a `Session`.
  A path's target host `*` is the app's own destination host: a workload with several servers
  (a page's origins) has a server agent on each, and each connection rides to its own.
- `server`: accepts path connections, groups them by the session id of their HELLO, and when a
  session's every path has arrived connects to the real server and runs a `Session`.

A `Session` is the same at both ends (both directions are chunked): the app's bytes are cut into
chunks of at most `chunk` bytes, each sent on the path(s) its scheduler chooses; chunks arriving
on any path are ACKed on that path (the RTT and in-flight estimates) and reassembled in order for
the app. The app's end of stream travels as FIN after the last chunk.

Counters per path (chunks and bytes sent and received, duplicates dropped, smoothed RTT) are
summed over the agent's sessions and written every `series_interval` to a CSV, so a run shows
the scheduler's split over time. With `--chunks FILE` each DATA chunk's copy is also recorded
when it was written to a path (`sent`) and when it arrived (`received`), wall-clock ns: the
agents of a run share one kernel clock, so the two sides' records join into each copy's flight
(wearlab.measure.chunk_flights: the energy model's busy time). They are kept in memory and
written with the counters (never one write per chunk).

With `--active NAME --control SOCKET` (an interface policy: wearlab.nodes.interface_selection)
every session sends on that one path only (`Pin`), and a datagram naming another path on the
Unix socket SOCKET moves the next chunks there: the path connections stay open, so the app's
connection never notices the switch. Chunks already on the old path finish there (their ACKs);
one held there past the reinjection limit goes again on the pinned path, and a chunk on the pinned
path is never sent again on another while that path is up (its ACKs may queue behind a deep
download: `bt` means WiFi carries nothing).

With `--held FILE` the agent keeps, per path, the bytes its own write buffers hold toward that
path over its sessions (asyncio's transport buffers: frames written that the path socket's send
buffer has not taken yet) in a HeldFile (wearlab.nodes.held_file), every HELD_TICK_S while a
session lives: the one place an upload's bytes wait at the watch that the kernel does not show
(the interface selector adds it to the BT qdisc's backlog and the socket's unsent bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import fcntl
import importlib
import os
import signal
import socket
import sys
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

from wearlab.measure.chunk_flights import CHUNK_COLUMNS, RECEIVED, SENT
from wearlab.nodes.held_file import HeldFile
from wearlab.nodes.relay import original_destination
from wearlab.nodes.multipath_schedulers import PathState, Scheduler
from wearlab.nodes.multipath_wire import (HEADER, HEADER_BYTES, HELLO_BODY, FrameReader, FrameType, ProtocolError,
                                          Reassembler, encode, hello, parse_hello)

READ_BYTES = 65536
# SO_RCVBUF of the agents' sockets on the app's side: small, so the app feels the paths'
# backpressure as it would its own TCP's. With Linux's autotuned loopback buffers (MBs), a bulk
# sender wrote 3 s at loopback speed into the watch agent and waited 20 s for it to drain.
APP_RCVBUF = 65536
# ... and an Ethernet-sized MSS there: on loopback (MSS 65483) the app's send buffer autotunes to
# MBs (it grows with cwnd x MSS), another bloated buffer in front of the paths.
APP_MSS = 1448
HELLO_WAIT_S = 10.0       # a session whose paths do not all arrive within this is dropped
# A chunk unACKed for longer than max(REINJECT_MIN_S, REINJECT_RTTS x its path's srtt) goes again on
# another path (a path that stops carrying without closing: a black hole). Checked every tick.
REINJECT_MIN_S = 0.2
REINJECT_RTTS = 4
REINJECT_TICK_S = 0.05
# How often the --held file is brought up to date while a session lives: half the interface
# selector's 20 ms poll, so what it reads is at most one tick old. Idle, the agent sleeps.
HELD_TICK_S = 0.01
ANY_HOST = "*"            # a path target's host: the app's own destination's
SERIES_COLUMNS = ("t_ns", "side", "path_index", "path_name", "chunks_sent", "bytes_sent", "chunks_received",
                  "bytes_received", "duplicates", "reinjected", "srtt_s")


@dataclass
class PathCounters:
    name: str
    chunks_sent: int = 0
    bytes_sent: int = 0
    chunks_received: int = 0
    bytes_received: int = 0
    duplicates: int = 0
    reinjected: int = 0          # chunks sent again on this path because another held them too long
    srtt_s: float | None = None


@dataclass
class Counters:
    """Per path, summed over an agent's sessions."""
    names: list[str]
    paths: list[PathCounters] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.paths = [PathCounters(n) for n in self.names]


class ChunkLog:
    """Each DATA chunk copy an agent wrote to a path or read from one (CHUNK_COLUMNS: the record
    format is wearlab.measure.chunk_flights', which joins the two sides), in memory
    until `drain` (write_series, every interval and at exit): a tuple per event, so a 16 MB
    transfer's ~12,000 chunks cost no file write each."""

    def __init__(self, side: str) -> None:
        self.side = side
        self.rows: list[tuple[int, str, str, str, int, int, str, int]] = []

    def add(self, event: str, session: str, seq: int, path: int, name: str, size: int, t_ns: int) -> None:
        self.rows.append((t_ns, self.side, event, session, seq, path, name, size))

    def drain(self) -> list[tuple[int, str, str, str, int, int, str, int]]:
        rows, self.rows = self.rows, []
        return rows


class Pin:
    """The one path an interface policy lets the agent's sessions send on (index into the paths),
    shared by the agent's sessions; `move` is what a control datagram does."""

    def __init__(self, names: list[str], active: str) -> None:
        self.names = names
        self.active = names.index(active)
        self.sessions: set[Session] = set()

    def move(self, name: str) -> None:
        if name not in self.names:
            print(f"multipath: control names no path of this agent: {name!r}", file=sys.stderr)
            return
        self.active = self.names.index(name)
        for s in list(self.sessions):
            asyncio.get_running_loop().create_task(s._notify())


class ControlProtocol(asyncio.DatagramProtocol):
    def __init__(self, pin: Pin) -> None:
        self.pin = pin

    def datagram_received(self, data: bytes, addr) -> None:
        self.pin.move(data.decode(errors="replace").strip())


class LiveSessions:
    """An agent's running sessions, and a wake-up for whoever waits for the first (keep_held)."""

    def __init__(self) -> None:
        self.sessions: set[Session] = set()
        self.some = asyncio.Event()

    def add(self, session: Session) -> None:
        self.sessions.add(session)
        self.some.set()

    def discard(self, session: Session) -> None:
        self.sessions.discard(session)
        if not self.sessions:
            self.some.clear()


class Session:
    """One app connection carried over path connections (module doc). Paths attach as they
    connect (`attach`): the session starts on the first, so the worse path's handshake never
    delays the first bytes. A path that closes is marked down and its unACKed chunks are sent
    again on the others (the receiver drops whichever copy comes second); so is a chunk a path
    has held unACKed too long (`_reinject`). The stuck chunks keep counting against that path's
    window, so it gets nothing new until its ACKs return."""

    def __init__(self, app: tuple[asyncio.StreamReader, asyncio.StreamWriter], names: list[str],
                 scheduler: Scheduler, chunk: int, window: int, counters: Counters, pin: Pin | None = None,
                 log: ChunkLog | None = None, session_id: str = "", live: LiveSessions | None = None) -> None:
        self.app_r, self.app_w = app
        self.pin, self.live = pin, live
        self.log, self.session_id = log, session_id
        self.paths: list[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None] = [None] * len(names)
        self.state = [PathState(i, n, window, up=False) for i, n in enumerate(names)]
        self.scheduler = scheduler
        self.chunk = chunk
        self.counters = counters
        # per path: seq -> (send time, frame), until its ACK
        self.unacked: list[dict[int, tuple[float, bytes]]] = [{} for _ in names]
        # per path: seq -> the path's bytes in flight just after it was sent (PathState.flight)
        self.flight_at_send: list[dict[int, int]] = [{} for _ in names]
        # seqs no path has ACKed yet: the stream is through when this is empty (a redundant
        # copy still on its way over the worse path is not waited for)
        self.outstanding: set[int] = set()
        self.changed = asyncio.Condition()     # an ACK, a path up or down, the stream's end
        self.reassembler = Reassembler()
        self.fin: bytes | None = None          # our FIN frame, once the app's stream ended
        self.receivers: list[asyncio.Task] = []
        self.error: str | None = None
        self.unreachable: set[int] = set()     # paths whose connection failed (watch side)

    async def attach(self, i: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.paths[i] = (reader, writer)
        self.state[i].up = True
        if self.fin is not None:
            writer.write(self.fin)
        self.receivers.append(asyncio.create_task(self._receive(i)))
        await self._notify()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def _stranded(self) -> bool:
        """Every path has gone down or could not connect: nothing more can arrive or leave."""
        return all(i in self.unreachable or (self.paths[i] is not None and not st.up)
                   for i, st in enumerate(self.state))

    async def unreachable_path(self, i: int) -> None:
        self.unreachable.add(i)
        await self._notify()

    def _done(self) -> bool:
        return self.fin is not None and self.reassembler.complete and not self.outstanding

    def write_buffered(self, i: int) -> int:
        """Bytes written to path i that this process still holds (asyncio's transport buffer: the
        path socket's send buffer has not taken them)."""
        conn = self.paths[i]
        return conn[1].transport.get_write_buffer_size() if conn is not None else 0

    def _backlog(self) -> int:
        """Bytes of the app's stream behind the chunk being scheduled that this agent can see: read
        into the app reader's buffer, or in the kernel's receive queue of the app's socket (FIONREAD).
        What the app's own send buffer still holds is invisible here."""
        queued = len(getattr(self.app_r, "_buffer", b""))     # asyncio.StreamReader's buffer (no public size)
        sock = self.app_w.get_extra_info("socket")
        if sock is not None:
            try:
                queued += int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4)), sys.byteorder)
            except OSError:
                pass
        return queued

    def _choose(self, size: int) -> list[int]:
        self.scheduler.backlog = self._backlog()
        if self.pin is None:
            return self.scheduler.choose(self.state, size)
        i = self.pin.active
        st = self.state[i]
        if st.up:
            return [i] if st.room(size) else []
        if i in self.unreachable or self.paths[i] is not None:
            # The pinned path failed or closed: the others carry the flow rather than nothing.
            return self.scheduler.choose(self.state, size)
        return []                 # not connected yet: wait for it

    async def run(self) -> None:
        if self.pin is not None:
            self.pin.sessions.add(self)
        if self.live is not None:
            self.live.add(self)
        sender = asyncio.create_task(self._send())
        watchdog = asyncio.create_task(self._reinject())
        try:
            async with self.changed:
                await self.changed.wait_for(lambda: self._done() or self.error is not None or self._stranded() or
                                            (sender.done() and sender.exception() is not None))
            if sender.done() and sender.exception() is not None:
                raise sender.exception()
            if self.error or not self._done():
                print(f"multipath session ended: {self.error or 'every path closed'}", file=sys.stderr)
        except (ConnectionError, ProtocolError) as e:
            print(f"multipath session ended: {e}", file=sys.stderr)
        finally:
            if self.pin is not None:
                self.pin.sessions.discard(self)
            if self.live is not None:
                self.live.discard(self)
            for t in [sender, watchdog, *self.receivers]:
                t.cancel()
            for conn in [*self.paths, (self.app_r, self.app_w)]:
                if conn is not None:
                    conn[1].close()

    async def _send(self) -> None:
        seq = 0
        while data := await self.app_r.read(self.chunk):
            async with self.changed:
                while not (chosen := self._choose(len(data))):
                    await self.changed.wait()
            self._transmit(chosen, seq, encode(FrameType.DATA, seq, data), len(data))
            # Backpressure from the chosen paths' sockets (the window already bounds it).
            await asyncio.gather(*(self.paths[i][1].drain() for i in chosen))
            seq += 1
        self.fin = encode(FrameType.FIN, seq)
        for i, conn in enumerate(self.paths):
            if conn is not None and self.state[i].up:
                conn[1].write(self.fin)
        await self._notify()

    def _transmit(self, chosen: list[int], seq: int, frame: bytes, size: int) -> None:
        now = time.monotonic()
        wall_ns = time.time_ns() if self.log is not None else 0
        self.outstanding.add(seq)
        for i in chosen:
            self.state[i].inflight += size
            self.unacked[i][seq] = (now, frame)
            self.flight_at_send[i][seq] = self.state[i].inflight
            self.paths[i][1].write(frame)
            c = self.counters.paths[i]
            c.chunks_sent += 1
            c.bytes_sent += size
            if self.log is not None:
                self.log.add(SENT, self.session_id, seq, i, c.name, size, wall_ns)

    async def _receive(self, i: int) -> None:
        reader, writer = self.paths[i]
        frames = FrameReader()
        c = self.counters.paths[i]
        try:
            while data := await reader.read(READ_BYTES):
                # One arrival time per read: the chunks it completed arrived by then.
                wall_ns = time.time_ns() if self.log is not None else 0
                for f in frames.feed(data):
                    if f.type == FrameType.DATA:
                        writer.write(encode(FrameType.ACK, f.seq))
                        c.chunks_received += 1
                        c.bytes_received += len(f.payload)
                        if self.log is not None:
                            self.log.add(RECEIVED, self.session_id, f.seq, i, c.name, len(f.payload), wall_ns)
                        before = self.reassembler.duplicates
                        out = self.reassembler.add(f.seq, f.payload)
                        c.duplicates += self.reassembler.duplicates - before
                        if out:
                            self.app_w.write(b"".join(out))
                            await self.app_w.drain()
                    elif f.type == FrameType.ACK:
                        sent = self.unacked[i].pop(f.seq, None)
                        self.outstanding.discard(f.seq)
                        flight = self.flight_at_send[i].pop(f.seq, None)
                        if sent is not None:
                            st = self.state[i]
                            st.stalled = False
                            st.rtt_sample(time.monotonic() - sent[0], flight)
                            st.inflight -= len(sent[1]) - HEADER_BYTES
                            c.srtt_s = st.srtt
                    elif f.type == FrameType.FIN:
                        self.reassembler.fin(f.seq)
                    else:
                        raise ProtocolError(f"{f.type.name} in the middle of a path connection")
                    if self.reassembler.complete and self.app_w.can_write_eof() and not self.app_w.is_closing():
                        self.app_w.write_eof()
                await self._notify()
        except (ConnectionError, ProtocolError) as e:
            if isinstance(e, ProtocolError):
                self.error = f"path {self.state[i].name}: {e}"
        await self._path_down(i)

    async def _reinject(self) -> None:
        while True:
            await asyncio.sleep(REINJECT_TICK_S)
            now = time.monotonic()
            stalls = sum(st.stalled for st in self.state)
            # An interface policy's path holds while it is up (`bt`: WiFi is off): a stalled
            # chunk goes again only there - what the old path holds after a move - never off it.
            pinned = self.pin.active if self.pin is not None and self.state[self.pin.active].up else None
            for i, st in enumerate(self.state):
                limit = max(REINJECT_MIN_S, REINJECT_RTTS * (st.srtt or REINJECT_MIN_S))
                for seq, (sent, frame) in list(self.unacked[i].items()):
                    if now - sent < limit:
                        break            # sent in order: the rest are younger
                    st.stalled = True    # until its next ACK (a scheduler that waits for it stops)
                    if seq not in self.outstanding or any(seq in self.unacked[k] for k in range(len(self.state))
                                                          if k != i and self.state[k].up):
                        continue
                    others = [p for p in self.state if p.up and p.index != i and p.room(len(frame))
                              and pinned in (None, p.index)]
                    if not others:
                        break
                    k = min(others, key=lambda p: (p.srtt is None, p.srtt or 0.0)).index
                    self._transmit([k], seq, frame, len(frame) - HEADER_BYTES)
                    self.counters.paths[k].reinjected += 1
            if sum(st.stalled for st in self.state) != stalls:
                await self._notify()     # a sender waiting for a path that has stalled chooses again

    async def _path_down(self, i: int) -> None:
        """Path i closed: what it had not delivered goes again on the paths still up."""
        self.state[i].up = False
        lost, self.unacked[i] = self.unacked[i], {}
        self.flight_at_send[i] = {}
        self.state[i].inflight = 0
        lost = {seq: sent for seq, sent in lost.items() if seq in self.outstanding}
        alive = [p.index for p in self.state if p.up]
        if lost and not alive:
            self.error = self.error or f"every path is down with {len(lost)} chunks unacknowledged"
        for seq, (_, frame) in sorted(lost.items()):
            if alive and not any(seq in self.unacked[k] for k in alive):
                k = min(alive, key=lambda k: self.state[k].inflight)
                self._transmit([k], seq, frame, len(frame) - HEADER_BYTES)
        await self._notify()


def load_scheduler(spec: str) -> Scheduler:
    """'module:Class' -> an instance (the node kind resolves a catalog name to this)."""
    module, _, cls = spec.partition(":")
    obj = getattr(importlib.import_module(module), cls)
    if not (isinstance(obj, type) and issubclass(obj, Scheduler)):
        raise SystemExit(f"{spec} is not a Scheduler subclass")
    return obj()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


@dataclass
class PathSpec:
    name: str
    target: tuple[str, int]
    source: str | None          # the local address to bind (selects the link by the watch's routing)

    @classmethod
    def parse(cls, text: str) -> "PathSpec":
        """name=host:port[@source]"""
        name, _, rest = text.partition("=")
        target, _, source = rest.partition("@")
        return cls(name, _addr(target), source or None)


def listener(addr: tuple[str, int], app_side: bool) -> socket.socket:
    """A listening socket; on the app's side with a small receive buffer (APP_RCVBUF), which the
    accepted connections inherit (it must be set before listen to bound the window scale)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if app_side:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, APP_RCVBUF)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, APP_MSS)
    sock.bind(addr)
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def connect_upstream(addr: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The server agent's connection to the app's server, with the app side's small receive
    buffer (what the server sends back is backpressured the same way)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, APP_RCVBUF)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, APP_MSS)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, addr)
    except OSError:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


async def open_path(spec: PathSpec, target: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if spec.source:
        sock.bind((spec.source, 0))
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, target)
    except OSError:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


def path_target(spec: PathSpec, destination: tuple[str, int] | None) -> tuple[str, int]:
    """Where a session's path connects: the spec's target, or with host `*` the server agent's
    port on the app's own destination host."""
    if spec.target[0] != ANY_HOST:
        return spec.target
    if destination is None:
        raise OSError(f"path {spec.name} goes to the app's destination host, and this connection has none "
                      "(it was not REDIRECTed)")
    return destination[0], spec.target[1]


def session_key(sid: bytes) -> str:
    """A session's name in the chunk records: its HELLO id's first 8 bytes in hex (both sides)."""
    return sid[:8].hex()


async def keep_held(held: HeldFile, live: LiveSessions) -> None:
    """Per path, what the agent's write buffers hold toward it over its live sessions, every
    HELD_TICK_S while one lives; zeros, and asleep, while none does."""
    while True:
        if not live.sessions:
            for name in held.names:
                held.set(name, 0)
            await live.some.wait()
        for i, name in enumerate(held.names):
            held.set(name, sum(s.write_buffered(i) for s in live.sessions))
        await asyncio.sleep(HELD_TICK_S)


class WatchAgent:
    def __init__(self, paths: list[PathSpec], scheduler: str, chunk: int, window: int, pin: Pin | None = None,
                 log: ChunkLog | None = None) -> None:
        self.paths, self.scheduler, self.chunk, self.window = paths, scheduler, chunk, window
        self.counters = Counters([p.name for p in paths])
        self.pin, self.log = pin, log
        self.live = LiveSessions()

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sid = os.urandom(16)
        # Where the app was going before the watch's netfilter REDIRECTed it here.
        destination = original_destination(w.get_extra_info("socket"))
        session = Session((r, w), [p.name for p in self.paths], load_scheduler(self.scheduler), self.chunk,
                          self.window, self.counters, self.pin, self.log, session_key(sid), self.live)

        async def connect(i: int, spec: PathSpec) -> None:
            try:
                target = path_target(spec, destination)
                pr, pw = await open_path(spec, target)
            except OSError as e:
                print(f"multipath: path {spec.name} ({spec.target[0]}:{spec.target[1]}) failed: {e}", file=sys.stderr)
                await session.unreachable_path(i)
                return
            pw.write(hello(sid, i, len(self.paths), destination))
            await session.attach(i, pr, pw)
        opening = [asyncio.create_task(connect(i, p)) for i, p in enumerate(self.paths)]
        try:
            await session.run()
        finally:
            for t in opening:
                t.cancel()


class ServerAgent:
    def __init__(self, upstream: tuple[str, int] | None, names: list[str], scheduler: str, chunk: int, window: int,
                 pin: Pin | None = None, log: ChunkLog | None = None) -> None:
        self.upstream, self.scheduler, self.chunk, self.window = upstream, scheduler, chunk, window
        self.pin, self.log = pin, log
        self.names = names
        self.counters = Counters(names)
        self.live = LiveSessions()
        # A session's future resolves once its upstream is connected; None: ended (kept a while,
        # so a late path of an ended session is refused rather than opening a new upstream).
        self.sessions: dict[bytes, asyncio.Future | None] = {}

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:   # HELLO read exactly, so the frames behind it stay in the reader for the session
            header = await asyncio.wait_for(r.readexactly(HEADER_BYTES), HELLO_WAIT_S)
            body = await asyncio.wait_for(r.readexactly(min(HEADER.unpack(header)[1], HELLO_BODY.size + 1)),
                                          HELLO_WAIT_S)
            (first,) = FrameReader().feed(header + body)
            h = parse_hello(first)
            sid, index, count = h.session, h.path, h.paths
            if count != len(self.names):
                raise ProtocolError(f"HELLO says {count} paths, this agent carries {len(self.names)}")
            if sid in self.sessions and self.sessions[sid] is None:
                raise ProtocolError(f"path {index} of a session that has ended")
        except (ProtocolError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            print(f"multipath: dropped a path connection: {e}", file=sys.stderr)
            w.close()
            return
        if sid in self.sessions:
            try:
                session = await self.sessions[sid]
            except OSError:
                w.close()
                return
            if session.paths[index] is not None:
                print(f"multipath: dropped a second path {index} of one session", file=sys.stderr)
                w.close()
                return
            await session.attach(index, r, w)
            return                      # the session's own task reads it from now on
        ready = self.sessions[sid] = asyncio.get_running_loop().create_future()
        upstream = h.destination or self.upstream
        try:
            if upstream is None:
                raise OSError("the app's destination is unknown (no REDIRECT on the watch) and no --upstream given")
            ur, uw = await connect_upstream(upstream)
        except OSError as e:
            print(f"multipath: upstream {upstream}: {e}", file=sys.stderr)
            ready.set_exception(e)
            ready.exception()           # retrieved: no "never retrieved" warning without a second path
            self._forget(sid)
            w.close()
            return
        session = Session((ur, uw), self.names, load_scheduler(self.scheduler), self.chunk, self.window,
                          self.counters, self.pin, self.log, session_key(sid), self.live)
        ready.set_result(session)
        await session.attach(index, r, w)
        try:
            await session.run()
        finally:
            self._forget(sid)

    def _forget(self, sid: bytes) -> None:
        self.sessions[sid] = None
        asyncio.get_running_loop().call_later(HELLO_WAIT_S, self.sessions.pop, sid, None)


async def write_series(path: Path, side: str, counters: Counters, interval: float,
                       chunks: tuple[Path, ChunkLog] | None = None) -> None:
    """The counters every `interval`, and the chunk records gathered since the last time (also
    when cancelled: the last ones are in at exit). The chunks are written before the counters'
    row of time t, so once a reader sees that row every chunk event before t is in the file."""
    with path.open("w", newline="") as f, (chunks[0].open("w", newline="") if chunks else open(os.devnull, "w")) as cf:
        out, chunk_out = csv.writer(f), csv.writer(cf)
        out.writerow(SERIES_COLUMNS)
        if chunks:
            chunk_out.writerow(CHUNK_COLUMNS)
        try:
            while True:
                t = time.time_ns()
                if chunks:
                    chunk_out.writerows(chunks[1].drain())
                    cf.flush()
                for i, c in enumerate(counters.paths):
                    out.writerow((t, side, i, c.name, c.chunks_sent, c.bytes_sent, c.chunks_received, c.bytes_received,
                                  c.duplicates, c.reinjected, "" if c.srtt_s is None else f"{c.srtt_s:.6f}"))
                f.flush()
                await asyncio.sleep(interval)
        finally:
            if chunks:
                chunk_out.writerows(chunks[1].drain())


def control_socket(path: str) -> socket.socket:
    """The Unix datagram socket an interface policy's switches arrive on (a file, so the runner
    reaches it from outside the node's network namespace, where an abstract socket would not be)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock.bind(path)
    sock.setblocking(False)
    return sock


async def main_async(args: argparse.Namespace) -> None:
    names = [PathSpec.parse(p).name for p in args.path] if args.side == "watch" else args.names.split(",")
    pin = Pin(names, args.active) if args.active else None
    log = ChunkLog(args.side) if args.chunks else None
    if args.side == "watch":
        specs = [PathSpec.parse(p) for p in args.path]
        agent = WatchAgent(specs, args.scheduler, args.chunk, args.window, pin, log)
    else:
        agent = ServerAgent(_addr(args.upstream) if args.upstream else None, names, args.scheduler, args.chunk,
                            args.window, pin, log)
    if pin is not None and args.control:
        await asyncio.get_running_loop().create_datagram_endpoint(lambda: ControlProtocol(pin),
                                                                  sock=control_socket(args.control))
    server = await asyncio.start_server(agent.handle, sock=listener(_addr(args.listen), args.side == "watch"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    series = asyncio.create_task(write_series(Path(args.series), args.side, agent.counters, args.series_interval,
                                              (Path(args.chunks), log) if log is not None else None)) \
        if args.series else None
    held = asyncio.create_task(keep_held(HeldFile(args.held, names), agent.live)) if args.held else None
    async with server:
        await stop.wait()
    if held:
        held.cancel()
    if series:
        series.cancel()
        await asyncio.gather(series, return_exceptions=True)   # its last chunk records written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m wearlab.nodes.multipath_agent", description=__doc__.split("\n")[0])
    ap.add_argument("side", choices=("watch", "server"))
    ap.add_argument("--listen", required=True, help="host:port")
    ap.add_argument("--path", action="append", default=[], help="watch: name=host:port[@source], one per path; "
                    "host * is each app connection's own destination host")
    ap.add_argument("--names", default="", help="server: the paths' names, comma-separated, in index order")
    ap.add_argument("--upstream", help="server: the real server, host:port, for apps that connected to the watch "
                    "agent itself (a REDIRECTed app's own destination comes in the HELLO)")
    ap.add_argument("--scheduler", default="wearlab.nodes.multipath_schedulers:MinRtt", help="module:Class")
    ap.add_argument("--chunk", type=int, default=1400)
    ap.add_argument("--window", type=int, default=65536)
    ap.add_argument("--active", help="an interface policy's path: send on this path only (by name)")
    ap.add_argument("--control", help="with --active: a Unix datagram socket to bind; a datagram naming a path "
                    "moves the flow there")
    ap.add_argument("--series")
    ap.add_argument("--chunks", help="with --series: a CSV of every DATA chunk copy's send and arrival (CHUNK_COLUMNS)")
    ap.add_argument("--series-interval", type=float, default=0.1)
    ap.add_argument("--held", help="a file kept current with, per path, the bytes this agent's write buffers hold "
                    "toward it (little-endian int64s in the paths' order: wearlab.nodes.held_file)")
    asyncio.run(main_async(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
