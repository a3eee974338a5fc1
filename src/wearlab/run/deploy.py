"""`wearlab deploy TOPOLOGY`: a topology kept up until `wearlab destroy`, Ctrl-C, SIGTERM or a
hang-up; `wearlab inspect` lists what is deployed; `wearlab exec NODE -- CMD` and `wearlab shell
NODE` step into a node (run.node_exec). docs/deploy.md tells the user's side.

The path is a run's: the topology file is loaded and planned (plan.network: addresses, routes,
every link's shaping - what `wearlab plan --commands` prints for a run), the runtime chosen
(runtime.placement: the host where it has netem, else a UML guest), and the network built by
realize.netns, in the guest under uml (the host boots it with `wearlab guest-deploy JOB`, the job
being data: `DeployJob`). Wherever the network lives, `hold()` keeps it: it writes the
deployment's hosts file and `deployment.json` (what `inspect --json` prints, docs/deploy.md),
serves live control (`wearlab link ... --results /run/wearlab/deploy/NAME`, run.control) and runs
the node-exec agent, then sleeps until a signal - no thread polls but live control's.

One ledger (runtime.ledger): the deploying process records `deploy-NAME` with its state directory
/run/wearlab/deploy/NAME; the guest and the network have their own entries as in a run, so a
deploy killed with -9 is healed by the next wearlab command (run.cleanup.heal) as a run is, and
`wearlab clean` removes it. A held guest does not make its host CPU poll (runs do:
runtime.hostcpu); UML idles in a host sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import sys
import tty
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.declarations import Catalog
from wearlab.model.shape import ShapeSpec
from wearlab.model.timeline import LinkChange, resolve_link
from wearlab.model.topology import Topology, load_topology
from wearlab.plan.network import NetworkPlan, plan_network
from wearlab.run import node_exec
from wearlab.run.deployments import DOC, HOSTS, KIND, SOCKET, STATE, deployments, pick, read_doc  # noqa: F401
from wearlab.run.cleanup import heal
from wearlab.runtime import ledger, placement, probe, signals, uml

GUEST_LINE = "/dev/ttyS1"            # the guest's end of the hub's line (ssl1)
JOB_FILE = "deploy.json"
NAME_RULE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
WHERE = "<command line>"
FORMAT = 1                           # deployment.json's format version (docs/deploy.md)


class DeployOptions(BaseModel):
    """What `wearlab deploy` was asked; handed whole to the UML guest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topology: Path
    name: str | None = None
    runtime: str = Runtime.AUTO.value
    shaper: str = Shaper.NETEM.value
    overrides: list[str] = Field(default_factory=list)   # LINK.KEY=VALUE

    def load(self, catalog: Catalog) -> tuple[Topology, NetworkPlan, list[LinkChange]]:
        topo = load_topology(self.topology, catalog)
        net_plan = plan_network(topo, self.shaper)
        return topo, net_plan, link_overrides(topo, self.overrides)


class DeployJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    options: DeployOptions
    name: str
    state: Path
    owner_pid: int                    # the host's `wearlab deploy`
    umid: str | None = None


def link_overrides(topo: Topology, pairs: list[str]) -> list[LinkChange]:
    """`--set watch-phone.delay=50ms`: a link's shaping, applied after the build like
    `wearlab link set` (both directions)."""
    sets: dict[tuple[str, str], dict[str, Any]] = {}
    problems = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        link_name, dot, field = key.strip().rpartition(".")
        link = resolve_link(topo, link_name) if dot else None
        if not sep or link is None:
            names = ", ".join(f"{l.a}-{l.b}" for l in topo.links)
            problems.append(Problem(WHERE, None, "--set", f"'{pair}' is not LINK.KEY=VALUE with a link of the "
                                                          f"topology ({names}), e.g. watch-phone.delay=50ms"))
            continue
        sets.setdefault(link, {})[field] = value.strip()
    out = []
    for link, values in sets.items():
        try:
            spec = ShapeSpec.model_validate(values)
        except Exception as e:  # noqa: BLE001 - pydantic's message names the key
            problems.append(Problem(WHERE, None, "--set", f"{link[0]}-{link[1]}: {e}"))
            continue
        out.append(LinkChange(0.0, link, ((link[0], link[1]), (link[1], link[0])), "set", spec, origin="--set"))
    if problems:
        raise InputError(problems)
    return out


def _heal(err_console: Console) -> None:
    if os.geteuid() == 0:
        for line in heal():
            err_console.print(f"removed what a dead run left: {line}")


# -- wearlab deploy ------------------------------------------------------------------------------

def deploy_command(opts: DeployOptions, catalog: Catalog, console: Console, err_console: Console) -> int:
    topo, net_plan, _ = opts.load(catalog)
    name = opts.name or topo.name
    if not NAME_RULE.match(name):
        raise InputError([Problem(WHERE, None, "--name", f"'{name}' is not a usable name (letters, digits, "
                                                          "'-', '_', '.'; at most 63)")])
    runtime, reason = placement.choose(opts.runtime)
    if os.geteuid() != 0:
        raise EnvironmentProblem("wearlab deploy needs root (network namespaces, tc)")
    if runtime == Runtime.HOST and net_plan.needs_netem() and not probe.probe_qdisc("netem").works:
        raise EnvironmentProblem(f"this kernel ({probe.kernel_release()}) lacks sch_netem, which {name}'s links "
                                 "need; deploy with `--runtime uml` (or auto)")
    _heal(err_console)
    if name in deployments():
        raise InputError([Problem(WHERE, None, "--name", f"a topology is already deployed as '{name}' "
                                                          f"(`wearlab destroy {name}` first, or --name another)")])
    state = STATE / name
    if state.exists():   # a leftover no live ledger entry owns
        import shutil
        shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    ledger.record(KIND, name, paths=[str(state)], runtime=runtime.value, topology=str(opts.topology.resolve()))
    opts = opts.model_copy(update={"topology": opts.topology.resolve(), "name": name})
    try:
        with signals.interruptible():
            if runtime == Runtime.UML:
                console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
                rc = _deploy_in_guest(opts, name, state)
            else:
                console.print(f"runtime: host ({reason})")
                rc = _deploy_here(opts, catalog, name, state, console, owner_pid=os.getpid(), runtime=Runtime.HOST,
                                  hub=True)
    except KeyboardInterrupt as e:
        err_console.print(f"{name}: destroyed ({getattr(e, 'signal_name', 'SIGINT')})")
        return 0
    finally:
        import shutil
        shutil.rmtree(state, ignore_errors=True)
        ledger.forget(KIND, name)
    return rc


def _deploy_in_guest(opts: DeployOptions, name: str, state: Path) -> int:
    """Boot a guest that builds and holds the network; relay node sessions to it over a pty whose
    other end is the guest's serial line 1."""
    master, slave = pty.openpty()
    tty.setraw(slave)
    hub = node_exec.Hub(state / SOCKET, node_exec.Stream(master))
    hub.start()

    @contextlib.contextmanager
    def line(job_dir: Path):
        yield [f"ssl1=tty:{os.ttyname(slave)}"], {}

    job = DeployJob(options=opts, name=name, state=state, owner_pid=os.getpid())

    def command(job_dir: Path) -> list[str]:
        (job_dir / JOB_FILE).write_text(job.model_dump_json(indent=1) + "\n")
        return [sys.executable, "-m", "wearlab", "guest-deploy", str(job_dir / JOB_FILE)]

    mounts = [*placement.project_paths(), state, opts.topology.parent]
    try:
        return uml.run_in_guest(command, mounts=mounts, cwd=Path.cwd(), attach=line, low_latency=False,
                                env={"WEARLAB_ARGV": os.environ.get("WEARLAB_ARGV", ""), "WEARLAB_STOP_POLL_S": "1"})
    finally:
        hub.close()
        os.close(slave)
        os.close(master)


def guest_deploy(job_file: Path, catalog: Catalog, console: Console, err_console: Console) -> int:
    """`wearlab guest-deploy JOB`, in the guest the host's deploy booted."""
    job = DeployJob.model_validate_json(Path(job_file).read_text())
    if os.geteuid() != 0:
        raise EnvironmentProblem("wearlab deploy needs root (network namespaces, tc)")
    _heal(err_console)
    with signals.interruptible():
        try:
            return _deploy_here(job.options, catalog, job.name, job.state, console, owner_pid=job.owner_pid,
                                runtime=Runtime.UML, hub=False)
        except KeyboardInterrupt:
            return 130


def _deploy_here(opts: DeployOptions, catalog: Catalog, name: str, state: Path, console: Console, *,
                 owner_pid: int, runtime: Runtime, hub: bool) -> int:
    """Build the network on this kernel and hold it (until a signal)."""
    from wearlab.realize import netns

    topo, net_plan, sets = opts.load(catalog)
    seeded = probe.probe_feature("netem seed").works
    run_id = f"{os.getpid()}-deploy-{name}"
    net = netns.build(net_plan, run_id=run_id, seed=0 if seeded else None)
    try:
        hold(net, name=name, state=state, console=console, owner_pid=owner_pid, runtime=runtime,
             topology_file=str(opts.topology), sets=sets, hub=hub)
    finally:
        net.teardown()
    return 0


def hold(net, *, name: str, state: Path, console: Console, owner_pid: int, runtime: Runtime,
         topology_file: str | None, sets: list[LinkChange] = (), hub: bool = True, links=None, changes=None) -> None:
    """Keep a built network until a signal: the hosts file, deployment.json, live control, the
    node-exec agent (on the guest's serial line, or behind a hub on the host)."""
    from wearlab.realize import changelog
    from wearlab.realize.linkctl import LinkControl
    from wearlab.run.control import ControlServer

    own_links = links is None
    links = links or LinkControl(net)
    changes = changes or changelog.ChangeLog()
    for change in sets:
        changes.add(links.apply(change, live=True), change, "live")
    state.mkdir(parents=True, exist_ok=True)
    hosts = state / HOSTS
    hosts.write_text(hosts_text(net))
    ctx = SimpleNamespace(plan=SimpleNamespace(name=name, topology=net.topo), links=links, changes=changes, nodes={},
                          workload=None, progress={}, run_start_ns=None)
    # Live control looks every 0.1 s (a run: 0.02 s): a held network waits for people, and its
    # guest must leave the host CPU idle.
    live = ControlServer(state / "control", ctx, poll_s=0.1, live_s=2.0)
    live.start()
    agent = the_hub = None
    pids = {n: net.pid(n) for n in net.topo.nodes if not net.is_container(n)}
    try:
        if hub:
            a, b = __import__("socket").socketpair()
            agent = node_exec.Agent(node_exec.Stream(a.detach()), pids.get, hosts, list(net.topo.nodes))
            the_hub = node_exec.Hub(state / SOCKET, node_exec.Stream(b.detach()))
            the_hub.start()
        else:
            agent = node_exec.Agent(node_exec.serial_stream(GUEST_LINE), pids.get, hosts, list(net.topo.nodes))
        agent.start()
        doc = document(net, links, name=name, state=state, owner_pid=owner_pid, runtime=runtime,
                       topology_file=topology_file)
        tmp = state / f".{DOC}.tmp"
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(state / DOC)
        console.print(f"deployed {name}: nodes {', '.join(net.topo.nodes)}; `wearlab exec NODE -- CMD`, "
                      f"`wearlab shell NODE`, `wearlab inspect`; `wearlab destroy {name}` or Ctrl-C ends it")
        while True:
            signal.pause()
    finally:
        (state / DOC).unlink(missing_ok=True)
        if agent is not None:
            agent.stop()
        if the_hub is not None:
            the_hub.close()
        live.stop()
        if own_links:
            links.close()


def hosts_text(net) -> str:
    lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    lines += [f"{net.addresses.address_of(n)} {n}" for n in net.topo.nodes if net.addresses.interfaces[n]]
    return "\n".join(lines) + "\n"


def document(net, links, *, name: str, state: Path, owner_pid: int, runtime: Runtime,
             topology_file: str | None) -> dict[str, Any]:
    """deployment.json (docs/deploy.md: its format, stable)."""
    addr = net.addresses
    nodes = {}
    for n in net.topo.nodes:
        pid = net.pid(n)
        nodes[n] = {
            "pid": pid, "netns": f"/proc/{pid}/ns/net", "container": net.is_container(n),
            "address": addr.address_of(n) if addr.interfaces[n] else None,
            "interfaces": [{"name": i.name, "ip": i.ip, "prefix": i.prefix, "mac": i.mac, "peer": i.peer,
                            "peer_ip": i.peer_ip, "link": _link_name(net, i.node, i.peer)}
                           for i in addr.interfaces[n]],
        }
    shapes = links.shapes()
    out_links = []
    for link in net.topo.links:
        ia, ib = addr.interface_to(link.a, link.b), addr.interface_to(link.b, link.a)
        out_links.append({"name": f"{link.a}-{link.b}", "a": link.a, "b": link.b, "a_interface": ia.name,
                          "b_interface": ib.name, "subnet": ia.prefix,
                          "shapes": {d: shapes[d] for d in (f"{link.a}->{link.b}", f"{link.b}->{link.a}")}})
    return {"format": FORMAT, "name": name, "topology": topology_file, "runtime": runtime.value,
            "owner_pid": owner_pid, "state": str(state), "exec_socket": str(state / SOCKET),
            "control": str(state / "control"), "hosts_file": str(state / HOSTS), "run_id": net.run_id,
            "nodes": nodes, "links": out_links}


def _link_name(net, a: str, b: str) -> str:
    link = net.topo.link_between(a, b)
    return f"{link.a}-{link.b}" if link is not None else f"{a}-{b}"


# -- wearlab destroy, inspect ------------------------------------------------------------------

def destroy(name: str | None, console: Console, err_console: Console) -> int:
    _heal(err_console)
    name, entry = pick(name)
    pid = int(entry["owner_pid"])
    try:
        fd = os.pidfd_open(pid)   # readable once it has exited (zombie or reaped): no polling
    except ProcessLookupError:
        fd = None
    if fd is not None:
        try:
            os.kill(pid, signal.SIGTERM)
            ready, _, _ = select.select([fd], [], [], 120)
        finally:
            os.close(fd)
        if not ready:
            raise EnvironmentProblem(f"deployment '{name}' (pid {pid}) did not end within 120 s; "
                                     "`wearlab clean` removes everything")
    console.print(f"destroyed {name}")
    return 0


def inspect(name: str | None, as_json: bool, console: Console, err_console: Console) -> int:
    _heal(err_console)
    live = deployments()
    if name is not None:
        name, _ = pick(name)
        live = {name: live[name]}
    docs = {}
    for n, entry in sorted(live.items()):
        try:
            docs[n] = _with_live_shapes(read_doc(n, entry))
        except EnvironmentProblem:
            docs[n] = {"name": n, "starting": True, "owner_pid": entry["owner_pid"], "runtime": entry.get("runtime"),
                       "topology": entry.get("topology"), "nodes": {}, "links": []}
    if as_json:
        print(json.dumps({"deployments": list(docs.values())}, indent=1))
        return 0
    if not docs:
        console.print("nothing is deployed")
        return 0
    for doc in docs.values():
        console.print(f"[bold]{doc['name']}[/bold]: {doc.get('topology')} ({doc.get('runtime')} runtime, "
                      f"pid {doc['owner_pid']}){' - starting' if doc.get('starting') else ''}")
        t = Table(title="nodes")
        for col in ("node", "interface", "address", "peer", "link"):
            t.add_column(col)
        for node, nd in doc["nodes"].items():
            for i, intf in enumerate(nd["interfaces"]):
                t.add_row(node if i == 0 else "", intf["name"], f"{intf['ip']}/{intf['prefix'].split('/')[1]}",
                          intf["peer"], intf["link"])
        console.print(t)
        t = Table(title="links")
        for col in ("direction", "rate", "delay", "jitter", "loss", "queue", "down"):
            t.add_column(col)
        for link in doc["links"]:
            for d, s in link["shapes"].items():
                t.add_row(d, str(s.get("rate", "-")), str(s.get("delay", "")), str(s.get("jitter", "")),
                          str(s.get("loss", "-")), str(s.get("queue_packets", s.get("queue_bytes", "-"))),
                          "down" if s.get("down") else "")
        console.print(t)
    return 0


def _with_live_shapes(doc: dict[str, Any]) -> dict[str, Any]:
    """Links as they are now (`wearlab link set` changes them): asked of its live control."""
    from wearlab.run import control

    try:
        now = control.request(Path(doc["control"]).parent, {"action": "show"}).get("shapes", {})
    except (EnvironmentProblem, InputError, KeyError, OSError, ValueError):
        return doc
    for link in doc["links"]:
        for d in link["shapes"]:
            if d in now:
                link["shapes"][d] = now[d]
    return doc


# -- wearlab exec, shell -------------------------------------------------------------------------

def node_command(name: str | None, node: str, argv: list[str], *, shell: bool) -> int:
    name, entry = pick(name)
    doc = read_doc(name, entry, wait_s=0)
    if node not in doc["nodes"]:
        raise InputError([Problem(WHERE, None, "NODE", f"no node '{node}' in deployment '{name}' "
                                                         f"(nodes: {', '.join(doc['nodes'])})")])
    if doc["nodes"][node].get("container"):
        raise InputError([Problem(WHERE, None, "NODE", f"'{node}' is a container node: use `docker exec` "
                                                         "(wearlab exec runs in namespace nodes)")])
    env = {k: os.environ[k] for k in ("TERM", "LANG", "LC_ALL") if k in os.environ} if shell else {}
    try:
        return node_exec.run_client(Path(doc["exec_socket"]), node, argv, tty_mode=shell, env=env)
    except LookupError as e:
        raise InputError([Problem(WHERE, None, "NODE", str(e))]) from None
    except (ConnectionError, FileNotFoundError) as e:
        raise EnvironmentProblem(f"deployment '{name}': {e}") from None
