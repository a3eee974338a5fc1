"""Every phone-proxy kind relays transparently and faithfully: bytes in = bytes out both ways,
half-close, 100 concurrent connections, a peer's reset, a slow reader; and a proxy that exits or
never listens is a clear error with nothing left running."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

from netutil import live_network
from wearlab.catalog import CATALOG
from wearlab.model.needs import Relay
from wearlab.nodes.node_kind import NodeContext
from wearlab.nodes.software import KindError

pytestmark = pytest.mark.netem

TOOLS = Path(__file__).resolve().parent / "tools"
TOPOLOGY = """
nodes:
  watch: {role: wearable}
  phone: {role: phone}
  server: {role: server}
links:
  - {between: [watch, phone], delay: 2ms}
  - {between: [phone, server], delay: 1ms}
"""
PORT = 7000
KINDS = {
    "relay": {},
    "haproxy": {},
    "command": {"command": f"{sys.executable} {TOOLS / 'pyproxy.py'} {{listen}} {{upstream}}"},
}

SERVER = r"""
import hashlib, socket, struct, sys, threading
mode = sys.argv[1]
lst = socket.socket(); lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("0.0.0.0", 7000)); lst.listen(256)
print("listening", flush=True)
def handle(c):
    with c:
        if mode == "echo":            # read to EOF (the client's half-close), then answer
            data = b""
            while chunk := c.recv(65536):
                data += chunk
            c.sendall(hashlib.sha256(data).digest() + data[::-1])
        elif mode == "reset":          # answer, then reset the connection
            c.recv(10)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        elif mode == "stream":         # send N bytes
            n = int(c.recv(64).decode())
            block = bytes(range(256)) * 256
            sent = 0
            while sent < n:
                c.sendall(block[: min(len(block), n - sent)]); sent += min(len(block), n - sent)
while True:
    conn, _ = lst.accept()
    threading.Thread(target=handle, args=(conn,), daemon=True).start()
"""

CLIENT = r"""
import hashlib, os, socket, sys, threading, time
mode, server = sys.argv[1], sys.argv[2]
def echo(size):
    data = os.urandom(size)
    s = socket.create_connection((server, 7000), timeout=30)
    s.sendall(data); s.shutdown(socket.SHUT_WR)          # half-close: the answer must still come
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got[:32] == hashlib.sha256(data).digest() and got[32:] == data[::-1]
if mode == "echo":
    print("ok" if echo(int(sys.argv[3])) else "mismatch")
elif mode == "many":
    results = []
    ts = [threading.Thread(target=lambda: results.append(echo(10_000))) for _ in range(100)]
    [t.start() for t in ts]; [t.join() for t in ts]
    print("ok" if len(results) == 100 and all(results) else f"{sum(results)} of {len(results)}")
elif mode == "reset":
    s = socket.create_connection((server, 7000), timeout=30); s.sendall(b"x")
    try:
        while s.recv(100):
            pass
        print("eof")
    except ConnectionResetError:
        print("reset")
elif mode == "slow":
    n = int(sys.argv[3])
    s = socket.create_connection((server, 7000), timeout=60); s.sendall(str(n).encode())
    got, block = 0, bytes(range(256)) * 256
    ok = True
    while chunk := s.recv(4096):
        ok &= chunk == (block * 2)[got % len(block): got % len(block) + len(chunk)]
        got += len(chunk); time.sleep(0.002)              # a reader slower than the link
    print("ok" if ok and got == n else f"got {got} bytes, intact={ok}")
"""


@contextlib.contextmanager
def proxied(tmp_path, kind: str, server_mode: str, options: dict | None = None):
    """watch -- phone (running `kind`) -- server; the watch reaches the server through the phone."""
    with live_network(tmp_path, TOPOLOGY) as net:
        server_ip = net.addresses.address_of("server")
        hop = net.addresses.interface_to("watch", "phone")
        net.sh("watch", f"ip route replace {server_ip}/32 via {hop.peer_ip}")
        srv = net.popen("server", [sys.executable, "-c", SERVER, server_mode], stdout=__import__("subprocess").PIPE, text=True)
        assert srv.stdout.readline().strip() == "listening"
        cls = CATALOG.node_kinds[kind]
        defaults = {p.name: p.default for p in cls.options}
        proxy = cls(NodeContext(net, "phone", {**defaults, **KINDS[kind], **(options or {})}, tmp_path / "phone"),
                    [Relay("phone", "server", server_ip, PORT)])
        proxy.prepare()
        proxy.start()
        try:
            proxy.ready()
            yield net, server_ip, proxy
        finally:
            proxy.stop()


def client(net, server_ip, *args, timeout=120) -> str:
    return net.run("watch", [sys.executable, "-c", CLIENT, args[0], server_ip, *map(str, args[1:])],
                   timeout=timeout).stdout.strip()


def intercepted(net) -> int:
    """Packets the phone's REDIRECT rule caught (the proxy really was in the path)."""
    out = net.sh("phone", "iptables -t nat -L PREROUTING -v -n -x")
    return sum(int(l.split()[0]) for l in out.splitlines() if "redir ports" in l)


@pytest.mark.parametrize("kind", list(KINDS))
def test_bytes_in_equal_bytes_out_with_half_close(tmp_path, kind):
    with proxied(tmp_path, kind, "echo") as (net, ip, _):
        assert client(net, ip, "echo", 2_000_000) == "ok"
        assert intercepted(net) >= 1


@pytest.mark.parametrize("kind", list(KINDS))
def test_hundred_concurrent_connections(tmp_path, kind):
    with proxied(tmp_path, kind, "echo") as (net, ip, _):
        assert client(net, ip, "many") == "ok"
        assert intercepted(net) >= 100


@pytest.mark.parametrize("kind", list(KINDS))
def test_peer_reset_reaches_the_client(tmp_path, kind):
    with proxied(tmp_path, kind, "reset") as (net, ip, _):
        # HAProxy ends the client's side with a FIN when the server aborts; the others pass the
        # reset on as a reset. Either way the client learns at once that the peer is gone.
        assert client(net, ip, "reset", timeout=20) in (("reset", "eof") if kind == "haproxy" else ("reset",))


@pytest.mark.parametrize("kind", list(KINDS))
def test_slow_reader_gets_every_byte(tmp_path, kind):
    with proxied(tmp_path, kind, "stream") as (net, ip, _):
        assert client(net, ip, "slow", 1_000_000) == "ok"


def test_a_command_that_exits_is_a_clear_error(tmp_path):
    with pytest.raises(KindError, match="exited with status"):
        with proxied(tmp_path, "command", "echo", {"command": "sh -c 'echo cannot bind >&2; exit 3' {listen} {upstream}"}):
            pass


def test_a_command_that_never_listens_is_a_clear_error(tmp_path, monkeypatch):
    import wearlab.nodes.proxies as proxies

    real = proxies.wait_listening
    monkeypatch.setattr(proxies, "wait_listening", lambda *a, **k: real(*a[:4], 2.0, *a[5:]))
    with pytest.raises(KindError, match="is not listening"):
        with proxied(tmp_path, "command", "echo", {"command": "sh -c 'sleep 30' {listen} {upstream}"}):
            pass
