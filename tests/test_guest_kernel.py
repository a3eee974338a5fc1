"""wearlab's own UML guest kernel does what the project needs: one functional test per feature,
run inside the guest (`make test` runs them there through `wearlab runtime-exec`)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from bpf_sockops import OPTION, SynOptionWriter, tcp_options
from netutil import live_network, ping_rtts, two_nodes
from wearlab.runtime import probe

pytestmark = [pytest.mark.guest, pytest.mark.skipif(not probe.in_uml_guest(), reason="tests the UML guest kernel")]


def test_every_feature_wearlab_needs_works():
    broken = {n: p.detail for n, p in probe.features().items() if not p.works}
    assert broken == {}


def test_tc_knows_netem_seed():
    # backports iproute2 in the guest's root filesystem; bookworm's 6.1 does not know `seed`.
    version = subprocess.run(["tc", "-V"], capture_output=True, text=True).stdout
    major, minor = (int(x) for x in version.split("iproute2-")[1].split(".")[:2])
    assert (major, minor) >= (6, 6), version


# --- seeds --------------------------------------------------------------------------------------

def _received_seqs(tmp_path, link: str, seed: int, n: int = 400) -> list[int]:
    with two_nodes(tmp_path, link, seed=seed) as net:
        out = net.run("client", ["ping", "-n", "-c", str(n), "-i", "0.002", "-W", "1",
                                 net.addresses.address_of("server")], timeout=60).stdout
    return sorted(int(l.split("icmp_seq=")[1].split()[0]) for l in out.splitlines() if "icmp_seq=" in l)


@pytest.mark.parametrize("loss", ["loss: 10%", "loss: {model: gilbert-elliott, p: 5%, r: 30%}"])
def test_same_seed_same_losses_other_seed_other_losses(tmp_path, loss):
    link = f"forward: {{delay: 1ms, {loss}}}"
    first = _received_seqs(tmp_path, link, seed=11)
    again = _received_seqs(tmp_path, link, seed=11)
    other = _received_seqs(tmp_path, link, seed=12)
    # Physics first: about 10 % (random) or p/(p+r) = 14 % (Gilbert-Elliott) of 400 are lost.
    assert 300 <= len(first) <= 385
    assert first == again
    assert first != other


def test_directions_draw_from_different_seeds(tmp_path):
    with two_nodes(tmp_path, "loss: 10%", seed=3) as net:
        seeds = net.netem_seeds
    assert set(seeds) == {"client->server", "server->client"}
    assert seeds["client->server"] != seeds["server->client"]


# --- MPTCP --------------------------------------------------------------------------------------

MPTCP_TOPOLOGY = """
nodes:
  client: {role: wearable}
  r1: {role: router}
  r2: {role: router}
  server: {role: server}
links:
  - {between: [client, r1], rate: 20Mbit, delay: 10ms}
  - {between: [r1, server], delay: 1ms}
  - {between: [client, r2], rate: 20Mbit, delay: 5ms}
  - {between: [r2, server], delay: 1ms}
"""

MPTCP_SERVER = """
import hashlib, random, socket, sys
data = random.Random(5).randbytes(int(sys.argv[1]))
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 5001)); s.listen(1)
print(hashlib.sha256(data).hexdigest(), flush=True)
c, _ = s.accept(); c.sendall(data); c.close()
"""

MPTCP_CLIENT = """
import hashlib, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)
s.connect((sys.argv[1], 5001))
h, n, half = hashlib.sha256(), 0, False
while chunk := s.recv(65536):
    h.update(chunk); n += len(chunk)
    if not half and n >= int(sys.argv[2]) // 4:
        print("quarter", flush=True); half = True
print(n, h.hexdigest(), flush=True)
"""


def _mptcp_counter(net, node: str, name: str) -> int:
    lines = net.sh(node, "cat /proc/net/netstat").splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        if head.startswith("MPTcpExt:"):
            return dict(zip(head.split()[1:], map(int, values.split()[1:])))[name]
    raise KeyError(name)


def test_mptcp_survives_its_first_path_going_down_byte_exact(tmp_path):
    size = 4_000_000
    with live_network(tmp_path, MPTCP_TOPOLOGY) as net:
        server_ip = net.addresses.address_of("server")
        second_ip = net.addresses.interface_to("server", "r2").ip
        for node in ("client", "server"):
            net.sh(node, "ip mptcp limits set subflow 4 add_addr_accepted 4")
        net.sh("server", f"ip mptcp endpoint add {second_ip} dev {net.addresses.interface_to('server', 'r2').name} signal")
        srv = net.popen("server", [sys.executable, "-c", MPTCP_SERVER, str(size)], stdout=subprocess.PIPE, text=True)
        want = srv.stdout.readline().strip()
        cli = net.popen("client", [sys.executable, "-c", MPTCP_CLIENT, server_ip, str(size)],
                        stdout=subprocess.PIPE, text=True)
        assert cli.stdout.readline().strip() == "quarter"
        # Path 1 fails in both directions mid-transfer.
        net.sh("client", f"ip link set {net.addresses.interface_to('client', 'r1').name} down")
        net.sh("r1", f"ip link set {net.addresses.interface_to('r1', 'client').name} down")
        ready, _, _ = select.select([cli.stdout], [], [], 30)
        assert ready, "the transfer stalled after path 1 went down"
        n, got = cli.stdout.readline().split()
        assert int(n) == size and got == want
        assert _mptcp_counter(net, "client", "MPJoinSynAckRx") >= 1  # the second subflow joined


# --- queues: AQMs and plug ----------------------------------------------------------------------

@pytest.mark.parametrize("qdisc", ["fq_codel", "cake bandwidth 2mbit", "fq"])
def test_aqm_qdiscs_carry_traffic(tmp_path, qdisc):
    with two_nodes(tmp_path, "delay: 2ms") as net:
        net.sh("client", f"tc qdisc replace dev eth0 root {qdisc}")
        rtts = ping_rtts(net, "client", net.addresses.address_of("server"), 10, 0.02)
        stats = json.loads(net.sh("client", "tc -s -j qdisc show dev eth0"))
        assert len(rtts) == 10
        # The AQM replaced the client's netem: the round trip is the server side's 2 ms alone.
        assert 2.0 <= min(rtts) <= 2.5
        assert stats[0]["kind"] == qdisc.split()[0] and stats[0]["packets"] >= 10


def test_cake_shapes_to_its_bandwidth(tmp_path):
    with two_nodes(tmp_path, "delay: 2ms") as net:
        net.sh("client", "tc qdisc replace dev eth0 root cake bandwidth 2mbit")
        server_ip = net.addresses.address_of("server")
        srv = net.popen("server", ["iperf3", "-s", "-1", "-B", server_ip], stdout=subprocess.PIPE, text=True)
        try:
            for _ in range(100):
                if ":5201" in net.sh("server", "ss -Htln"):
                    break
                time.sleep(0.05)
            res = net.run("client", ["iperf3", "-c", server_ip, "-t", "4", "-O", "1", "-J"], timeout=30)
            goodput = json.loads(res.stdout)["end"]["sum_received"]["bits_per_second"]
        finally:
            srv.kill()
        # cake counts its own overhead conservatively: goodput a little under 2 Mbit/s.
        assert 0.85 * 2e6 <= goodput <= 1.0 * 2e6


def test_plug_holds_packets_until_released(tmp_path):
    with two_nodes(tmp_path, "delay: 1ms") as net:
        ip = net.addresses.address_of("server")
        net.sh("client", "tc qdisc replace dev eth0 root plug limit 100000")
        held = net.popen("client", ["ping", "-n", "-c", "1", "-W", "5", ip], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        assert held.poll() is None  # its echo request sits in the plug
        net.sh("client", "tc qdisc change dev eth0 root plug release_indefinite")
        out, _ = held.communicate(timeout=10)
        assert "1 received" in out


# --- netfilter ----------------------------------------------------------------------------------

def test_nfqueue_target_queues_packets(tmp_path):
    with two_nodes(tmp_path, "delay: 1ms") as net:
        ip = net.addresses.address_of("server")
        # No reader on queue 3: queued packets are dropped, unless the rule says bypass.
        net.sh("client", "iptables-legacy -A OUTPUT -p icmp -j NFQUEUE --queue-num 3")
        assert net.run("client", ["ping", "-n", "-c", "2", "-W", "1", ip], timeout=20).returncode != 0
        net.sh("client", "iptables-legacy -F OUTPUT && "
                         "iptables-legacy -A OUTPUT -p icmp -j NFQUEUE --queue-num 3 --queue-bypass")
        assert net.run("client", ["ping", "-n", "-c", "2", "-W", "1", ip], timeout=20).returncode == 0


TPROXY_LISTENER = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
s.bind(("0.0.0.0", 9999)); s.listen(1)
print("listening", flush=True)
c, peer = s.accept()
print(*c.getsockname(), flush=True)
"""


def test_tproxy_delivers_foreign_destinations_to_a_local_socket(tmp_path):
    with two_nodes(tmp_path, "delay: 1ms") as net:
        net.sh("server", "iptables-legacy -t mangle -A PREROUTING -p tcp --dport 7777 -j TPROXY "
                         "--on-port 9999 --tproxy-mark 0x1/0x1 && ip rule add fwmark 1 lookup 100 && "
                         "ip route add local 0.0.0.0/0 dev lo table 100")
        net.sh("client", f"ip route add 10.99.0.0/24 via {net.addresses.address_of('server')}")
        lst = net.popen("server", [sys.executable, "-c", TPROXY_LISTENER], stdout=subprocess.PIPE, text=True)
        assert lst.stdout.readline().strip() == "listening"
        net.run("client", [sys.executable, "-c",
                           "import socket; socket.create_connection(('10.99.0.7', 7777), timeout=5)"],
                check=True, timeout=20)
        # The transparent socket sees the destination the client dialled, not its own address.
        assert lst.stdout.readline().split() == ["10.99.0.7", "7777"]


# --- BPF ----------------------------------------------------------------------------------------

SAVED_SYN_SERVER = """
import socket
s = socket.socket()
s.setsockopt(socket.IPPROTO_TCP, 27, 1)  # TCP_SAVE_SYN
s.bind(("0.0.0.0", 8888)); s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
print(c.getsockopt(socket.IPPROTO_TCP, 28, 512).hex(), flush=True)  # TCP_SAVED_SYN
"""


def test_sock_ops_bpf_writes_a_tcp_option_into_the_syn(tmp_path):
    cgroup = Path(tempfile.mkdtemp(prefix="wearlab-test-bpf-", dir="/sys/fs/cgroup"))
    try:
        with two_nodes(tmp_path, "delay: 1ms") as net, SynOptionWriter(str(cgroup)):
            srv = net.popen("server", [sys.executable, "-c", SAVED_SYN_SERVER], stdout=subprocess.PIPE, text=True)
            assert srv.stdout.readline().strip() == "listening"
            # Only sockets of processes in the cgroup get the option. A node has its own mount
            # namespace (its own /sys), so the client is moved into the cgroup from out here.
            cli = net.popen("client", [sys.executable, "-c", "import socket, sys; sys.stdin.readline(); "
                                       f"socket.create_connection(('{net.addresses.address_of('server')}', 8888))"],
                            stdin=subprocess.PIPE, text=True)
            (cgroup / "cgroup.procs").write_text(str(cli.pid))
            cli.communicate("go\n", timeout=20)
            assert cli.returncode == 0
            syn = bytes.fromhex(srv.stdout.readline().strip())
        assert (OPTION[0], OPTION[2:]) in tcp_options(syn)
    finally:
        os.rmdir(cgroup)
