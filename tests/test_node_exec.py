"""run.node_exec's channel on the host, no guest: the agent's flow-control window holds (it stops
at WINDOW unacknowledged bytes and goes on when acknowledged), and a command that prints far more
than the window at once (irtt's report, 1 MB here) reaches the client whole through the hub."""

from __future__ import annotations

import os
import socket
import threading
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


def test_a_megabyte_at_once_crosses_a_windowed_line(tmp_path: Path, capfd):
    a, b = socket.socketpair()
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    agent = Agent(Stream(a.detach(), window=WINDOW), lambda n: os.getpid() if n == "here" else None, hosts, ["here"])
    hub = Hub(tmp_path / "exec.sock", Stream(b.detach()))
    agent.start(), hub.start()
    try:
        with open(os.devnull, "rb") as devnull:
            rc = run_client(tmp_path / "exec.sock", "here", ["head", "-c", "1000000", "/dev/zero"], tty_mode=False,
                            stdin=devnull)
        out = capfd.readouterr().out
        assert rc == 0
        assert len(out) == 1_000_000
    finally:
        agent.stop(), hub.close()
