"""A capture's tap (measure.capture.add_tap) on a kernel without the dummy driver - this
machine's host kernel, where container nodes run - is a veth pair: every TCP packet the
interface sends and receives is in the capture exactly once, and the tap adds none to the link
(the server gets each byte once). Two plain namespaces and a veth, no netem."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from wearlab.measure.capture import ClientCapture
from wearlab.measure.pcap import PcapReader
from wearlab.measure.tcp import SYN, decode_tcp

pytestmark = pytest.mark.root

SIZE = 100_000
SERVER = r"""
import socket, sys
lst = socket.create_server(("10.99.0.2", 7000)); print("listening", flush=True)
c, _ = lst.accept(); got = 0
while (d := c.recv(65536)):
    got += len(d)
print(got, flush=True)
"""
CLIENT = f"""
import socket
s = socket.create_connection(("10.99.0.2", 7000)); s.sendall(b"x" * {SIZE}); s.close()
"""


class Namespaces:
    """a -- b over one veth, as `ip netns` namespaces named for this process (removed after)."""

    def __init__(self):
        self.tag = f"wearlab-tap-test-{os.getpid()}"

    def ns(self, node: str) -> str:
        return f"{self.tag}-{node}"

    def sh(self, node: str, script: str) -> str:
        return subprocess.run(["ip", "netns", "exec", self.ns(node), "sh", "-c", script], check=True,
                              capture_output=True, text=True).stdout

    def popen(self, node: str, argv: list[str], **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.ns(node), *argv], **kw)


@pytest.fixture
def net():
    n = Namespaces()
    try:
        for node in ("a", "b"):
            subprocess.run(["ip", "netns", "add", n.ns(node)], check=True)
        subprocess.run(["ip", "link", "add", "eth0", "netns", n.ns("a"), "type", "veth", "peer", "eth0",
                        "netns", n.ns("b")], check=True)
        for node, ip in (("a", "10.99.0.1"), ("b", "10.99.0.2")):
            n.sh(node, f"ip addr add {ip}/24 dev eth0 && ip link set eth0 up && ip link set lo up")
        yield n
    finally:
        for node in ("a", "b"):
            subprocess.run(["ip", "netns", "del", n.ns(node)], check=False)


def test_the_tap_sees_every_packet_once_and_adds_none_to_the_link(net, tmp_path):
    server = net.popen("b", [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "listening"
    capture = ClientCapture(net, "a", ["eth0"], tmp_path)
    try:
        subprocess.run(["ip", "netns", "exec", net.ns("a"), sys.executable, "-c", CLIENT], check=True, timeout=30)
        assert int(server.stdout.readline()) == SIZE          # each byte once at the server
        server.wait(timeout=10)
    finally:
        capture.stop()
    with PcapReader(capture.files["eth0"]) as reader:
        segs = [s for p in reader.read_new() if (s := decode_tcp(p.frame, p.linktype))]
    a, b = socket.inet_aton("10.99.0.1"), socket.inet_aton("10.99.0.2")
    sent = [s for s in segs if (s.src, s.dst) == (a, b)]
    back = [s for s in segs if (s.src, s.dst) == (b, a)]
    # Each segment once, both ways: one SYN out, one SYN-ACK in, the payload's bytes exactly once.
    assert sum(1 for s in sent if s.flags & SYN) == 1 and sum(1 for s in back if s.flags & SYN) == 1
    assert sum(s.payload_len for s in sent) == SIZE
    assert len({s.seq for s in sent if s.payload_len}) == sum(1 for s in sent if s.payload_len)
    assert "tap-eth0" in net.sh("a", "ip -o link show")
