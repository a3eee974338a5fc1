"""wearlab's relay process on loopback (no namespaces, no netem): its events say how many bytes it
took in and handed on, in order and to the last byte; it stops promptly on SIGTERM; a bad
command line is exit 2 with the reason."""

from __future__ import annotations

import csv
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest


@pytest.fixture
def echo_server():
    lst = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                c, _ = lst.accept()
            except OSError:
                return
            with c:
                data = b""
                while chunk := c.recv(65536):
                    data += chunk
                c.sendall(hashlib.sha256(data).digest() + data)
    threading.Thread(target=serve, daemon=True).start()
    yield lst.getsockname()[1]
    lst.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_relay(*args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-m", "wearlab.nodes.relay", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    return p


def test_events_account_for_every_byte(tmp_path, echo_server):
    port, events = free_port(), tmp_path / "ev.csv"
    relay = start_relay(f"{port}={'127.0.0.1'}:{echo_server}", "--bind", "127.0.0.1", "--events", str(events),
                        "--app-buffer", "16384")
    try:
        data = os.urandom(1_000_000)
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
        assert got == hashlib.sha256(data).digest() + data
    finally:
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(timeout=5) == 0
    with events.open() as f:
        rows = list(csv.DictReader(f))
    for direction, total in (("up", len(data)), ("down", len(data) + 32)):
        for op in ("in", "out"):
            offs = [int(r["offset"]) for r in rows if r["dir"] == direction and r["op"] == op]
            assert offs == sorted(offs) and offs[-1] == total, (direction, op)
        # never more than the application buffer (a 16 KiB pipe) inside the relay
        ins = [(int(r["t_ns"]), int(r["offset"])) for r in rows if r["dir"] == direction and r["op"] == "in"]
        outs = [(int(r["t_ns"]), int(r["offset"])) for r in rows if r["dir"] == direction and r["op"] == "out"]
        assert max(b - a for (_, a), (_, b) in zip([(0, 0), *outs], ins)) <= 16384


def test_sigterm_stops_it_promptly(echo_server):
    relay = start_relay(f"{free_port()}=127.0.0.1:{echo_server}", "--bind", "127.0.0.1")
    t = time.monotonic()
    relay.send_signal(signal.SIGTERM)
    assert relay.wait(timeout=5) == 0
    assert time.monotonic() - t < 2.5


@pytest.mark.parametrize("argv, message", [
    (["20000"], "is not LISTEN_PORT=HOST:PORT"),
    (["20000=host:99999"], "is not LISTEN_PORT=HOST:PORT"),
    (["20000=origin"], "nor LISTEN_PORT=original"),
    (["0=original"], "nor LISTEN_PORT=original"),
    (["20000=10.0.0.1:80", "--app-buffer", "-5"], "not a positive number"),
    (["20000=10.0.0.1:80", "--mitigation", "virtual-queue"], "needs --throttle-dev"),
])
def test_bad_command_lines(argv, message):
    res = subprocess.run([sys.executable, "-m", "wearlab.nodes.relay", *argv], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and message in res.stderr, res.stderr


def test_a_transparent_listener_resets_what_was_not_redirected_to_it():
    """`PORT=original` relays to each connection's destination before REDIRECT; a connection made
    straight to the listener has none but the listener itself, and is reset, not relayed to
    itself (a loop)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "wearlab.nodes.relay", f"{port}=original", "--bind", "127.0.0.1"],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            with pytest.raises(ConnectionResetError):
                c.sendall(b"GET / HTTP/1.1\r\n\r\n")
                if c.recv(1) == b"":
                    raise AssertionError("closed, not reset")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_what_it_holds_is_in_its_held_file_at_most_its_buffer_and_none_at_the_end(tmp_path):
    """`--held`: the bytes the relay has taken in and not yet handed on (the paper's CPROXY count
    less the sockets' queues). A sender writes 2 MB toward a receiver that reads nothing: once
    every socket buffer on the way is full the relay holds at most its application buffer (one
    16 KiB pipe per direction, F_SETPIPE_SZ's pages) and more than nothing (its pump took a
    pipe's worth it cannot hand on); nothing is held upward (the receiver sends nothing); when
    the receiver has read every byte, nothing is held."""
    from wearlab.nodes.relay import read_held

    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)   # small socket buffers on the way:
    lst.bind(("127.0.0.1", 0))                                    # 2 MB cannot hide in them
    lst.listen()
    port, held_file = free_port(), tmp_path / "held"
    relay = start_relay(f"{port}=127.0.0.1:{lst.getsockname()[1]}", "--bind", "127.0.0.1", "--held", str(held_file),
                        "--app-buffer", "16384", "--sndbuf", "65536", "--rcvbuf", "65536")
    data = os.urandom(2_000_000)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        receiver, _ = lst.accept()
        sent = threading.Thread(target=s.sendall, args=(data,), daemon=True)
        sent.start()
        samples = []
        deadline = time.monotonic() + 10
        while len([h for h in samples if h["up"]]) < 50 and time.monotonic() < deadline:
            samples.append(read_held(held_file))   # the pump's pipe fills once the socket buffers have
            time.sleep(0.002)
        assert any(h["up"] for h in samples), samples[-3:]
        # "up": client -> upstream, as the relay names it; never more than the pipe
        assert all(0 <= h["up"] <= 16384 and h["down"] == 0 for h in samples), max(h["up"] for h in samples)
        got = bytearray()
        while len(got) < len(data):
            got += receiver.recv(1 << 20)
        sent.join(timeout=10)
        assert bytes(got) == data
        deadline = time.monotonic() + 5
        while read_held(held_file) != {"down": 0, "up": 0} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert read_held(held_file) == {"down": 0, "up": 0}
    finally:
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(timeout=5) == 0
        lst.close()


def test_the_relay_kind_takes_timestamps_only_for_a_workload_that_reads_them(tmp_path):
    """Each clock read is a system call in the UML guest (~11 us, no vDSO), two per splice: the
    relay kind takes its read/write timestamps only where a workload reads them - the streams'
    d2/d3 split - and never for an HTTP fetch through the phone."""
    from conftest import ROOT
    from wearlab.catalog import CATALOG
    from wearlab.model.experiment_file import load_experiment
    from wearlab.model.needs import Relay
    from wearlab.nodes.node_kind import NodeContext
    from wearlab.plan.plan import plan

    def relays(name: str) -> list[Relay]:
        p = plan(load_experiment(ROOT / "experiments" / f"{name}.yaml", CATALOG))
        return [n for n in p.needs if isinstance(n, Relay)]

    streamed, fetched = relays("bufferbloat"), relays("device-relay")
    assert streamed and all(n.timestamps for n in streamed)
    assert fetched and not any(n.timestamps for n in fetched)
    kind = CATALOG.node_kinds["relay"]
    defaults = {p.name: p.default for p in kind.options}
    for needs, events in ((streamed, True), (fetched, False)):
        proxy = kind(NodeContext(None, needs[0].node, dict(defaults), tmp_path), needs)
        argv = proxy.processes()[0]
        assert ("--events" in argv) is events and "--held" in argv
        assert (proxy.events_file is not None) is events
