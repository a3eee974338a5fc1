"""Container nodes (`image:` on a topology node): validation, where each direction is shaped, and -
with Docker and wearlab's server image - an nginx container answering over netem-shaped links
with the physics of the path, both directions, and nothing left behind."""

from __future__ import annotations

import csv
import shutil
import statistics
import subprocess

import pytest

from conftest import ROOT, wearlab
from wearlab.model.topology import load_topology
from wearlab.plan.addressing import plan_addresses
from wearlab.plan.network import plan_network
from wearlab.realize.netns import Network
from wearlab.catalog import CATALOG

IMAGE = "wearlab/server-nginx:bookworm"


def test_image_on_a_kind_that_cannot_run_in_a_container(write_yaml):
    topo = write_yaml("t.yaml", """name: t
nodes:
  watch: {role: wearable}
  phone:
    role: phone
    image: wearlab/server-nginx:bookworm
  server: {role: server}
links:
  - {between: [watch, phone], profile: bt-classic}
  - {between: [phone, server], profile: wan}
""")
    res = wearlab("validate", str(topo))
    assert res.returncode == 2
    assert f"{topo}:6: nodes.phone.image: kind relay cannot run in a container" in res.stderr
    assert "Traceback" not in res.stderr


def test_image_reference_is_checked(write_yaml):
    topo = write_yaml("t.yaml", """name: t
nodes:
  watch: {role: wearable}
  server: {role: server, image: "nginx latest"}
links:
  - {between: [watch, server], profile: wan}
""")
    res = wearlab("validate", str(topo))
    assert res.returncode == 2
    assert f"{topo}:4: nodes.server.image: 'nginx latest' is not a Docker image reference" in res.stderr


def test_a_host_containers_directions_are_both_shaped_in_the_guest(write_yaml):
    """Beside a UML guest, what the container sends is shaped in its peer's namespace, on the
    patch veth facing the peer's interface; what the peer sends, on the peer's own interface -
    never on the host, which has no netem."""
    topo = load_topology(write_yaml("t.yaml", """name: t
nodes:
  watch: {role: wearable}
  ap: {role: ap}
  server: {role: server, image: wearlab/server-nginx:bookworm}
links:
  - {between: [watch, ap], rate: 10Mbit, delay: 5ms}
  - {between: [ap, server], delay: 20ms, reverse: {delay: 30ms}}
"""), CATALOG)
    net = Network(plan=plan_network(topo), run_id="t", workdir=None,
                  remote={"server": {"pid": 1, "id": "x", "vec": {"ap": "vec0"}}})
    assert net.egress("server", "ap") == ("ap", "wlpatch1")
    assert net.egress("ap", "server") == ("ap", plan_addresses(topo).interface_to("ap", "server").name)
    lines = net.shape_commands("add")
    assert lines["server"] == []
    assert any("dev wlpatch1" in l and "delay 30000us" in l for l in lines["ap"]), lines["ap"]
    assert any("delay 20000us" in l and "wlpatch" not in l for l in lines["ap"]), lines["ap"]


def test_a_workload_that_captures_a_container_node_beside_the_guest_is_refused_before_anything_is_made(tmp_path):
    """Under uml a container node runs on the host, outside the guest, where wearlab starts no
    process beside it; a stream through a proxying container phone captures the phone's packets
    (its delay decomposition), so the run stops at the node's image line, exit 2, before a guest
    boots or a container starts."""
    f = tmp_path / "exp.yaml"
    f.write_text("""name: capturedcontainer
topology:
  nodes:
    watch: {role: wearable}
    phone:
      role: phone
      kind: haproxy
      image: "wearlab/server-haproxy:bookworm"
    server: {role: server}
  links:
    - {between: [watch, phone], medium: bt, rate: 1Mbit, delay: 10ms}
    - {between: [phone, server], medium: wired, delay: 1ms}
workload: {kind: stream, client: watch, server: server, path: phone, pattern: cbr, rate: 100kbit, duration: 1s}
""")
    res = wearlab("run", str(f), "--runtime", "uml", "--out", str(tmp_path / "r"), timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert (f"{f}:8: topology.nodes.phone.image: node phone runs as a container on the host, outside the UML guest, and the "
            "stream workload captures its packets") in res.stderr, res.stderr
    assert "booting" not in res.stderr and not (tmp_path / "r").exists()


def _docker_ready() -> str | None:
    if shutil.which("docker") is None:
        return "docker is not installed (make test-compose installs it)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "Docker's daemon is not running"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        return f"{IMAGE} is not built (make images)"
    return None


def ours() -> tuple[list[str], list[str]]:
    """wearlab's containers and its host-side veths to a guest (names wl<hex>v<n>)."""
    cs = subprocess.run(["docker", "ps", "-aq", "--filter", "label=wearlab.run"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    veths = [l.split(":")[1].strip().split("@")[0] for l in links.splitlines()
             if l.split(":")[1].strip().startswith("wl") and "v" in l.split(":")[1].strip()[6:]]
    return cs, veths


ONE_WAY_WIFI, FORWARD, REVERSE = 0.005, 0.020, 0.030
SYN_FRAME = 74
RATE = 10_000_000
# Handshake physics: propagation one way and back (asymmetric on the container's link), and the
# SYN and SYN-ACK serialised at 10 Mbit/s on both links.
RTT = ONE_WAY_WIFI + FORWARD + REVERSE + ONE_WAY_WIFI + 4 * SYN_FRAME * 8 / RATE


@pytest.mark.compose
def test_container_server_answers_over_shaped_links(tmp_path):
    why = _docker_ready()
    if why:
        pytest.skip(why)
    before = ours()
    (tmp_path / "topo.yaml").write_text(f"""name: ctopo
nodes:
  watch: {{role: wearable}}
  ap: {{role: ap}}
  server: {{role: server, image: "{IMAGE}"}}
links:
  - {{between: [watch, ap], rate: 10Mbit, delay: {int(ONE_WAY_WIFI * 1000)}ms}}
  - between: [ap, server]
    rate: 10Mbit
    forward: {{delay: {int(FORWARD * 1000)}ms}}
    reverse: {{delay: {int(REVERSE * 1000)}ms}}
""")
    (tmp_path / "exp.yaml").write_text("""name: container-physics
topology: topo.yaml
repetitions: 4
seed: 3
workload: {kind: http-get, client: watch, server: server}
matrix:
  protocol: [http, https]
  size: [100KB]
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "results"), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    with (tmp_path / "results" / "container-physics" / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows), rows
    wire = [float(r["wire_connect_s"]) for r in rows]
    goal = max(0.0003, 0.02 * RTT)
    assert min(wire) >= RTT - 1e-5, wire                  # never faster than the physics
    assert statistics.median(wire) <= RTT + goal, wire     # exact to wearlab's goal
    # 100 KB at 10 Mbit/s from the container: the transfer cannot beat the link's rate.
    for r in rows:
        assert 100_000 * 8 / RATE <= float(r["wire_total_s"]) - float(r["wire_connect_s"]) <= 1.0, r
    assert ours() == before  # containers and host veths gone with the run


@pytest.mark.compose
def test_kill9_then_clean_removes_the_containers(tmp_path):
    """A kill -9 leaves the container running (Docker owns it); `wearlab clean` finds it by its
    label and removes it, and its host veth with it. Nothing of anyone else's is touched."""
    import signal
    import time

    from conftest import ROOT, WEARLAB

    why = _docker_ready()
    if why:
        pytest.skip(why)
    before = ours()
    (tmp_path / "exp.yaml").write_text(f"""name: killc
topology:
  nodes: {{watch: {{role: wearable}}, ap: {{role: ap}}, server: {{role: server, image: "{IMAGE}"}}}}
  links: [{{between: [watch, ap], delay: 5ms}}, {{between: [ap, server], delay: 5ms}}]
repetitions: 200
workload: {{kind: http-get, client: watch, server: server, protocol: http, size: 1KB}}
""")
    p = subprocess.Popen([*WEARLAB, "run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r")], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = tmp_path / "r" / "killc" / "latest" / "runs.csv"
    deadline = time.monotonic() + 120
    try:
        while not (runs.exists() and len(runs.read_text().splitlines()) >= 3):
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.2)
        assert len(ours()[0]) == len(before[0]) + 1  # the run's container is up
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    res = wearlab("clean")
    assert res.returncode == 0, res.stderr
    assert "container" in res.stdout
    deadline = time.monotonic() + 20
    while ours() != before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ours() == before


@pytest.mark.compose
def test_an_image_that_is_not_here_exits_2_and_leaves_nothing(tmp_path):
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("needs Docker's daemon")
    before = ours()
    (tmp_path / "exp.yaml").write_text("""name: noimage
topology:
  nodes: {watch: {role: wearable}, ap: {role: ap}, server: {role: server, image: "wearlab/not-built:0"}}
  links: [{between: [watch, ap], delay: 5ms}, {between: [ap, server], delay: 5ms}]
repetitions: 1
workload: {kind: http-get, client: watch, server: server, protocol: http, size: 1KB}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "image not found locally: wearlab/not-built:0 (node server)" in res.stderr
    assert "make images" in res.stderr and "Traceback" not in res.stderr
    assert ours() == before
    assert not (tmp_path / "r").exists()  # refused before a results directory was made


@pytest.mark.compose
def test_a_haproxy_phone_container_splits_the_connection(tmp_path):
    """The phone's HAProxy in images/server-haproxy: the watch's TCP handshake ends at the phone
    (one BT round trip, 2 x 15 ms + two 74-byte frames at 2 Mbit/s, as the watch's capture sees it
    on its own interface), the fetch goes on to a namespace nginx, and the container is gone after."""
    why = _docker_ready()
    if why or subprocess.run(["docker", "image", "inspect", "wearlab/server-haproxy:bookworm"],
                             capture_output=True).returncode != 0:
        pytest.skip(why or "wearlab/server-haproxy:bookworm is not built (make images)")
    before = ours()
    (tmp_path / "exp.yaml").write_text("""name: hpc
topology:
  nodes:
    watch: {role: wearable}
    phone: {role: phone, kind: haproxy, image: "wearlab/server-haproxy:bookworm"}
    ap: {role: ap}
    server: {role: server}
  links:
    - {between: [watch, phone], rate: 2Mbit, delay: 15ms}
    - {between: [phone, ap], rate: 20Mbit, delay: 5ms}
    - {between: [ap, server], delay: 10ms}
repetitions: 3
seed: 5
workload: {kind: http-get, client: watch, server: server, path: phone, protocol: http, size: 100KB}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    with (tmp_path / "r" / "hpc" / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(r["status"] == "ok" for r in rows), rows
    rtt = 2 * 0.015 + 2 * 74 * 8 / 2e6
    wire = [float(r["wire_connect_s"]) for r in rows]
    # The phone is a container on the host and the watch in the guest: SYN and SYN-ACK cross the
    # guest's boundary, which answers within one 10 ms guest tick (HZ 100), as test_deploy's irtt
    # bound says; still far below the server's round trip (60 ms), so the phone ended it.
    tick = 0.010
    assert min(wire) >= rtt - 1e-5 and statistics.median(wire) <= rtt + tick < 2 * (0.015 + 0.005 + 0.010), wire
    assert ours() == before


@pytest.mark.compose
def test_exec_into_a_deployed_container_node():
    """`wearlab exec` into a container node of a deployment (topologies/container-server.yaml: the
    server is wearlab's nginx image) runs in the container - the image's nginx, WEARLAB_NODE, the
    command's exit status - and a namespace node reaches it by name over the shaped links (the
    watch's curl gets nginx's answer); nothing is left after destroy."""
    from test_deploy import _end, _start, _wait_ready

    why = _docker_ready()
    if why:
        pytest.skip(why)
    before = ours()
    name = "wltest-containers"
    proc = _start(name, ROOT / "topologies" / "container-server.yaml")
    try:
        doc = _wait_ready(proc, name)
        assert doc["nodes"]["server"]["container"] is True
        res = wearlab("exec", "--name", name, "server", "--", "nginx", "-v")
        assert res.returncode == 0 and "nginx version" in res.stdout + res.stderr, res.stdout + res.stderr
        res = wearlab("exec", "--name", name, "server", "--", "sh", "-c", 'echo "$WEARLAB_NODE"; exit 3')
        assert res.returncode == 3 and res.stdout.strip() == "server", (res.returncode, res.stdout, res.stderr)
        res = wearlab("exec", "--name", name, "watch", "--", "curl", "-sS", "-o", "/dev/null", "-w",
                      "%{http_code}", "http://server/", timeout=60)
        assert res.returncode == 0 and res.stdout.strip() in ("200", "403", "404"), res.stdout + res.stderr
    finally:
        _end(proc, name)
    assert ours() == before
