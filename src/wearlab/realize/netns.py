"""A live emulated network: one Mininet host (network namespace) per node, one veth pair per link.

Mininet gives us the namespaces and veths; addresses, routes, sysctls and qdiscs - the lines
plan.commands plans (`wearlab plan EXP --commands` prints them) - are applied here as one batch
script per node (one process per node instead of dozens), and every tc failure is an error: an
impairment is never silently dropped.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from wearlab.errors import EnvironmentProblem
from wearlab.model.topology import Topology
from wearlab.plan.addressing import MAC_PREFIX, AddressPlan
from wearlab.plan.commands import OFFLOADS_OFF, NodeSetup, egress, node_setups, patch_devices, shaping
from wearlab.plan.network import NetworkPlan
from wearlab.realize import containers
from wearlab.realize.containers import BridgeClient, ContainerNode
from wearlab.realize import tcjson
from wearlab.runtime import ledger

# What metadata records from every node, whether or not we changed it.
RECORDED_SYSCTLS = (
    "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_no_metrics_save", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_ecn", "net.ipv4.tcp_window_scaling", "net.ipv4.ip_forward",
    "net.core.rmem_max", "net.core.wmem_max", "net.core.default_qdisc", "net.mptcp.enabled",
)


FAIL = "wearlab-setup-failed:"
SECTION = "=====wearlab-section====="
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload")


class RealizeError(EnvironmentProblem):
    """The kernel refused part of the topology (a qdisc, an address, a sysctl)."""


@dataclass
class Network:
    plan: NetworkPlan
    run_id: str
    workdir: Path
    seed: int | None = None                         # experiment seed; None: netem seeds itself
    netem_seeds: dict[str, int] = field(default_factory=dict)  # "a->b" -> netem PRNG seed
    hosts: dict = field(default_factory=dict)      # node name -> mininet Host
    procs: list = field(default_factory=list)      # Popen objects started in nodes
    notes: list[str] = field(default_factory=list)  # conversions applied while shaping
    # Container nodes on the host while this network lives in a UML guest: node -> {pid, id, vec:
    # {peer: guest vector device}} (realize.containers). Their links' both directions are shaped
    # on the guest's side.
    remote: dict = field(default_factory=dict)
    local_containers: bool = False                  # containers this process started (host runtime)

    # -- processes in nodes --------------------------------------------------------------
    def popen(self, node: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start a long-running program in a node; it is stopped by teardown()."""
        p = self.hosts[node].popen(argv, **kw)
        self.procs.append(p)
        return p

    def run(self, node: str, argv: list[str], *, timeout: float | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
        """Run a program in a node to completion."""
        if isinstance(self.hosts[node], ContainerNode):
            res = self.hosts[node].run(argv, timeout=timeout)
            if check and res.returncode != 0:
                raise RealizeError(f"{node}: `{shlex.join(argv)}` failed: {res.stderr.strip() or res.stdout.strip()}")
            return res
        p = self.hosts[node].popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise
        res = subprocess.CompletedProcess(argv, p.returncode, out, err)
        if check and p.returncode != 0:
            raise RealizeError(f"{node}: `{shlex.join(argv)}` failed: {err.strip() or out.strip()}")
        return res

    def is_container(self, node: str) -> bool:
        return isinstance(self.hosts[node], ContainerNode)

    def run_app(self, node: str, argv: list[str], *, timeout: float | None = 60) -> subprocess.CompletedProcess:
        """Run a program of the node's own software: inside the container for a container node
        (its image's nginx, not the host's), like `run` for a namespace node."""
        h = self.hosts[node]
        if isinstance(h, ContainerNode):
            return h.run(argv, app=True, timeout=timeout)
        return self.run(node, argv, timeout=timeout)

    def sh(self, node: str, script: str, *, check: bool = True) -> str:
        return self.run(node, ["sh", "-c", script], check=check).stdout

    def pid(self, node: str) -> int:
        return self.hosts[node].pid

    @property
    def topo(self) -> Topology:
        return self.plan.topology

    @property
    def addresses(self) -> AddressPlan:
        return self.plan.addresses

    # -- shaping ----------------------------------------------------------------------------
    def link_shaper(self, link) -> str:
        """The shaper of one link (plan.network: htb where a wearable's BT radio sleeps)."""
        return self.plan.link(link.a, link.b).shaper.value

    def egress(self, src: str, dst: str) -> tuple[str, str]:
        """Where the direction src -> dst is shaped: (node, device) (plan.commands.egress)."""
        return egress(self.plan, src, dst, self.remote)

    def shape_commands(self, verb: str = "add") -> dict[str, list[str]]:
        """node -> tc batch lines for all its interfaces (plan.commands.shaping)."""
        shaped = shaping(self.plan, seed=self.seed, verb=verb, remote=self.remote)
        self.netem_seeds.update(shaped.netem_seeds)
        self.notes += shaped.notes
        return shaped.lines

    def qdisc_dump(self) -> dict[str, list]:
        """Per node: `tc -s -j qdisc show` (qdiscs with handles, options and counters)."""
        return {n: tcjson.parse(h.cmd("tc -s -j qdisc show")) for n, h in self.hosts.items()}

    def snapshot(self) -> dict[str, dict]:
        """Per node: qdiscs (with counters), recorded sysctls and offload state, in one round
        trip to each node's shell (each exec costs ~30 ms in a UML guest)."""
        out = {}
        for n, h in self.hosts.items():
            intfs = [i.name for i in self.addresses.interfaces[n]]
            text = h.cmd(f"tc -s -j qdisc show; echo; echo {SECTION}; sysctl -e {' '.join(RECORDED_SYSCTLS)}; "
                         + "".join(f"echo {SECTION}; ethtool -k {i}; " for i in intfs))
            qdiscs, sysctls, *offloads = text.replace("\r", "").split(SECTION)
            feats = [dict(l.strip().split(": ", 1) for l in o.splitlines() if ": " in l) for o in offloads]
            out[n] = {
                "qdiscs": tcjson.parse(qdiscs),
                "sysctls": dict(l.split(" = ", 1) for l in sysctls.splitlines() if " = " in l),
                "offloads": {i: {k: f.get(k, "?") for k in OFFLOADS} for i, f in zip(intfs, feats)},
            }
        return out

    # -- teardown ---------------------------------------------------------------------------
    def teardown(self) -> None:
        """Stop everything in the nodes; the namespaces and veths vanish with their last process."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.local_containers:
            containers.remove(self.run_id)
        pids = [h.pid for h in self.hosts.values() if h.pid and not isinstance(h, ContainerNode)]
        # Daemons (nginx) left their parent; find every process in our namespaces by its mark.
        kill_marked(self.run_id)
        for h in self.hosts.values():
            if isinstance(h, ContainerNode):
                continue
            try:
                h.shell.kill()
                h.shell.wait(timeout=5)
            except Exception:  # noqa: BLE001 - teardown must go on
                pass
            for f in (h.stdin, h.stdout):
                try:
                    f.close()
                except Exception:  # noqa: BLE001
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
        _wait_gone(pids, 10)
        shutil.rmtree(self.workdir, ignore_errors=True)
        ledger.forget("net", self.run_id)


def marked_pids(run_id: str | None = None) -> list[int]:
    """PIDs whose environment carries our mark (for a given run, or any run)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            mark = proc.environ().get(ledger.MARK_ENV)
        except (psutil.Error, OSError):
            continue
        if mark is not None and (run_id is None or mark == run_id):
            found.append(proc.pid)
    return found


def namespace_pids() -> list[int]:
    """PIDs in network namespaces wearlab made: a namespace is ours when one of its interfaces
    has wearlab's locally administered MAC prefix (02:77:6c, see realize.addressing.link_mac).
    Finds daemons that rewrote their environment (nginx) and survived a kill -9 of wearlab,
    and never a process in someone else's namespace."""
    by_ns: dict[str, list[int]] = {}
    root = _netns(1)
    for pid in psutil.pids():
        if pid != os.getpid():
            ns = _netns(pid)
            if ns and ns != root:
                by_ns.setdefault(ns, []).append(pid)
    ours: list[int] = []
    for pids in by_ns.values():
        res = subprocess.run(["nsenter", "-t", str(pids[0]), "-n", "ip", "-o", "link", "show"],
                             capture_output=True, text=True, check=False)
        if MAC_PREFIX in res.stdout:
            ours += pids
    return ours


def _netns(pid: int) -> str | None:
    # psutil has no namespace API; the ns link's target names the namespace.
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def kill_marked(run_id: str | None = None) -> list[int]:
    # Never kill ourselves or our ancestors (a test harness may carry a mark too).
    me = psutil.Process()
    spare = {me.pid, *(p.pid for p in me.parents())}
    victims = []
    for pid in marked_pids(run_id):
        if pid in spare:
            continue
        try:
            proc = psutil.Process(pid)
            proc.kill()
            victims.append(proc)
        except psutil.Error:
            pass
    _wait_gone([p.pid for p in victims], 10)
    return [p.pid for p in victims]


def _wait_gone(pids: list[int], timeout: float) -> None:
    """Until each pid is gone or a zombie (its parent reaps it, not us)."""
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if pids:
            time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def build(plan: NetworkPlan, *, run_id: str, seed: int | None = None) -> Network:
    """Create namespaces, veths, addresses, routes, sysctls and qdiscs as `plan` says. Undone by
    teardown(). With `seed`, every netem draws loss and jitter from its own seeded PRNG
    (reproducible)."""
    topo = plan.topology
    from mininet.node import Host  # imported late: Mininet is only needed when a network is built

    if os.geteuid() != 0:
        raise EnvironmentProblem("building a network needs root (network namespaces, tc)")
    os.environ[ledger.MARK_ENV] = run_id  # inherited by every node shell and what it starts
    # Container nodes see the work directory at the same path (a bind mount); in a UML guest it
    # lives in the job directory the host shares, so the host's containers can mount it too.
    shared = os.environ.get(containers.SHARED_ENV)
    workdir = Path(tempfile.mkdtemp(prefix=f"wearlab-{run_id}-", dir=shared or "/tmp"))
    workdir.chmod(0o755)  # servers' unprivileged workers read their content from here
    ledger.record("net", run_id, paths=[str(workdir)])
    images = {n: node.image for n, node in topo.nodes.items() if node.image}
    remote = json.loads(os.environ.get(containers.ENV, "{}"))
    net = Network(plan=plan, run_id=run_id, workdir=workdir, seed=seed,
                  remote={n: remote[n] for n in images if n in remote})
    try:
        local = {n: img for n, img in images.items() if n not in net.remote}
        if local and shared:
            raise EnvironmentProblem(f"node(s) {', '.join(local)} should run as containers, but the host that booted "
                                     "this guest did not start them")
        if local:
            net.local_containers = True
            for name, c in containers.start(local, run_id, [workdir]).items():
                net.hosts[name] = ContainerNode(name, c.pid, c.id)
        bridge = BridgeClient(Path(shared) / "bridge") if net.remote else None
        for name, info in net.remote.items():
            net.hosts[name] = ContainerNode(name, int(info["pid"]), info["id"], bridge)
        for name in topo.nodes:
            if name not in net.hosts:
                net.hosts[name] = Host(name, inNamespace=True)
        _create_links(net)
        setups, shaped = node_setups(plan, seed=seed, remote=net.remote)
        net.netem_seeds.update(shaped.netem_seeds)
        net.notes += shaped.notes
        for name, setup in setups.items():
            _configure_node(net, name, setup)
        return net
    except BaseException:
        net.teardown()
        raise


def _create_links(net: Network) -> None:
    """All veth pairs in one `ip -batch` run from the root namespace, each end created straight
    into its node's namespace (`netns PID` on both ends), so no veth ever sits in the root
    namespace. Mininet's Link would run a dozen commands per link."""
    lines = []
    for link in net.topo.links:
        ia = net.addresses.interface_to(link.a, link.b)
        ib = net.addresses.interface_to(link.b, link.a)
        if link.a in net.remote or link.b in net.remote:
            # The host made the container's end; its other end is this guest's vector device. In
            # the peer's namespace it is patched (tc mirred, both ways) to a veth pair whose far
            # end is the peer's planned interface: the container's direction is then shaped on
            # the patch veth's egress like any egress, and the peer's interface - its capture
            # tap included - sees packets when they arrive, after their delay.
            c, here = (link.a, ib) if link.a in net.remote else (link.b, ia)
            peer = link.b if c == link.a else link.a
            vec, patch = patch_devices(link.index)
            lines += [f"link set dev {net.remote[c]['vec'][peer]} name {vec} netns {net.pid(peer)}",
                      f"link add name {here.name} address {here.mac} netns {net.pid(peer)} type veth "
                      f"peer name {patch} netns {net.pid(peer)}"]
            continue
        lines.append(f"link add name {ia.name} address {ia.mac} netns {net.pid(link.a)} type veth "
                     f"peer name {ib.name} address {ib.mac} netns {net.pid(link.b)}")
    if not lines:
        return
    f = net.workdir / "links.batch"
    f.write_text("\n".join(lines) + "\n")
    res = subprocess.run(["ip", "-batch", str(f)], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RealizeError(f"creating the links failed: {res.stderr.strip()}")


def _configure_node(net: Network, name: str, setup: NodeSetup) -> None:
    d = net.workdir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "ip.batch").write_text("\n".join(setup.ip) + "\n")
    # Sourced by the node's own shell: sysctls are shell builtins writing /proc/sys (no process
    # per setting), so only ip, ethtool and tc are exec'ed — cheap on a host, ~30 ms each in UML.
    # Sysctls first: the interfaces exist but are down, so nothing leaves before IPv6 is off.
    lines = []
    for k, v in setup.sysctls.items():
        path = "/proc/sys/" + k.replace(".", "/")
        lines.append(f"echo {shlex.quote(v)} > {path} || echo {FAIL} sysctl {k}")
    lines.append(f"ip -batch {d / 'ip.batch'} || echo {FAIL} ip")
    for dev in setup.offloads:
        lines.append(f"ethtool -K {dev} {OFFLOADS_OFF} 2>/dev/null")
    if setup.tc:
        (d / "tc.batch").write_text("\n".join(setup.tc) + "\n")
        lines.append(f"tc -batch {d / 'tc.batch'} || echo {FAIL} tc")
    (d / "setup.sh").write_text("\n".join(lines) + "\n")
    out = net.hosts[name].cmd(f". {d / 'setup.sh'}")
    if FAIL in out:
        err = " ".join(l.strip() for l in out.splitlines() if l.strip())
        hint = ""
        if "qdisc kind is unknown" in err or "Unknown qdisc" in err:
            hint = (" — this kernel lacks a qdisc the topology needs; "
                    "use `--runtime uml` (a guest kernel with sch_netem) or `wearlab doctor`")
        raise RealizeError(f"configuring node {name} failed: {err}{hint}")
