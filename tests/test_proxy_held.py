"""What a phone proxy holds in its own buffers toward the watch (ProxyKind.held_down): the part of
the paper's CPROXY backlog (in minus out) that the kernel's socket queues do not show, which the
adaptive interface policy adds to them. HAProxy's comes from its runtime API (`show sess all`);
its buffer is `bufsize` per direction, so a client that reads nothing leaves exactly that much in
it, and nothing once the client has read all. On loopback, no namespaces."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time

from wearlab.catalog import CATALOG
from wearlab.model.needs import Relay
from wearlab.nodes.node_kind import NodeContext
from wearlab.nodes.proxies import haproxy_response_bytes

# `show sess all` from HAProxy 2.6 (trimmed): one relayed session whose client reads nothing (its
# response buffer full: o=16384 of size 16384, i=0) and the runtime API's own session, whose
# response buffer holds this very answer (o=1291) - not the proxy's backlog.
SHOW_SESS = """\
0x55fd40f33860: [27/Nov/2026:14:08:18.616065] id=0 proto=tcpv4 source=127.0.0.1:41242
  frontend=r (id=2 mode=tcp), listener=? (id=1) addr=127.0.0.1:21000
  req=0x55fd40f33880 (f=0x808000 an=0x0 pipe=0 tofwd=-1 total=0)
      an_exp=<NEVER> rex=59m58s wex=<NEVER>
      buf=0x55fd40f33888 data=(nil) o=0 p=0 i=0 size=0
  res=0x55fd40f338e0 (f=0x80078202 an=0x0 pipe=0 tofwd=-1 total=2824192)
      an_exp=<NEVER> rex=<NEVER> wex=59m58s
      buf=0x55fd40f338e8 data=0x55fd40fe8c30 o=16384 p=2613 i=0 size=16384
0x55fd4101e670: [27/Nov/2026:14:08:20.511337] id=1 proto=unix_stream source=unix:1
  frontend=GLOBAL (id=0 mode=tcp), listener=? (id=1) addr=unix:1
  req=0x55fd4101e690 (f=0xc08000 an=0x0 pipe=0 tofwd=-1 total=14)
      an_exp=<NEVER> rex=<NEVER> wex=<NEVER>
      buf=0x55fd4101e698 data=0x55fd40fecc40 o=0 p=0 i=0 size=16384
  res=0x55fd4101e6f0 (f=0x80008002 an=0x0 pipe=0 tofwd=-1 total=1291)
      an_exp=<NEVER> rex=<NEVER> wex=<NEVER>
      buf=0x55fd4101e6f8 data=0x55fd4101ec80 o=1291 p=1291 i=0 size=16384
"""


def test_haproxys_answer_counts_its_sessions_response_buffers_and_not_its_own_api():
    assert haproxy_response_bytes(SHOW_SESS) == 16384
    # input not yet forwarded counts too, and a splicing channel's pipe
    assert haproxy_response_bytes(SHOW_SESS.replace("o=16384 p=2613 i=0", "o=1000 p=0 i=500")) == 1500
    assert haproxy_response_bytes(SHOW_SESS.replace("an=0x0 pipe=0 tofwd=-1 total=2824192",
                                                    "an=0x0 pipe=4096 tofwd=-1 total=2824192")) == 16384 + 4096
    assert haproxy_response_bytes("") == 0


def _wait(predicate, limit_s: float, what: str):
    """The kernel and HAProxy offer no event for these: look every 10 ms until `limit_s`."""
    deadline = time.monotonic() + limit_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
    return value


def test_haproxy_holds_its_bufsize_for_a_client_that_reads_nothing_and_none_once_it_has(tmp_path):
    # More than the kernel's queues past HAProxy take (its send queue autotunes up to tcp_wmem's
    # max), so the rest backs up into its buffer.
    wmem_max = int(open("/proc/sys/net/ipv4/tcp_wmem").read().split()[2])
    size, bufsize = 2 * wmem_max + 4_000_000, 16384
    upstream = socket.create_server(("127.0.0.1", 0))
    front = socket.create_server(("127.0.0.1", 0))
    front_port = front.getsockname()[1]
    front.close()   # a free port for HAProxy's frontend

    def serve():
        c, _ = upstream.accept()
        with c:
            c.sendall(os.urandom(size))
            c.recv(1)   # hold the connection until the client closes
    threading.Thread(target=serve, daemon=True).start()

    kind = CATALOG.node_kinds["haproxy"]
    settings = {**{p.name: p.default for p in kind.options}, "bufsize": bufsize}
    workdir = tmp_path / ("a-run-s-long-work-directory-" * 4)   # longer than a socket's path may be
    workdir.mkdir()
    assert len(str(workdir / "haproxy.sock")) > 108
    proxy = kind(NodeContext(None, "phone", settings, workdir),
                 [Relay("phone", "server", "127.0.0.1", upstream.getsockname()[1])])
    assert proxy.held_down() is None                       # before it runs: it cannot tell
    (argv,) = proxy.processes()                             # as the kind starts it, on a free loopback port
    conf = workdir / "haproxy.cfg"
    conf.write_text(conf.read_text().replace(f"bind 0.0.0.0:{proxy.listen_port(0)}", f"bind 127.0.0.1:{front_port}"))
    haproxy = subprocess.Popen(argv, cwd="/")
    try:
        _wait(lambda: proxy.held_down() is not None, 10, "HAProxy's runtime API never answered")
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        _wait(lambda: client.connect_ex(("127.0.0.1", front_port)) == 0, 10, "HAProxy never listened")
        seen: list[int] = []
        # The kernel's queues before it (the client's receive, HAProxy's send) fill, then its buffer.
        _wait(lambda: seen.append(proxy.held_down()) or seen[-1] == bufsize, 10,
              "HAProxy's buffer never filled")
        assert max(seen) <= bufsize
        got = 0
        while got < size:
            got += len(client.recv(65536))
        assert got == size
        _wait(lambda: proxy.held_down() == 0, 10, "HAProxy still holds bytes after the client read them all")
        client.close()
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        upstream.close()
