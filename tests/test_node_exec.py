"""run.node_exec's channel on the host, no guest: the agent's flow-control window holds (it stops
at WINDOW unacknowledged bytes and goes on when acknowledged), and a command that prints far more
than the window at once (irtt's report, 1 MB here) reaches the client whole through the hub, and
the hub pokes a silent line only while a client is connected (a UML line that stalled mid-output
goes on at the next byte from the host: node_exec's module doc)."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from pathlib import Path

from wearlab.run import node_exec
from wearlab.run.node_exec import HEADER, WINDOW, Agent, Hub, Stream, run_client


def test_the_agent_stops_at_its_window_until_acknowledged():
    a, b = socket.socketpair()
    writer, reader = Stream(a.fileno(), window=WINDOW), Stream(b.fileno())
    body = b"x" * 10_000
    frame = HEADER.size + len(body)
    fits = WINDOW // frame                       # 3 frames of 10,009 B in 32,768
    sent = threading.Semaphore(0)

    def send() -> None:
        for _ in range(fits + 1):
            writer.write(1, node_exec.OUT, body)
            sent.release()

    t = threading.Thread(target=send, daemon=True)
    t.start()
    for _ in range(fits):
        assert sent.acquire(timeout=5)
    for _ in range(fits):
        assert reader.read() == (1, node_exec.OUT, body)
    # read but not acknowledged: the next frame would pass the window, so it waits
    assert not sent.acquire(timeout=0.3)
    writer.acked(frame)
    assert sent.acquire(timeout=5)
    t.join(timeout=5)
    a.close(), b.close()


def _channel(tmp_path: Path) -> tuple[Agent, Hub]:
    """An agent and a hub joined by a socket pair, started; the one node is "here" (this
    process's namespaces), the hub's socket tmp_path/exec.sock."""
    a, b = socket.socketpair()
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    agent = Agent(Stream(a.detach(), window=WINDOW), lambda n: os.getpid() if n == "here" else None, hosts, ["here"])
    hub = Hub(tmp_path / "exec.sock", Stream(b.detach()))
    agent.start(), hub.start()
    return agent, hub


def test_a_megabyte_at_once_crosses_a_windowed_line(tmp_path: Path, capfd):
    agent, hub = _channel(tmp_path)
    try:
        with open(os.devnull, "rb") as devnull:
            rc = run_client(tmp_path / "exec.sock", "here", ["head", "-c", "1000000", "/dev/zero"], tty_mode=False,
                            stdin=devnull)
        out = capfd.readouterr().out
        assert rc == 0
        assert len(out) == 1_000_000
    finally:
        agent.stop(), hub.close()


def test_the_hub_pokes_a_silent_line_only_while_a_client_is_connected(tmp_path: Path):
    line, hub_end = socket.socketpair()
    poke_s = 0.05
    hub = Hub(tmp_path / "exec.sock", Stream(hub_end.detach()), poke_s=poke_s)
    hub.start()
    agent = Stream(line.fileno())
    try:
        # nobody connected: ten poke periods of silence, nothing on the line
        line.settimeout(10 * poke_s)
        try:
            got = line.recv(1)
        except TimeoutError:
            got = b""
        assert got == b""
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(tmp_path / "exec.sock"))
        line.settimeout(None)
        t0 = time.monotonic()
        assert select.select([line], [], [], 10)[0], "no poke in 10 s"
        assert agent.read() == (0, node_exec.ACK, node_exec.ACK_BODY.pack(0))   # acknowledges nothing
        # within one period of the hub's waits after the line's last frame (none: at start-up)
        assert time.monotonic() - t0 <= 2 * poke_s + 0.5
        client.close()
    finally:
        hub.close()
        line.close()


def test_a_socket_pairs_hub_never_pokes(tmp_path: Path):
    line, hub_end = socket.socketpair()
    hub = Hub(tmp_path / "exec.sock", Stream(hub_end.detach()))
    hub.start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(tmp_path / "exec.sock"))
    line.settimeout(4 * node_exec.POKE_S)
    try:
        try:
            got = line.recv(1)
        except TimeoutError:
            got = b""
        assert got == b""
    finally:
        client.close(), hub.close(), line.close()


def test_a_reader_that_leaves_ends_the_command(tmp_path: Path):
    """`wearlab exec NODE -- CMD | head`: once nobody reads the client's output, the client ends as
    a local command would (SIGPIPE: status 141) and its command ends in the node (the hub's CLOSE),
    instead of both running on unread (`yes` never stops by itself)."""
    import subprocess
    import sys

    agent, hub = _channel(tmp_path)
    code = ("import os, sys; from pathlib import Path; from wearlab.run.node_exec import run_client; "
            f"sys.exit(run_client(Path({str(tmp_path / 'exec.sock')!r}), 'here', ['yes'], tty_mode=False, "
            "stdin=open(os.devnull, 'rb')))")
    client = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert client.stdout.read(100) == b"y\n" * 50
        client.stdout.close()                                    # the reader leaves
        assert client.wait(timeout=10) == 128 + 13               # SIGPIPE, as a shell reports it
        deadline = time.monotonic() + 10
        while agent.sessions:                                    # the session ends when `yes` has
            assert time.monotonic() < deadline, "the command went on in the node"
            time.sleep(0.05)
    finally:
        client.kill(), client.wait()
        agent.stop(), hub.close()
