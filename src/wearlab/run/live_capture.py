"""`wearlab capture [NODE[:IF] | LINK]... [-w FILE|-]`: one pcapng stream of chosen interfaces of
a live topology (a running `wearlab run`, a `wearlab deploy`ed topology), to a file or to stdout
(`wearlab capture watch-phone -w - | wireshark -k -i -`).

Three parts:

- the **request** goes through the run's live control (run.control: `{"action": "capture"}`); the
  runner resolves the targets against its topology (`resolve`: a node, a node's interface, a
  link's two ends) and answers at once with the interfaces and the channel.
- the **session** runs in the runner's process, where the network lives: one `tcpdump -w -` per
  interface in its node's namespace (nothing installed in the node; tcpdump is the runtime's),
  and a thread that frames their pcap bytes onto the channel (`FRAME`: kind, interface,
  length). It stops when the client says so (`Q`), when the client falls silent (no byte for
  SILENCE_S: the client was killed), when the run ends, or when a tcpdump dies; it stops its
  tcpdumps with it.
- the **client** (`capture`, in the CLI) parses each interface's pcap stream
  (measure.pcap.PcapStream) and writes pcapng (measure.pcapng): an IDB per interface named
  `node:link` (described `node dev, link ..., to peer`), an EPB per packet.

The channel is a socket or a line wearlab owns, never files: the client listens on a Unix socket
and the runner connects when it shares the client's kernel (the host runtime, or both in one
guest); a runner in a UML guest cannot reach a host socket, so it opens a free serial line of its
guest (/dev/ttyS63 downwards, taken with flock, each once: a reopened line is attached to no
host pty) and the client opens the host pseudo-terminal
that UML attached it to (the guest's mconsole says which: runtime.mconsole). Bytes back to the
runner: `G` go, `A` WINDOW_ACK bytes consumed, `K` keep-alive, `Q` quit. The runner never has
more than WINDOW bytes unacknowledged: a UML serial line stalls for good when the host pty is
full (its write-ready interrupt is missed), and the window keeps it from ever filling.
"""

from __future__ import annotations

import fcntl
import os
import select
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import tty
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.measure.capture import end_tcpdumps
from wearlab.measure.pcap import PcapStream
from wearlab.measure.pcapng import Interface, PcapngWriter

FRAME = struct.Struct("!BBI")            # kind, interface index, payload length
DATA, LISTENING, ERROR, END = 1, 2, 3, 4
GO, ACK, KEEPALIVE, QUIT = b"G", b"A", b"K", b"Q"
WINDOW = 32768                           # unacknowledged bytes the runner may have on the channel
WINDOW_ACK = 8192                        # one `A` acknowledges this many
MAX_PAYLOAD = 8192
KEEPALIVE_S = 0.5
SILENCE_S = 3.0                          # the runner gives up on a client silent this long
GO_TIMEOUT_S = 15.0
LINES = range(63, 31, -1)                # the guest's serial lines a capture may take
SOCKET_DIR = Path("/run/wearlab/capture")
WHERE = "<command line>"
# From the bundle (its launcher sets WEARLAB_BUNDLE) every command boots a guest of its own, and
# the run or deployment to capture lives in another guest: its deployment record and ledger are
# that guest's, and both channels need a process on the host that the bundle does not have (a
# Unix socket is one kernel's; the serial line's host pty is found through the host's mconsole
# socket, which a guest cannot open over hostfs). So capture refuses before asking anything
# (a request would start tcpdumps that wait for a client that cannot come).
FROM_BUNDLE = ("wearlab capture does not work from the bundle: each BUNDLE/wearlab command boots a UML guest of "
               "its own, and the run or deployment to capture lives in another guest, which this one cannot reach "
               "(a capture's channel needs wearlab on the host: a Unix socket, or the guest's serial line through "
               "the host's mconsole). The run's own captures are in its results (captures/: the workload's "
               "client pcaps); a live capture needs a checkout and root on the host (.venv/bin/wearlab capture)")


# -- what to capture ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Tap:
    node: str
    dev: str
    link: str
    peer: str

    @property
    def name(self) -> str:
        return f"{self.node}:{self.link}"

    @property
    def description(self) -> str:
        return f"{self.node} {self.dev}, link {self.link}, to {self.peer}"

    def doc(self) -> dict[str, str]:
        return {"node": self.node, "dev": self.dev, "link": self.link, "peer": self.peer, "name": self.name,
                "description": self.description}


def resolve(topo, addresses, targets: list[str], containers: frozenset[str] = frozenset()) -> list[Tap]:
    """The interfaces `targets` name: NODE (all its interfaces), NODE:IF (IF an interface name,
    a peer node or a link of NODE), LINK (a-b: both ends). None: every interface. Raises
    ValueError naming what does not exist."""
    def link_name(a: str, b: str) -> str:
        link = topo.link_between(a, b)
        return f"{link.a}-{link.b}"

    every = {n: [Tap(n, i.name, link_name(n, i.peer), i.peer) for i in intfs]
             for n, intfs in addresses.interfaces.items()}
    links = sorted({t.link for taps in every.values() for t in taps})
    out: list[Tap] = []
    for target in targets or list(every):
        node, sep, which = target.partition(":")
        if sep:
            if node not in every:
                raise ValueError(f"no node '{node}' (nodes: {', '.join(every)})")
            found = [t for t in every[node] if which in (t.dev, t.peer, t.link, f"{t.peer}-{t.node}")]
            if not found:
                raise ValueError(f"node '{node}' has no interface '{which}' (its interfaces: "
                                 + ", ".join(f"{t.dev} = {t.link}" for t in every[node]) + ")")
        elif target in every:
            found = every[target]
        else:
            a, _, b = target.partition("-")
            found = [t for t in every.get(a, []) if t.peer == b] + [t for t in every.get(b, []) if t.peer == a]
            if not found:
                raise ValueError(f"no node or link '{target}' (nodes: {', '.join(every)}; links: {', '.join(links)})")
        out += [t for t in found if t not in out]
    inside = sorted({t.node for t in out} & containers)
    if inside:
        raise ValueError(f"capturing in a container node ({', '.join(inside)}) is not supported; capture the "
                         "other end of its link")
    return out


# -- the runner's side --------------------------------------------------------------------------

_sessions: set[Session] = set()
# Serial lines once used by a capture are not taken again: UML re-attaches a reopened line to no
# host pty (mconsole then says `pts`), so each capture of a run takes a fresh one (32 per run).
_spent: set[int] = set()
_lock = threading.Lock()


def start(ctx, req: dict[str, Any]) -> dict[str, Any]:
    """Live control's `capture` action (run.control): resolve, open the channel, start the
    session; answers at once."""
    if req.get("list"):
        return {"ok": True, **sessions_now()}
    net = ctx.links.net
    try:
        taps = resolve(net.topo, net.addresses, list(req.get("targets") or []),
                       frozenset(n for n in net.hosts if net.is_container(n)))
    except ValueError as e:
        return {"ok": False, "error": str(e)}
    snaplen = int(req.get("snaplen") or 0)
    bpf = [w for w in str(req.get("filter") or "").split() if w]
    channel = _open_channel(req.get("socket"))
    session = Session(net, taps, channel, snaplen=snaplen, bpf=bpf)
    with _lock:
        _sessions.add(session)
    session.start()
    return {"ok": True, "interfaces": [t.doc() for t in taps], "channel": channel.doc()}


def sessions_now() -> dict[str, Any]:
    """The captures running in this run, and every capture tcpdump alive in this kernel (none
    left behind: what the tests check)."""
    import psutil

    with _lock:
        sessions = [{"interfaces": [t.name for t in s.taps], "tcpdumps": [p.pid for p in s.procs if p.poll() is None]}
                    for s in _sessions]
    alive = []
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if p.info["name"] == "tcpdump" and "--time-stamp-precision=nano" in cmd \
                and "-w" in cmd and cmd[cmd.index("-w") + 1:cmd.index("-w") + 2] == ["-"]:
            alive.append(p.pid)
    return {"sessions": sessions, "capture_tcpdumps": alive}


def stop_all() -> None:
    """The run ends: every session stops (each stops its tcpdumps)."""
    with _lock:
        sessions = list(_sessions)
    for s in sessions:
        s.stop_event.set()
    for s in sessions:
        s.join(timeout=10)


class Channel:
    def __init__(self, fd: int, kind: str, **where: Any):
        self.fd, self.kind, self.where = fd, kind, where
        self._keep: Any = None

    def doc(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.where}

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def close(self) -> None:
        if self._keep is not None:       # the socket owns its descriptor
            self._keep.close()
            return
        try:
            os.close(self.fd)
        except OSError:
            pass


def _umid() -> str | None:
    """This UML guest's id (the host's mconsole socket is named by it); None outside a guest."""
    if os.environ.get("WEARLAB_UMID"):
        return os.environ["WEARLAB_UMID"]
    job = os.environ.get("WEARLAB_JOB")     # /run/wearlab/jobs/<umid>-<random> (runtime.uml)
    if job and os.environ.get("WEARLAB_IN_GUEST") == "1":
        return Path(job).name.rsplit("-", 1)[0]
    return None


def _open_channel(sock_path: str | None) -> Channel:
    if sock_path:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(2.0)
            s.connect(sock_path)
            s.settimeout(None)
            ch = Channel(s.fileno(), "socket")
            ch._keep = s
            return ch
        except OSError:
            s.close()
    umid = _umid()
    if umid is None:
        raise EnvironmentProblem(f"the capture's socket {sock_path} is out of this run's reach and the run is "
                                 "not in a UML guest")
    for n in LINES:
        if n in _spent:
            continue
        try:
            fd = os.open(f"/dev/ttyS{n}", os.O_RDWR | os.O_NOCTTY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        tty.setraw(fd)
        termios.tcflush(fd, termios.TCIOFLUSH)
        _spent.add(n)
        return Channel(fd, "uml-line", line=n, umid=umid)
    raise EnvironmentProblem(f"every serial line a capture may take (ttyS{LINES[-1]}-ttyS{LINES[0]}) is in use "
                             "or was used by an earlier capture of this run")


class Session(threading.Thread):
    def __init__(self, net, taps: list[Tap], channel: Channel, *, snaplen: int, bpf: list[str]):
        super().__init__(name=f"capture-{channel.fd}", daemon=True)
        self.net, self.taps, self.channel = net, taps, channel
        self.snaplen, self.bpf = snaplen, bpf
        self.stop_event = threading.Event()
        self.procs: list[subprocess.Popen] = []
        self.sent = self.acked = 0

    def _frame(self, kind: int, index: int, payload: bytes = b"") -> None:
        data = FRAME.pack(kind, index, len(payload)) + payload
        self.channel.write(data)
        self.sent += len(data)

    def run(self) -> None:
        reason = "stopped"
        try:
            reason = self._serve()
        except OSError as e:
            reason = f"channel closed ({e})"
        except Exception as e:  # noqa: BLE001 - a capture must never stop a run
            reason = f"failed: {type(e).__name__}: {e}"
            try:
                self._frame(ERROR, 255, reason.encode())
            except OSError:
                pass
        finally:
            self._stop_tcpdumps()
            self.channel.close()
            with _lock:
                _sessions.discard(self)

    def _serve(self) -> str:
        for t in self.taps:
            self.procs.append(self.net.popen(t.node, ["tcpdump", "-i", t.dev, "-n", "-s", str(self.snaplen), "-U",
                                                      "--immediate-mode", "--time-stamp-precision=nano", "-Z", "root",
                                                      "-w", "-", *self.bpf],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL))
        ch = self.channel.fd
        ready, _, _ = select.select([ch], [], [], GO_TIMEOUT_S)
        if not ready or os.read(ch, 1) != GO:
            return "the client never came"
        heard = time.monotonic()
        outs = {p.stdout.fileno(): i for i, p in enumerate(self.procs)}
        errs = {p.stderr.fileno(): i for i, p in enumerate(self.procs)}
        said = {i: b"" for i in errs.values()}
        listening: set[int] = set()
        while not self.stop_event.is_set():
            watch = [ch, *errs]
            if self.sent - self.acked + FRAME.size + MAX_PAYLOAD <= WINDOW:
                watch += list(outs)
            ready, _, _ = select.select(watch, [], [], KEEPALIVE_S)
            if ch in ready:
                got = os.read(ch, 4096)
                if not got:
                    return "the client closed the channel"
                heard = time.monotonic()
                self.acked += got.count(ACK) * WINDOW_ACK
                if QUIT in got:
                    return "the client quit"
            if time.monotonic() - heard > SILENCE_S:
                return f"the client was silent for {SILENCE_S:g} s"
            for fd in ready:
                if fd in errs:
                    i = errs[fd]
                    text = os.read(fd, 4096)
                    if not text:
                        del errs[fd]
                        continue
                    said[i] += text
                    if i not in listening and b"listening on" in said[i]:
                        listening.add(i)
                        self._frame(LISTENING, i)
                elif fd in outs:
                    i = outs[fd]
                    data = os.read(fd, MAX_PAYLOAD)
                    if not data:
                        del outs[fd]
                        self.procs[i].wait()
                        why = said[i].decode(errors="replace").strip().splitlines()
                        msg = f"tcpdump on {self.taps[i].name} ended: {why[-1] if why else self.procs[i].returncode}"
                        self._frame(ERROR, i, msg.encode())
                        return msg
                    self._frame(DATA, i, data)
        self._frame(END, 255, b"the run ended")
        return "the run ended"

    def _stop_tcpdumps(self) -> None:
        end_tcpdumps(self.procs, grace_s=3)
        for p in self.procs:
            for f in (p.stdout, p.stderr):
                f.close()
        try:
            self.net.procs[:] = [p for p in self.net.procs if p not in self.procs]
        except (AttributeError, TypeError):
            pass


# -- the client's side (the CLI) ----------------------------------------------------------------

@dataclass
class Outcome:
    packets: dict[str, int]
    reason: str


def capture(ask, targets: list[str], out: str, *, count: int | None = None,
            duration: float | None = None, snaplen: int = 0, bpf: str = "", say=print) -> int:
    """Stream the targets' packets as pcapng to `out` (a file, or `-`: standard output) until
    Ctrl-C, a closed pipe (SIGPIPE), `count` packets, `duration` seconds, or the run's end.
    `ask(request)`: the live run's answer (run.control.request for its results directory)."""
    from wearlab.runtime import signals

    if os.environ.get("WEARLAB_BUNDLE"):
        raise EnvironmentProblem(FROM_BUNDLE)
    if out == "-" and sys.stdout.isatty():
        raise InputError([Problem(WHERE, None, "-w", "standard output is a terminal: give -w FILE, or pipe it "
                                  "(wearlab capture ... -w - | wireshark -k -i -)")])
    SOCKET_DIR.mkdir(parents=True, exist_ok=True)
    path = SOCKET_DIR / f"{os.getpid()}-{time.monotonic_ns() % 10**9}.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    chan = conn = None
    sink = None
    try:
        listener.bind(os.fspath(path))
        listener.listen(1)
        answer = ask({"action": "capture", "targets": targets, "socket": os.fspath(path),
                                           "snaplen": snaplen, "filter": bpf})
        if not answer.get("ok"):
            raise InputError([Problem(WHERE, None, None, answer.get("error", "refused"))])
        where = answer["channel"]
        if where["kind"] == "socket":
            listener.settimeout(10)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                raise EnvironmentProblem(f"the run in {answer['run']} did not connect to the capture") from None
            chan = conn.fileno()
        else:
            from wearlab.runtime import mconsole
            pts = mconsole.serial_line_pty(where["umid"], where["line"])
            chan = os.open(pts, os.O_RDWR | os.O_NOCTTY)
            tty.setraw(chan)
        os.write(chan, GO)
        taps = [Tap(i["node"], i["dev"], i["link"], i["peer"]) for i in answer["interfaces"]]
        sink = open(sys.stdout.fileno() if out == "-" else out, "wb", buffering=0, closefd=out != "-")  # noqa: SIM115
        with signals.interruptible():
            outcome = _receive(chan, taps, sink, count=count, duration=duration, say=say)
    finally:
        if chan is not None:
            _quit(chan)
            if conn is not None:
                conn.close()
            else:
                os.close(chan)
        if sink is not None:
            try:
                sink.close()
            except OSError:
                pass
        listener.close()
        path.unlink(missing_ok=True)
    total = sum(outcome.packets.values())
    say(f"{total} packets captured ({', '.join(f'{n} on {k}' for k, n in outcome.packets.items())}): "
        f"{outcome.reason}")
    return 1 if outcome.reason.startswith("tcpdump") or outcome.reason.startswith("failed") else 0


def _quit(chan: int) -> None:
    """Ask the run's side to stop (it stops its tcpdumps and closes its end; the channel is not
    used again, so nothing waits for that)."""
    try:
        os.write(chan, QUIT)
    except OSError:
        pass


def _receive(chan: int, taps: list[Tap], sink, *, count: int | None, duration: float | None, say) -> Outcome:
    writer = PcapngWriter(sink, [Interface(t.name, t.description) for t in taps])
    streams = [PcapStream(t.name) for t in taps]
    packets = {t.name: 0 for t in taps}
    listening: set[int] = set()
    buf = b""
    unacked = 0
    t_end = None if duration is None else time.monotonic() + duration
    last_sent = time.monotonic()
    while True:
        left = KEEPALIVE_S if t_end is None else min(KEEPALIVE_S, t_end - time.monotonic())
        if left <= 0:
            return Outcome(packets, f"{duration:g} s")
        ready, _, _ = select.select([chan], [], [], left)
        if time.monotonic() - last_sent >= KEEPALIVE_S:
            os.write(chan, KEEPALIVE)
            last_sent = time.monotonic()
        if not ready:
            continue
        try:
            got = os.read(chan, 65536)
        except OSError:
            got = b""
        if not got:
            return Outcome(packets, "the run's end of the channel closed (the run ended)")
        unacked += len(got)
        if unacked >= WINDOW_ACK:
            os.write(chan, ACK * (unacked // WINDOW_ACK))
            unacked %= WINDOW_ACK
            last_sent = time.monotonic()
        buf += got
        blocks: list[bytes] = []
        stop = None
        while len(buf) >= FRAME.size:
            kind, i, length = FRAME.unpack_from(buf)
            if len(buf) < FRAME.size + length:
                break
            payload, buf = buf[FRAME.size:FRAME.size + length], buf[FRAME.size + length:]
            if kind == DATA:
                for pkt, ts in streams[i].feed_records(payload):
                    if count is not None and sum(packets.values()) >= count:
                        stop = f"{count} packets"
                        break
                    if not streams[i].nanosecond:
                        ts *= 1000
                    blocks.append(writer.packet(i, ts, pkt.frame, pkt.wire_len))
                    packets[taps[i].name] += 1
            elif kind == LISTENING:
                listening.add(i)
                if len(listening) == len(taps):
                    say(f"capturing on {', '.join(f'{t.name} ({t.node} {t.dev})' for t in taps)}; Ctrl-C stops")
            elif kind in (ERROR, END):
                stop = payload.decode(errors="replace")
        if blocks:
            try:
                writer.write(blocks)
            except BrokenPipeError:
                # The reader had enough (`| head -c N`, Wireshark closed): a clean stop, and
                # nothing more for standard output (the interpreter's own flush stays quiet).
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sink.fileno())
                os.close(devnull)
                return Outcome(packets, "the reader closed the pipe")
        if count is not None and sum(packets.values()) >= count:
            stop = stop or f"{count} packets"
        if stop:
            return Outcome(packets, stop)
