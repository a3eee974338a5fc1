"""`wearlab deploy TOPOLOGY|EXPERIMENT`: a network kept up, with its nodes' kinds running, until
`wearlab destroy`, Ctrl-C, SIGTERM or a hang-up; `wearlab inspect` lists what is deployed;
`wearlab exec NODE -- CMD` and `wearlab shell NODE` step into a node (run.node_command, over
run.node_exec's channel).
docs/deploy.md tells the user's side.

The path is a run's, from the plan on (architecture.md): a deployment is planned as an
experiment - a topology file as one with no traffic of wearlab's (`NoTraffic`, a workload that
only states what the nodes' kinds serve: the servers' files, and for a proxying phone every
(server, port) a user's tools may use), an experiment file as it is, the cell it runs being its
first (`--set` of its parameters chooses another). From the RunPlan on it is a run's path: the
runtime chosen (runtime.placement: the host where it has netem, else a UML guest), the kernel
checked against the plan's features, the network built and the cell's node kinds started by the
runner (run.runner.held_network: its `Nodes`, as a run starts them: the phone's proxy with the
plan's interception rules, the server's nginx, a watch's radio and handover). Under uml the guest
does that (the host boots it with `wearlab guest-deploy JOB`, the job being data: `DeployJob`,
checked against the host's plan by its digest as a run's is). Wherever the network lives,
run.hold keeps it (the cell's timeline played once, live control, the node-exec agent, the
deployment's document) until a signal.

One ledger (runtime.ledger): the deploying process records `deploy-NAME` with its state directory
/run/wearlab/deploy/NAME (run.hold.claim); the guest and the network have their own entries as in
a run, so a deploy killed with -9 is healed by the next wearlab command (run.cleanup.heal) as a
run is, and `wearlab clean` removes it. A held guest does not make its host CPU poll (runs do:
runtime.hostcpu); UML idles in a host sleep.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.table import Table

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.declarations import Catalog, PlanView, WorkloadFields
from wearlab.model.experiment import Experiment, split_kind
from wearlab.model.experiment_file import load_experiment
from wearlab.model.needs import Files, Need, Relay
from wearlab.model.roles import Role
from wearlab.model.shape import ShapeSpec
from wearlab.model.timeline import LinkChange, resolve_link
from wearlab.model.topology import Topology, load_topology, resolve_kind
from wearlab.model.yamlsrc import load_yaml
from wearlab.plan.plan import CellPlan, RunPlan, plan
from wearlab.run import hold as held
from wearlab.run.deployments import DOC, HOSTS, KIND, SOCKET, STATE, deployments, pick, read_doc  # noqa: F401
from wearlab.run.cleanup import heal
from wearlab.run.runner import held_network
from wearlab.run.start import check_runnable, overrides_of
from wearlab.runtime import placement, signals, uml
from wearlab.workloads.workload import Workload

JOB_FILE = "deploy.json"
WHERE = "<command line>"
# What a topology's deployment serves and intercepts (docs/deploy.md): files of these sizes on
# every server whose kind serves files (nginx: /files/SIZE.bin), and - on a proxying phone next to
# a wearable - the servers' service ports and these ports of users' tools.
FILE_SIZES = (1_000, 100_000, 1_000_000)
USER_PORTS = {5201: "iperf3"}
HOLD_TIMEOUT_S = 3600.0   # a topology deployment's "run" length (a handover's RSSI trace spans it)

# Re-exported: the hold's parts that tests and other commands name here.
NAME_RULE, FORMAT, GUEST_LINE = held.NAME_RULE, held.FORMAT, held.GUEST_LINE
hosts_text = held.hosts_text


# -- what a topology's deployment runs: no traffic of wearlab's -----------------------------------

class NoTrafficFields(WorkloadFields):
    kind: str = "no-traffic"
    clients: tuple[str, ...] = ()     # the wearables
    hops: tuple[str, ...] = ()        # their neighbours (a phone there proxies, if its kind does)
    servers: tuple[str, ...] = ()     # the server-role nodes
    sizes: tuple[int, ...] = FILE_SIZES


class NoTraffic(Workload):
    """A deployment's workload: none of its own. It only states what the nodes' kinds serve, so
    that a user's `curl http://server/files/1000.bin` or `iperf3 -c server` from the watch meets
    the phone's proxy as a run's fetch does. Registered only for deployments (the catalog of
    `wearlab run` has no such workload)."""

    name = "no-traffic"
    doc = "no traffic of wearlab's: the nodes' kinds serve what your own tools ask for (wearlab deploy)"
    Fields = NoTrafficFields

    @classmethod
    def endpoints(cls, fields: NoTrafficFields) -> dict[str, str]:
        return {**({"client": fields.clients[0]} if fields.clients else {}),
                **({"server": fields.servers[0]} if fields.servers else {})}

    @classmethod
    def needs(cls, fields: NoTrafficFields, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        out: list[Need] = []
        for cell in cells:
            for server in fields.servers:
                kind = plan.kind_of(server, cell)
                files = Files(server, tuple(fields.sizes))
                wanted: list[Need] = [files] if kind.accepts(files) else []
                ports = sorted({s.port for s in kind.SERVICES} | set(USER_PORTS))
                wanted += [Relay(hop, server, plan.address_of(server), port) for hop in fields.hops for port in ports]
                out += [n for n in wanted if n not in out]
        return out

    def run(self, cell: dict[str, Any], repetition: int):
        raise RuntimeError("a deployment has no runs")


# -- what `wearlab deploy` was asked, planned ---------------------------------------------------

@dataclass(frozen=True)
class Deployable:
    plan: RunPlan                     # as planned (runtime as asked; run.hold's caller places it)
    cell: CellPlan                    # the cell whose node settings and timeline apply
    sets: list[LinkChange]            # `--set LINK.KEY=VALUE`
    source: dict[str, Any] = field(default_factory=dict)   # topology, experiment: absolute paths


class DeployOptions(BaseModel):
    """What `wearlab deploy` was asked; handed whole to the UML guest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path                        # a topology or an experiment
    name: str | None = None
    runtime: str | None = None        # default: auto (a topology), the experiment's (an experiment)
    shaper: str = Shaper.NETEM.value
    overrides: list[str] = Field(default_factory=list)   # LINK.KEY=VALUE, NODE.OPTION=VALUE, PARAM=VALUE

    def load(self, catalog: Catalog) -> Deployable:
        src = load_yaml(self.file)
        if isinstance(src.data, dict) and "workload" in src.data:
            return _experiment_deployable(self, catalog)
        return _topology_deployable(self, catalog)


class DeployJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    options: DeployOptions
    name: str
    state: Path
    owner_pid: int                    # the host's `wearlab deploy`
    plan_sha256: str                  # the host's plan (RunPlan.digest): the guest deploys only that


def _topology_deployable(opts: DeployOptions, catalog: Catalog) -> Deployable:
    topo = load_topology(opts.file, catalog)
    link_pairs, node_sets = _split_sets(topo, opts.overrides, experiment=False)
    sets = link_overrides(topo, link_pairs)
    nodes = _node_overrides(topo, node_sets, catalog)
    clients = tuple(n for n, node in topo.nodes.items() if node.role == Role.WEARABLE)
    hops = tuple(dict.fromkeys(h for c in clients for h in topo.neighbors(c)))
    servers = tuple(n for n, node in topo.nodes.items() if node.role == Role.SERVER)
    cat = catalog.extended(workloads=[NoTraffic])
    exp = Experiment(catalog=cat, name=topo.name, description=topo.description, file=None, topology=topo,
                     runtime=Runtime(opts.runtime or Runtime.AUTO.value), repetitions=1, seed=1,
                     timeout_s=HOLD_TIMEOUT_S, workload=NoTrafficFields(clients=clients, hops=hops, servers=servers),
                     fixed={}, matrix={}, nodes=nodes,
                     overridden=frozenset(pair.partition("=")[0].strip() for pair in node_sets))
    p = plan(exp, opts.shaper)
    return Deployable(p, p.cells[0], sets, {"topology": str(Path(opts.file).resolve()), "experiment": None})


def _experiment_deployable(opts: DeployOptions, catalog: Catalog) -> Deployable:
    exp = load_experiment(opts.file, catalog, runtime=opts.runtime)
    link_pairs, exp_sets = _split_sets(exp.topology, opts.overrides, experiment=True)
    if exp_sets:
        exp = load_experiment(opts.file, catalog, runtime=opts.runtime, overrides=overrides_of(exp_sets))
    sets = link_overrides(exp.topology, link_pairs)
    p = plan(exp, opts.shaper)
    topo_file = str(Path(p.topology.file).resolve()) if p.topology.file else None
    return Deployable(p, p.cells[0], sets, {"topology": topo_file, "experiment": str(Path(opts.file).resolve())})


def _split_sets(topo: Topology, pairs: list[str], *, experiment: bool) -> tuple[list[str], list[str]]:
    """`--set` pairs into a link's shaping (LINK.KEY=VALUE) and the rest: a node's setting
    (NODE.OPTION=VALUE) or, for an experiment, anything `wearlab run --set` takes."""
    links, rest = [], []
    for pair in pairs:
        key, sep, _ = pair.partition("=")
        prefix, dot, _ = key.strip().rpartition(".")
        if not sep or not key.strip():
            raise InputError([Problem(WHERE, None, "--set", f"'{pair}' is not KEY=VALUE")])
        if dot and prefix not in topo.nodes and resolve_link(topo, prefix) is not None:
            links.append(pair)
        elif experiment or (dot and prefix in topo.nodes):
            rest.append(pair)
        else:
            links.append(pair)   # reported by link_overrides, naming the links
    return links, rest


def _node_overrides(topo: Topology, pairs: list[str], catalog: Catalog) -> dict[str, dict[str, Any]]:
    """`--set phone.kind=haproxy`, `--set watch.radio=bt`: a node's kind and options, checked as an
    experiment's `nodes:` are."""
    given: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        node, _, opt = key.strip().partition(".")
        given.setdefault(node, {})[opt] = value.strip()
    out: dict[str, dict[str, Any]] = {}
    problems = []
    for node, settings in given.items():
        n = topo.nodes[node]
        kind_value = settings.get("kind", n.kind)
        kind, extra = split_kind(kind_value)
        rest = {**extra, **{k: v for k, v in settings.items() if k != "kind"}}
        options, bad = resolve_kind(catalog, kind, n.role, rest, n.options if kind == n.kind else None)
        for key, message in bad:
            problems.append(Problem(WHERE, None, f"--set {node}.{key if key in settings else 'kind'}", message))
        out[node] = ({"kind": kind_value} if "kind" in settings else {}) | {k: options[k] for k in rest if k in options}
    if problems:
        raise InputError(problems)
    return out


def link_overrides(topo: Topology, pairs: list[str]) -> list[LinkChange]:
    """`--set watch-phone.delay=50ms`: a link's shaping, applied after the build like
    `wearlab link set` (both directions)."""
    sets: dict[tuple[str, str], dict[str, Any]] = {}
    problems = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        link_name, dot, field_ = key.strip().rpartition(".")
        link = resolve_link(topo, link_name) if dot else None
        if not sep or link is None:
            names = ", ".join(f"{l.a}-{l.b}" for l in topo.links)
            problems.append(Problem(WHERE, None, "--set", f"'{pair}' is neither LINK.KEY=VALUE with a link of the "
                                                          f"topology ({names}), e.g. watch-phone.delay=50ms, nor "
                                                          f"NODE.OPTION=VALUE with one of its nodes "
                                                          f"({', '.join(topo.nodes)}), e.g. phone.kind=haproxy"))
            continue
        sets.setdefault(link, {})[field_] = value.strip()
    out = []
    for link, values in sets.items():
        try:
            spec = ShapeSpec.model_validate(values)
        except ValidationError as e:
            problems += [Problem(WHERE, None, f"--set {link[0]}-{link[1]}.{'.'.join(map(str, x['loc']))}",
                                 x["msg"].removeprefix("Value error, ")) for x in e.errors()]
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
    # The plan records its file's path as given; the guest plans from the absolute one, so the
    # host does too (else `deploy experiments/X.yaml` under uml: the digests differ, nothing runs).
    opts = opts.model_copy(update={"file": opts.file.resolve()})
    target = opts.load(catalog)
    name = opts.name or target.plan.name
    if not NAME_RULE.match(name):
        raise InputError([Problem(WHERE, None, "--name", f"'{name}' is not a usable name (letters, digits, "
                                                          "'-', '_', '.'; at most 63)")])
    runtime, reason = placement.choose(target.plan.runtime)
    p = target.plan.placed(runtime)
    if os.geteuid() != 0:
        raise EnvironmentProblem("wearlab deploy needs root (network namespaces, tc)")
    check_runnable(p)
    _heal(err_console)
    opts = opts.model_copy(update={"name": name})
    with held.claim(name, runtime=runtime.value, topology=target.source.get("topology"),
                    experiment=target.source.get("experiment")) as state:
        try:
            with signals.interruptible():
                if runtime == Runtime.UML:
                    console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
                    return _deploy_in_guest(opts, p, name, state)
                console.print(f"runtime: host ({reason})")
                _hold_here(target, p, name, state, console, owner_pid=os.getpid(), hub=True)
                return 0
        except KeyboardInterrupt as e:
            err_console.print(f"{name}: destroyed ({getattr(e, 'signal_name', 'SIGINT')})")
            return 0


def _deploy_in_guest(opts: DeployOptions, p: RunPlan, name: str, state: Path) -> int:
    """Boot a guest that builds and holds the network; relay node sessions to it over the guest's
    serial line 1 (run.hold.guest_line)."""
    job = DeployJob(options=opts, name=name, state=state, owner_pid=os.getpid(), plan_sha256=p.digest())
    attaches = [partial(held.guest_line, state)]
    if any(n.image for n in p.topology.nodes.values()):
        from wearlab.realize.containers import for_guest   # container nodes: on this host, beside the guest
        attaches.append(partial(for_guest, p.topology))

    def command(job_dir: Path) -> list[str]:
        (job_dir / JOB_FILE).write_text(job.model_dump_json(indent=1) + "\n")
        return [sys.executable, "-m", "wearlab", "guest-deploy", str(job_dir / JOB_FILE)]

    mounts = [*placement.project_paths(), state, opts.file.parent]
    if p.topology.file:
        mounts.append(Path(p.topology.file).resolve().parent)
    return uml.run_in_guest(command, mounts=mounts, cwd=Path.cwd(), attach=held.attach_all(attaches), low_latency=False,
                            env={"WEARLAB_ARGV": os.environ.get("WEARLAB_ARGV", ""), "WEARLAB_STOP_POLL_S": "1"})


def guest_deploy(job_file: Path, catalog: Catalog, console: Console, err_console: Console) -> int:
    """`wearlab guest-deploy JOB`, in the guest the host's deploy booted: plan again from the
    host's options, and hold only the host's plan (equal digests)."""
    job = DeployJob.model_validate_json(Path(job_file).read_text())
    target = job.options.load(catalog)
    p = target.plan.placed(Runtime.UML)
    if p.digest() != job.plan_sha256:
        raise EnvironmentProblem(f"the plan in the UML guest is not the host's: did {job.options.file} or a file it "
                                 "names change while the guest booted? Nothing was deployed; deploy it again")
    if os.geteuid() != 0:
        raise EnvironmentProblem("wearlab deploy needs root (network namespaces, tc)")
    _heal(err_console)
    with signals.interruptible():
        try:
            _hold_here(target, p, job.name, job.state, console, owner_pid=job.owner_pid, hub=False)
        except KeyboardInterrupt:
            return 0
    return 0


def _hold_here(target: Deployable, p: RunPlan, name: str, state: Path, console: Console, *, owner_pid: int,
               hub: bool) -> None:
    """Build the network on this kernel, start the cell's node kinds, and hold it (until a signal)."""
    with held_network(p, target.cell, run_id=f"{os.getpid()}-deploy-{name}", out_dir=state) as run_state:
        held.hold(run_state, target.cell, name=name, state_dir=state, console=console, owner_pid=owner_pid,
                  runtime=p.runtime, source=target.source, sets=target.sets, hub=hub)


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
                       "topology": entry.get("topology"), "experiment": entry.get("experiment"),
                       "run": entry.get("run"), "nodes": {}, "links": []}
    if as_json:
        print(json.dumps({"deployments": list(docs.values())}, indent=1))
        return 0
    if not docs:
        console.print("nothing is deployed")
        return 0
    for doc in docs.values():
        what = doc.get("experiment") or doc.get("topology")
        starting = ""
        if doc.get("starting"):
            starting = f" - its experiment runs first (results: {doc['run']})" if doc.get("run") else " - starting"
        console.print(f"[bold]{doc['name']}[/bold]: {what} ({doc.get('runtime')} runtime, "
                      f"pid {doc['owner_pid']}){starting}")
        if doc.get("run") and not doc.get("starting"):
            console.print(f"held after the runs of {doc['run']}")
        t = Table(title="nodes")
        for col in ("node", "kind", "interface", "address", "peer", "link"):
            t.add_column(col)
        for node, nd in doc["nodes"].items():
            for i, intf in enumerate(nd["interfaces"]):
                t.add_row(node if i == 0 else "", nd.get("kind", "") if i == 0 else "", intf["name"],
                          f"{intf['ip']}/{intf['prefix'].split('/')[1]}", intf["peer"], intf["link"])
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
