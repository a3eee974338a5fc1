"""The phone's TCP relay (the seeds' CPROXY mode): it accepts the watch's connection and opens its
own to the server, splitting the TCP connection in two as Wear OS's phone proxy does.

    python -m wearlab.nodes.relay LISTEN_PORT=HOST:PORT ... [options]   (prints `ready`)
    python -m wearlab.nodes.relay LISTEN_PORT=original ...              (transparent)

`LISTEN_PORT=original`: the upstream is each connection's own destination before the phone's
netfilter REDIRECTed it here (SO_ORIGINAL_DST), so one listener splits every connection to a
port whatever the server - as a phone that proxies all its watch's TCP does (a relay kind's
`intercept:`, nodes.proxies). A connection made to the listener itself (no REDIRECT, so its
original destination is this relay) is reset, never relayed to itself.

Design, from measurements (bench/bench_relay.py): one thread per direction of each connection,
blocking, moving bytes with splice(2) socket -> pipe -> socket, so the payload never enters
Python and the GIL is free while a thread waits. The pipe is the relay's application buffer
(`--app-buffer`, set with F_SETPIPE_SZ; the kernel rounds it up to a power-of-two number of pages,
at least one page): a thread reads at most that much, writes it all out, reads again - so at most
`app-buffer` bytes per direction sit in the relay, as in a proxy with a fixed buffer.

Faithful relaying: TCP_NODELAY both ways (a relay forwards what it has at once; Nagle would hold
TLS handshake messages for the peer's delayed ACK); an EOF is passed on as a half-close (the other
direction goes on); a reset is passed on as a reset (SO_LINGER 0 then close); a failed upstream
connect resets the watch's connection.

`--events FILE`: CSV t_ns,conn,dir,op,offset - per direction (down = server -> watch) the
cumulative bytes taken in (`in`) and handed on (`out`), with the shared kernel clock: the stream
workload's d2/d3 split; flushed at least every half second, so a live view can read the relay's
buffer from the file's tail. A connection's events are written before its EOF is passed on, so they are
on disk when the receiver sees the end of the stream.

`--held FILE`: the bytes the relay's pipes hold per direction (taken in, not yet handed on), over
all connections, kept current in an mmap'ed file (HeldBytes): what the interface selector adds to
the sockets' queues for the paper's CPROXY backlog.

`--mitigation virtual-queue`: see wearlab.nodes.vqueue (the controller runs in this process).

`--window-share F`: the relay's server-side sockets hold at most F x their receive buffer of
payload, as Linux kernels before 6.6 did: there the window offered was the buffer's free memory
/ 2^tcp_adv_win_scale (1/2 at its default 1), i.e. they assumed each byte of payload costs two of
buffer memory (skb truesize; Documentation/networking/ip-sysctl.rst). Linux 6.6+ ignores that
sysctl and learns the ratio payload/truesize of what it receives (scaling_ratio; ~0.9 for this
guest's veth packets), so the same buffer holds about twice the payload. TCP_WINDOW_CLAMP cannot
model it: it caps the window beyond the last byte received, not what waits unread. So after each
read the relay measures its socket's own ratio (queued payload, SIOCINQ, over the memory it
takes, SO_MEMINFO) and sets the buffer (SO_RCVBUFFORCE) to F x R / ratio, R the buffer the
socket had when the first measurement was taken (the phone's rmem_default: max makes it
tcp_rmem max): its payload capacity is then F x R, as on the old kernels.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import signal
import socket
import struct
import sys
import termios
import threading
import time

from wearlab.nodes.held_file import HeldFile, read_held_file

# The relay's buffer per direction unless told (`--app-buffer`; the relay kind's `app_buffer`).
APP_BUFFER = 65536
F_SETPIPE_SZ = 1031
F_GETPIPE_SZ = 1032
LISTEN_BACKLOG = 1024
FLUSH_NS = 500_000_000      # events reach the file at least this often (the live d3: measure.queues)
SO_ORIGINAL_DST = 80          # linux/netfilter_ipv4.h: at SOL_IP, a REDIRECTed socket's sockaddr_in before NAT
ORIGINAL = "original"        # LISTEN_PORT=original: relay to the connection's original destination
HELD_DIRECTIONS = ("down", "up")   # down: server -> watch
RESET_ERRNOS = (errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EHOSTUNREACH)


class EventLog:
    """Buffered per connection, appended to the file in one write per flush."""

    def __init__(self, path: str | None):
        self.path = path
        self.lock = threading.Lock()
        if path:
            with open(path, "a") as f:
                if f.tell() == 0:
                    f.write("t_ns,conn,dir,op,offset\n")

    def write(self, rows: list[tuple[int, int, str, str, int]]) -> None:
        if not self.path or not rows:
            return
        text = "".join(f"{t},{c},{d},{op},{off}\n" for t, c, d, op, off in rows)
        with self.lock, open(self.path, "a") as f:
            f.write(text)


class HeldBytes(HeldFile):
    """What the relay holds in its own buffers, per direction over all connections: bytes taken in
    and not yet handed on - the paper's CPROXY count (what went in minus what came out) less the
    sockets' queues, which the kernel shows (/proc/net/tcp) where this process's pipes it does not.
    A HeldFile of HELD_DIRECTIONS, so a reader outside the process (the interface selector, every
    poll) sees it at once; `read_held`."""

    def __init__(self, path: str | None):
        super().__init__(path, HELD_DIRECTIONS)


def read_held(path: str | os.PathLike[str]) -> dict[str, int]:
    """A relay's HeldBytes file: {"down": bytes, "up": bytes} (zeros before the relay wrote it)."""
    return read_held_file(path, HELD_DIRECTIONS)


class Connection:
    """One watch connection and its upstream: two pumps, then both sockets closed."""

    counter = 0
    counter_lock = threading.Lock()

    def __init__(self, client: socket.socket, upstream: socket.socket, relay: Relay):
        with Connection.counter_lock:
            Connection.counter += 1
            self.id = Connection.counter
        self.client, self.upstream, self.relay = client, upstream, relay
        self.aborting = False
        self.lock = threading.Lock()
        self.open_pumps = 2

    def start(self) -> None:
        for src, dst, direction in ((self.upstream, self.client, "down"), (self.client, self.upstream, "up")):
            threading.Thread(target=self._pump, args=(src, dst, direction), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str) -> None:
        events: list[tuple[int, int, str, str, int]] | None = [] if self.relay.events.path else None
        r, w = os.pipe()
        held, took, gave = self.relay.held, 0, 0
        try:
            size = self.relay.app_buffer
            try:
                fcntl.fcntl(w, F_SETPIPE_SZ, size)
            except OSError:
                pass  # above /proc/sys/fs/pipe-max-size: the default pipe (64 KiB)
            cap = fcntl.fcntl(w, F_GETPIPE_SZ)
            share = PayloadShare(self.relay.window_share) if direction == "down" and self.relay.window_share \
                else None
            while True:
                try:
                    n = os.splice(src.fileno(), w, min(size, cap))
                except OSError as e:
                    if e.errno in RESET_ERRNOS or self.aborting:
                        self._abort(dst)
                        return
                    raise
                if n == 0:
                    if self.aborting:
                        return
                    if events is not None:
                        self.relay.events.write(events)
                        events.clear()
                    try:
                        dst.shutdown(socket.SHUT_WR)   # pass the half-close on
                    except OSError:
                        pass
                    return
                took += n
                held.add(direction, n)
                if share is not None:
                    share.apply(src)
                if events is not None:
                    events.append((time.time_ns(), self.id, direction, "in", took))
                    if events[-1][0] - events[0][0] >= FLUSH_NS:   # while its buffer is full: the live d3
                        self.relay.events.write(events)
                        events.clear()
                left = n
                while left:
                    try:
                        m = os.splice(r, dst.fileno(), left)
                    except OSError as e:
                        if e.errno in RESET_ERRNOS or self.aborting:
                            self._abort(src)
                            return
                        raise
                    left -= m
                    gave += m
                    held.add(direction, -m)
                    if events is not None:
                        events.append((time.time_ns(), self.id, direction, "out", gave))
                if events is not None and (len(events) >= 4096 or events[-1][0] - events[0][0] >= FLUSH_NS):
                    self.relay.events.write(events)
                    events.clear()
        finally:
            held.add(direction, gave - took)   # what a reset left in the pipe is dropped with it
            if events:
                self.relay.events.write(events)
            os.close(r)
            os.close(w)
            self._pump_done()

    def _abort(self, other: socket.socket) -> None:
        """A reset on one side: reset the other side too, and wake the reverse pump."""
        with self.lock:
            if self.aborting:
                return
            self.aborting = True
        try:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RD)   # the other pump's blocking read returns at once
            except OSError:
                pass

    def _pump_done(self) -> None:
        with self.lock:
            self.open_pumps -= 1
            last = self.open_pumps == 0
        if last:
            self.relay.forget(self)
            for s in (self.client, self.upstream):
                try:
                    s.close()   # with SO_LINGER 0 (set by _abort), the close sends the reset
                except OSError:
                    pass


SO_MEMINFO, SO_RCVBUFFORCE = 55, 33      # asm-generic/socket.h
SK_MEMINFO_RMEM_ALLOC = 0
RATIO_MIN_QUEUE = 65536                   # bytes queued before the payload/memory ratio is taken


class PayloadShare:
    """Hold a server-side socket's unread payload to `share` x its buffer (module doc)."""

    def __init__(self, share: float):
        self.share, self.buffer, self.set_to = share, None, None

    def apply(self, s: socket.socket) -> None:
        try:
            queued = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0" * 4))[0]
            if queued < RATIO_MIN_QUEUE:
                return
            alloc = struct.unpack("9I", s.getsockopt(socket.SOL_SOCKET, SO_MEMINFO, 36))[SK_MEMINFO_RMEM_ALLOC]
            if self.buffer is None:
                self.buffer = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
            ratio = min(1.0, queued / alloc) if alloc else 1.0
            want = int(self.share * self.buffer / ratio)
            if self.set_to is None or abs(want - self.set_to) > self.set_to // 50:   # 2 %: not every read
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, want // 2)        # the kernel doubles it
                self.set_to = want
        except OSError:
            pass   # the connection is going away: its pump sees it on the next read


class Relay:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.window_share = args.window_share
        self.app_buffer = args.app_buffer
        self.events = EventLog(args.events)
        self.held = HeldBytes(args.held)
        self.live: set[Connection] = set()
        self.lock = threading.Lock()
        self.listeners: list[tuple[socket.socket, tuple[str, int]]] = []
        self.controller = None

    def _tune(self, s: socket.socket) -> None:
        if self.args.sndbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.args.sndbuf)
        if self.args.rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.args.rcvbuf)

    def listen(self, specs: list[tuple[int, tuple[str, int] | None]]) -> None:
        for port, target in specs:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._tune(s)   # accepted sockets inherit the buffer sizes (set before the handshake)
            s.bind((self.args.bind, port))
            s.listen(LISTEN_BACKLOG)
            self.listeners.append((s, target))

    def serve(self) -> None:
        for s, target in self.listeners:
            threading.Thread(target=self._accept_loop, args=(s, target), daemon=True).start()

    def _accept_loop(self, lst: socket.socket, target: tuple[str, int] | None) -> None:
        while True:
            try:
                client, _ = lst.accept()
            except OSError:
                return
            threading.Thread(target=self._open, args=(client, target), daemon=True).start()

    def _open(self, client: socket.socket, target: tuple[str, int] | None) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target is None:
            target = original_destination(client)
            if target is None:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                return
        up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._tune(up)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            up.connect(target)
        except OSError:
            up.close()
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()   # the watch learns at once: reset
            return
        conn = Connection(client, up, self)
        with self.lock:
            self.live.add(conn)
        conn.start()

    def forget(self, conn: Connection) -> None:
        with self.lock:
            self.live.discard(conn)
        if self.controller is not None:
            self.controller.closed(conn)

    def connections(self) -> list[Connection]:
        with self.lock:
            return list(self.live)


def original_destination(s: socket.socket) -> tuple[str, int] | None:
    """Where the accepted connection `s` was going before REDIRECT (SO_ORIGINAL_DST); None when
    it came to the listener itself (then its original destination is the listener's address)."""
    try:
        raw = s.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    except OSError:
        return None
    port = struct.unpack_from("!H", raw, 2)[0]
    host = socket.inet_ntoa(raw[4:8])
    if (host, port) == s.getsockname()[:2]:
        return None
    return host, port


def _spec(text: str) -> tuple[int, tuple[str, int] | None]:
    try:
        port, target = text.split("=", 1)
        if target == ORIGINAL:
            p = int(port)
            if not 0 < p < 65536:
                raise ValueError
            return p, None
        host, tport = target.rsplit(":", 1)
        p, tp = int(port), int(tport)
        if not (0 < p < 65536 and 0 < tp < 65536) or not host:
            raise ValueError
        return p, (host, tp)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not LISTEN_PORT=HOST:PORT (e.g. 20000=10.0.0.2:80) "
                                         f"nor LISTEN_PORT={ORIGINAL}") from None


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive number of bytes")
    return v


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m wearlab.nodes.relay", description=__doc__.splitlines()[0])
    ap.add_argument("specs", nargs="+", type=_spec, metavar="LISTEN_PORT=HOST:PORT")
    ap.add_argument("--bind", default="0.0.0.0")
    ap.add_argument("--sndbuf", type=_positive)
    ap.add_argument("--rcvbuf", type=_positive)
    ap.add_argument("--app-buffer", type=_positive, default=APP_BUFFER)
    ap.add_argument("--events")
    ap.add_argument("--held")
    ap.add_argument("--mitigation", choices=("none", "virtual-queue"), default="none")
    ap.add_argument("--vq-T", type=float, default=1.0)
    ap.add_argument("--vq-epsilon", type=float, default=0.3)
    ap.add_argument("--throttle-dev")
    ap.add_argument("--throttle-classid", default="1:1")
    ap.add_argument("--series")
    ap.add_argument("--window-share", type=float)
    args = ap.parse_args(argv)
    if args.mitigation == "virtual-queue" and not args.throttle_dev:
        ap.error("--mitigation virtual-queue needs --throttle-dev (the ifb whose htb class it changes)")
    if args.window_share is not None and not 0 < args.window_share <= 1:
        ap.error("--window-share must be in (0, 1]")
    if not (0 < args.vq_epsilon < 0.5) or args.vq_T <= 0:
        ap.error("--vq-epsilon must be in (0, 0.5) and --vq-T positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    relay = Relay(args)
    try:
        relay.listen(args.specs)
    except OSError as e:
        print(f"relay: cannot listen: {e}", file=sys.stderr)
        return 2
    if args.mitigation == "virtual-queue":
        from wearlab.nodes.vqueue import VirtualQueueController
        relay.controller = VirtualQueueController(relay, T=args.vq_T, epsilon=args.vq_epsilon,
                                                  device=args.throttle_dev, classid=args.throttle_classid,
                                                  series=args.series)
        relay.controller.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    relay.serve()
    print("ready", flush=True)
    while not stop.wait(1.0):
        pass
    if relay.controller is not None:
        relay.controller.stop()
    for s, _ in relay.listeners:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
