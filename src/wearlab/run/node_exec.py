"""A command in a node of a deployed topology: `wearlab exec NODE -- CMD` and `wearlab shell NODE`.

One channel, three parts, each a thread blocked on a read (nothing polls):

- the **agent** runs where the network lives (the host, or inside the UML guest beside the
  network it built). It reads frames from a byte stream - a socket pair in the host runtime, the
  guest's serial line /dev/ttyS1 under uml - and runs each session's command in its node:
  `nsenter` into the node's network namespace, `unshare` a mount and UTS namespace of its own
  where the deployment's hosts file is bound over /etc/hosts (every node resolves every node's
  name, as `ip netns exec` does with /etc/netns/NS/hosts) and the host name is the node's. A
  command gets pipes (stdin, stdout, stderr apart); a shell gets a pseudo-terminal of its own,
  as its controlling terminal (job control, window size, Ctrl-C to its foreground job).
- the **hub** runs in the `wearlab deploy` process on the host: it listens on the deployment's
  Unix socket (`exec.sock` in its state directory), gives each client connection a session
  number and relays its frames to the agent's stream and back. Under uml the stream is a host
  pseudo-terminal whose other end is the guest's serial line 1 (`ssl1=tty:/dev/pts/N` on the
  guest kernel's command line): a channel wearlab owns, opened before the guest boots.
- the **client** is `wearlab exec` / `wearlab shell`: it connects, sends what to run, passes
  stdin, stdout and stderr through and exits with the command's status (128 + N for a signal).

A frame: session (u32), type (u8), length (u32), payload. A client speaks session 0; the hub
rewrites it.

The agent never has more than WINDOW bytes on its stream that the hub has not acknowledged (an
`ACK` frame, session 0, the count as u32, every WINDOW_ACK bytes the hub has read), as
run.live_capture's runner does: a UML serial line stalls for good once its host pty is full (the
write-ready interrupt is missed), and a command that prints a lot at once (irtt's JSON report)
filled it. The window (32 KiB) stays under the pty's buffer (64 KiB of flip buffers), so the
line never fills. Frames the agent's reader thread writes (a refusal) skip the window: that
thread is the one that reads the ACKs.

The window was not enough: even so, the guest's line stopped now and then in the middle of a
large output (irtt's 49 KB JSON: 4 of 20 `wearlab exec`s never returned, each stuck at a multiple
of CHUNK), the host pty empty both ways, until any byte came from the host (another `exec`'s
OPEN; measured, not read in UML's source: a byte in from the host makes its line driver retry the
output it was holding, likely its one host-fd event being handled for both directions). So
under uml the hub pokes the line (an ACK of 0 bytes, which the agent ignores) when it has heard
nothing from the agent for POKE_S while a client is connected: a stall then costs a few POKE_S
at most (bench/bench_exec.py: 20 outputs of 6.9 MB, one took 1.4 s instead of 0.3), an idle
session one 13-byte frame per POKE_S.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

HEADER = struct.Struct("!IBI")
OPEN, IN, IN_EOF, OUT, ERR, EXIT, WINCH, CLOSE, ACK = range(1, 10)
CHUNK = 16384
ACK_BODY = struct.Struct("!I")
WINDOW = 32768          # bytes the agent may have unacknowledged on its stream
WINDOW_ACK = 8192       # the hub acknowledges this many at a time
POKE_S = 0.2            # under uml: the line's silence, with a client connected, after which the hub pokes it


# -- frames ------------------------------------------------------------------------------------

class Stream:
    """Frames over a byte stream (a socket, a serial line, a pty): whole frames in, whole frames
    out, writes from several threads never interleaved."""

    def __init__(self, rfd: int, wfd: int | None = None, *, window: int | None = None):
        self.rfd, self.wfd = rfd, rfd if wfd is None else wfd
        self._lock = threading.Lock()
        # window: the most bytes written and not yet acknowledged (`acked`); None: no window.
        self.window = window
        self._unacked = 0
        self._room = threading.Condition()

    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            try:
                chunk = os.read(self.rfd, n - len(buf))
            except OSError:   # EIO: the other end of a pty closed
                return None
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def read(self) -> tuple[int, int, bytes] | None:
        head = self._read_exact(HEADER.size)
        if head is None:
            return None
        sid, kind, n = HEADER.unpack(head)
        body = self._read_exact(n) if n else b""
        return None if body is None else (sid, kind, body)

    def acked(self, n: int) -> None:
        with self._room:
            self._unacked = max(0, self._unacked - n)
            self._room.notify_all()

    def write(self, sid: int, kind: int, body: bytes = b"", *, windowed: bool = True) -> bool:
        data = HEADER.pack(sid, kind, len(body)) + body
        if self.window is not None:
            with self._room:
                if windowed:
                    self._room.wait_for(lambda: self._unacked + len(data) <= self.window or self._unacked == 0)
                self._unacked += len(data)
        with self._lock:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(self.wfd, view)
                    view = view[n:]
                return True
            except OSError:
                return False


def _json(body: bytes) -> dict[str, Any]:
    return json.loads(body.decode())


def _status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


# -- the agent: where the network lives ----------------------------------------------------------

class Agent:
    """Runs sessions in nodes (module doc). `node_pid(node)` -> the PID of a process in the node's
    network namespace (None: no such node); `hosts_file`: bound over /etc/hosts in every session."""

    def __init__(self, stream: Stream, node_pid: Callable[[str], int | None], hosts_file: Path,
                 nodes: list[str]):
        self.stream, self.node_pid, self.hosts_file, self.nodes = stream, node_pid, hosts_file, nodes
        self.sessions: dict[int, _Session] = {}
        self._thread = threading.Thread(target=self._serve, name="node-exec-agent", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        while True:
            frame = self.stream.read()
            if frame is None:
                return
            sid, kind, body = frame
            if kind == ACK:
                self.stream.acked(ACK_BODY.unpack(body)[0])
                continue
            try:
                if kind == OPEN:
                    self._open(sid, _json(body))
                elif sid in self.sessions:
                    self.sessions[sid].handle(kind, body)
            except Exception as e:  # noqa: BLE001 - a bad session must not stop the agent
                self.stream.write(sid, EXIT, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode(),
                                  windowed=False)

    def _open(self, sid: int, req: dict[str, Any]) -> None:
        node = req.get("node", "")
        pid = self.node_pid(node)
        if pid is None:
            self.stream.write(sid, EXIT, json.dumps({"error": f"no node '{node}' (nodes: {', '.join(self.nodes)})",
                                                      "status": 2}).encode(), windowed=False)
            return
        argv = list(req.get("argv") or [])
        session = _Session(self, sid, node, pid, argv, req)
        self.sessions[sid] = session
        session.start()

    def stop(self) -> None:
        for s in list(self.sessions.values()):
            s.kill()


def node_argv(pid: int, node: str, hosts_file: Path, argv: list[str]) -> list[str]:
    """argv run in a node: its network namespace, a mount namespace where the deployment's hosts
    file is /etc/hosts, a UTS namespace named after the node."""
    script = 'mount --bind "$0" /etc/hosts 2>/dev/null; hostname "$WEARLAB_NODE"; exec "$@"'
    return ["nsenter", "-t", str(pid), "-n", "--", "unshare", "--mount", "--uts", "--propagation", "private",
            "--", "sh", "-c", script, str(hosts_file), *argv]


class _Session:
    def __init__(self, agent: Agent, sid: int, node: str, pid: int, argv: list[str], req: dict[str, Any]):
        self.agent, self.sid, self.node = agent, sid, node
        self.tty = bool(req.get("tty"))
        if not argv:
            bash = shutil.which("bash")
            argv = [bash, "--norc", "-i"] if bash else ["sh", "-i"]
        env = {k: v for k, v in os.environ.items()}
        env.update({k: str(v) for k, v in (req.get("env") or {}).items()})
        env["WEARLAB_NODE"] = node
        if self.tty:
            env.setdefault("PS1", r"\u@\h:\w\$ ")
        cwd = req.get("cwd") if req.get("cwd") and os.path.isdir(req["cwd"]) else "/"
        self.argv = node_argv(pid, node, agent.hosts_file, argv)
        self.env, self.cwd, self.size = env, cwd, req.get("size")
        self.inbox: queue.Queue[bytes | None] = queue.Queue()
        self.proc: subprocess.Popen | None = None
        self.master: int | None = None

    def start(self) -> None:
        if self.tty:
            master, slave = os.openpty()
            self.master = master
            if self.size:
                _set_size(master, *self.size)

            def controlling_tty() -> None:
                os.setsid()
                import fcntl
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)

            self.proc = subprocess.Popen(self.argv, stdin=slave, stdout=slave, stderr=slave, env=self.env,
                                         cwd=self.cwd, preexec_fn=controlling_tty, close_fds=True)
            os.close(slave)
            readers = [threading.Thread(target=self._pump, args=(master, OUT), daemon=True)]
            writer_fd = master
        else:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=self.env, cwd=self.cwd,
                                         start_new_session=True)
            readers = [threading.Thread(target=self._pump, args=(self.proc.stdout.fileno(), OUT), daemon=True),
                       threading.Thread(target=self._pump, args=(self.proc.stderr.fileno(), ERR), daemon=True)]
            writer_fd = self.proc.stdin.fileno()
        for r in readers:
            r.start()
        threading.Thread(target=self._feed, args=(writer_fd,), daemon=True).start()
        threading.Thread(target=self._wait, args=(readers,), daemon=True).start()

    def _pump(self, fd: int, kind: int) -> None:
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                return
            if not data:
                return
            self.agent.stream.write(self.sid, kind, data)

    def _feed(self, fd: int) -> None:
        while True:
            data = self.inbox.get()
            if data is None:
                if not self.tty and self.proc is not None and self.proc.stdin:
                    try:
                        self.proc.stdin.close()
                    except OSError:
                        pass
                return
            try:
                os.write(fd, data)
            except OSError:
                return

    def _wait(self, readers: list[threading.Thread]) -> None:
        rc = self.proc.wait()
        for r in readers:
            r.join(timeout=None if not self.tty else 2)
        if self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass
        self.inbox.put(None)
        self.agent.sessions.pop(self.sid, None)
        self.agent.stream.write(self.sid, EXIT, json.dumps({"status": _status(rc)}).encode())

    def handle(self, kind: int, body: bytes) -> None:
        if kind == IN:
            self.inbox.put(body)
        elif kind == IN_EOF:
            if self.tty:
                self.inbox.put(b"\x04")
            else:
                self.inbox.put(None)
        elif kind == WINCH and self.master is not None:
            size = _json(body)
            _set_size(self.master, size["rows"], size["cols"])
        elif kind == CLOSE:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _set_size(fd: int, rows: int, cols: int) -> None:
    import fcntl
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", int(rows), int(cols), 0, 0))


def serial_stream(device: str) -> Stream:
    """The guest's end of the hub's line: its serial line in raw mode (8 bits, no echo, no flow
    control, no line editing)."""
    fd = os.open(device, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    return Stream(fd, window=WINDOW)


# -- the hub: in `wearlab deploy`, on the host ---------------------------------------------------

class Hub:
    """Relays client connections on `socket_path` to the agent's stream (module doc). `poke_s`:
    poke the line after this long without a frame from the agent while a client is connected (a
    UML guest's serial line; None: a socket pair, which never stalls)."""

    def __init__(self, socket_path: Path, stream: Stream, *, poke_s: float | None = None):
        self.path, self.stream, self.poke_s = socket_path, stream, poke_s
        self._heard = time.monotonic()
        self._closed = threading.Event()
        self.clients: dict[int, socket.socket] = {}
        self._next = 1
        self._lock = threading.Lock()
        socket_path.unlink(missing_ok=True)
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(socket_path))
        os.chmod(socket_path, 0o600)
        self.server.listen(16)

    def start(self) -> None:
        threading.Thread(target=self._accept, name="node-exec-hub", daemon=True).start()
        threading.Thread(target=self._from_agent, name="node-exec-hub-line", daemon=True).start()
        if self.poke_s is not None:
            threading.Thread(target=self._poke, name="node-exec-hub-poke", daemon=True).start()

    def _poke(self) -> None:
        while not self._closed.wait(self.poke_s):
            with self._lock:
                waiting = bool(self.clients)
            if waiting and time.monotonic() - self._heard >= self.poke_s:
                self.stream.write(0, ACK, ACK_BODY.pack(0))

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with self._lock:
                sid = self._next
                self._next += 1
                self.clients[sid] = conn
            threading.Thread(target=self._from_client, args=(sid, conn), daemon=True).start()

    def _from_client(self, sid: int, conn: socket.socket) -> None:
        s = Stream(conn.fileno())
        while True:
            frame = s.read()
            if frame is None:
                break
            _, kind, body = frame
            if not self.stream.write(sid, kind, body):
                break
        with self._lock:
            gone = self.clients.pop(sid, None)
        if gone is not None:   # the client left before its command ended: end it
            self.stream.write(sid, CLOSE)
            conn.close()

    def _from_agent(self) -> None:
        unacked = 0
        while True:
            frame = self.stream.read()
            if frame is None:
                return
            self._heard = time.monotonic()
            sid, kind, body = frame
            unacked += HEADER.size + len(body)
            if unacked >= WINDOW_ACK:   # consumed from the line: the agent may send this much more
                self.stream.write(0, ACK, ACK_BODY.pack(unacked))
                unacked = 0
            with self._lock:
                conn = self.clients.get(sid)
                if kind == EXIT:
                    self.clients.pop(sid, None)
            if conn is None:
                continue
            try:
                conn.sendall(HEADER.pack(0, kind, len(body)) + body)
            except OSError:
                pass
            if kind == EXIT:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()

    def close(self) -> None:
        self._closed.set()
        try:
            self.server.close()
        finally:
            self.path.unlink(missing_ok=True)


# -- the client: `wearlab exec`, `wearlab shell` -------------------------------------------------

def run_client(socket_path: Path, node: str, argv: list[str], *, tty_mode: bool,
               env: dict[str, str] | None = None, stdin: BinaryIO | None = None) -> int:
    """Run argv (a shell when empty) in `node` through the deployment's socket; returns its exit
    status. Raises LookupError(message) when the agent refuses (no such node)."""
    stdin = stdin or sys.stdin.buffer
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(str(socket_path))
    s = Stream(conn.fileno())
    in_fd = stdin.fileno()
    is_tty = tty_mode and os.isatty(in_fd)
    size = None
    if is_tty:
        sz = os.get_terminal_size(in_fd)
        size = [sz.lines, sz.columns]
    req = {"node": node, "argv": argv, "tty": tty_mode, "env": env or {}, "cwd": os.getcwd(), "size": size}
    s.write(0, OPEN, json.dumps(req).encode())
    saved = termios.tcgetattr(in_fd) if is_tty else None
    old_winch = None
    if is_tty:
        tty.setraw(in_fd)

        def winch(_signum, _frame) -> None:
            sz = os.get_terminal_size(in_fd)
            s.write(0, WINCH, json.dumps({"rows": sz.lines, "cols": sz.columns}).encode())

        old_winch = signal.signal(signal.SIGWINCH, winch)

    def pump_stdin() -> None:
        while True:
            try:
                data = os.read(in_fd, CHUNK)
            except OSError:
                data = b""
            if not data:
                s.write(0, IN_EOF)
                return
            if not s.write(0, IN, data):
                return

    threading.Thread(target=pump_stdin, daemon=True).start()
    status = 1
    try:
        while True:
            frame = s.read()
            if frame is None:
                raise ConnectionError("the deployment closed the connection (destroyed?)")
            _, kind, body = frame
            if kind in (OUT, ERR):
                try:
                    _write_all(1 if kind == OUT else 2, body)
                except BrokenPipeError:
                    # Nobody reads any more (`wearlab exec watch -- ping server | head -3`): end as
                    # a local command would, by SIGPIPE; leaving ends the command (the hub's CLOSE).
                    status = 128 + signal.SIGPIPE
                    break
            elif kind == EXIT:
                doc = _json(body)
                if "error" in doc:
                    raise LookupError(doc["error"])
                status = int(doc["status"])
                break
    finally:
        if saved is not None:
            termios.tcsetattr(in_fd, termios.TCSADRAIN, saved)
        if old_winch is not None:
            signal.signal(signal.SIGWINCH, old_winch)
        conn.close()
    return status


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
