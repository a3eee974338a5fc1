"""plan(experiment) -> RunPlan: an experiment resolved once, checked whole, before anything touches
the network (netlab's "transform" phases: each phase collects its errors and reports them all).

Phases:
1. resolve: every cell with its workload values, the kind and options of every node, its timeline;
   the links with their media and shapers, addresses and routes;
2. needs: what the workload needs of each node (files to serve, connections to proxy, tcpcrypt
   daemons), checked against the kinds (a server kind without the service a cell asks for);
3. checks: each node kind's own checks per cell (a wearable's radio needs one BT link to a phone,
   a handover a BT and a WiFi path, recovery_min <= recovery_max, proactive needs MPTCP, ...), and
   TCP ports that collide on a node - within each group of cells, the cells whose nodes run
   together (cells run one after another, and nodes restart between groups: `phone.kind: [relay,
   haproxy]` is two groups, each proxy alone on its port), beside the workload's own agents (they
   run for the whole experiment);
4. what the run needs of the kernel (features) and what its results hold (columns);
5. devices: each node's `device:` resolved (built-in or the topology's `devices:`).
Every problem is an InputError naming file, line and field.

The RunPlan holds every resolved value a run reads - the workload's fields, each cell's values and
node settings, repetitions, seed, timeout, ratios, claims, the runtime - and not the
experiment it came from: `realize`, `run`, `measure` and `report` read the plan and nothing else.
It is written into the results (plan.json), shown by `wearlab plan EXP`, and its `digest()` is
what a UML guest compares with the host's before it runs (run.start).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from wearlab.errors import InputError, Problem
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.columns import Columns, Ratio, columns_of
from wearlab.model.devices import Device, builtin_devices, negative_levels
from wearlab.model.claims import Claim
from wearlab.model.experiment import COMMAND_LINE, Experiment
from wearlab.model import link_settings
from wearlab.model.features import KernelFeature
from wearlab.model.link_settings import is_link_key
from wearlab.model.declarations import LinkEnd, NodeKindDecl, NodeView, PlanView, ServiceMissing, WorkloadDecl
from wearlab.model.needs import Files, Need, Relay, Tcpcrypt
from wearlab.model.ports import TCPCRYPTD_IN, TCPCRYPTD_OUT
from wearlab.model.timeline import Timeline
from wearlab.model.topology import Topology
from wearlab.model.yamlsrc import did_you_mean, sort_problems
from wearlab.plan.addressing import AddressPlan
from wearlab.plan.network import NetworkPlan, plan_network

T = TypeVar("T")


@dataclass(frozen=True)
class NodeSetting:
    """What runs on a node in a cell."""

    kind: type[NodeKindDecl]
    options: Mapping[str, Any]

    def key(self) -> tuple:
        return (self.kind.name, tuple(sorted((k, str(v)) for k, v in self.options.items())))


@dataclass(frozen=True)
class CellPlan:
    """One cell: the values its runs get (workload parameters, `node.option` matrix keys, the
    timeline's name), what runs on every node, the timeline, and its group - cells of one group
    share node settings, so nodes restart only between groups."""

    index: int
    values: Mapping[str, Any]
    nodes: Mapping[str, NodeSetting]
    timeline: Timeline
    group: int
    label: str
    # The cell's own links where its `link.<link>.<field>` keys set them (model.link_settings):
    # the experiment's topology with those links' shaping and band, and its interference rule
    # resolved again. None: the experiment's topology as it is (RunPlan.topology).
    topology: Topology | None = None


@dataclass(frozen=True)
class RunPlan(PlanView):
    name: str
    file: str | None                 # the experiment file it was planned from (None: built in code)
    description: str
    runtime: Runtime                 # where the network lives: as chosen (runtime.placement), else as asked
    repetitions: int
    seed: int
    timeout_s: float                 # a run's limit
    workload: type[WorkloadDecl]
    fields: BaseModel                # the workload's fixed fields (client, server, ...)
    fixed: Mapping[str, Any]         # values every cell shares: workload parameters, `nodes:` as node.option
    ratios: tuple[Ratio, ...]        # the workload's own, then the experiment's `ratios:`
    claims: tuple[Claim, ...]        # `expect:`, each with the cells of its groups (model.claims)
    network: NetworkPlan
    cells: tuple[CellPlan, ...]
    needs: tuple[Need, ...]
    features: frozenset[KernelFeature]
    ports: tuple[Mapping[str, Mapping[int, str]], ...]   # per group: node -> port -> what listens there
    columns: Columns
    notes: tuple[str, ...] = field(default=())
    devices: Mapping[str, Device] = field(default_factory=dict)   # node -> its device (nodes that name one)
    # the nodes the workload's client connects to, over all cells (WorkloadDecl.servers): where
    # the chunked multipath transport's server agents run
    servers: tuple[str, ...] = ()
    # the catalog's multipath schedulers: name -> "module:Class", what the transport's agents import
    schedulers: Mapping[str, str] = field(default_factory=dict)
    # the catalog's interface-selection policies: name -> "module:Class", what the wearable runs
    interface_policies: Mapping[str, str] = field(default_factory=dict)
    # `matrix: exclude:` (model.exclude): the cells it left out, each with the entry that names it
    # ({"values": ..., "by": ...}); None without exclude (and then not in the plan's document).
    excluded: tuple[Mapping[str, Any], ...] | None = None

    # -- what the rest of wearlab asks ---------------------------------------------------------
    @property
    def topology(self) -> Topology:
        return self.network.topology

    def topology_of(self, cell: CellPlan) -> Topology:
        """The links a run of `cell` has: its own (link settings), else the experiment's."""
        return cell.topology if cell.topology is not None else self.topology

    @property
    def addresses(self) -> AddressPlan:
        return self.network.addresses

    @property
    def endpoints(self) -> dict[str, str]:
        return self.workload.endpoints(self.fields)

    def placed(self, runtime: Runtime | str) -> RunPlan:
        """This plan with the runtime runtime.placement chose for it."""
        return dataclasses.replace(self, runtime=Runtime(runtime))

    def groups(self) -> list[list[CellPlan]]:
        out: dict[int, list[CellPlan]] = {}
        for c in self.cells:
            out.setdefault(c.group, []).append(c)
        return list(out.values())

    def address_of(self, node: str) -> str:
        return self.addresses.address_of(node)

    def kind_of(self, node: str, cell: Mapping[str, Any]) -> type[NodeKindDecl]:
        return _cell_of(self.cells, cell).nodes[node].kind

    def needs_of(self, node: str, setting: NodeSetting) -> list[Need]:
        """The needs `node` serves with `setting`: what its kind accepts, and tcpcryptd (any kind
        carries it). A Relay on a kind that does not proxy is routed, not served."""
        return [n for n in self.needs if n.node == node and (isinstance(n, Tcpcrypt) or setting.kind.accepts(n))]

    def proxying(self, node: str, cell: Mapping[str, Any] | None = None) -> bool:
        """Whether `node` proxies the workload's connections (in `cell`, or in any cell)."""
        cells = [c for c in self.cells if cell is None or c.values == cell] or list(self.cells)
        return any(n.node == node and isinstance(n, Relay) for n in self.needs) and \
            any(c.nodes[node].kind.proxies() for c in cells)

    def link_ends(self, node: str) -> tuple[LinkEnd, ...]:
        topo = self.topology
        return tuple(LinkEnd(l.index, l.other(node), topo.nodes[l.other(node)].role, l.medium)
                     for l in topo.links if node in (l.a, l.b))

    def builds(self) -> list[str]:
        """What `make` must build for this run beyond the set-up (`make experiment` asks)."""
        out = ["tcpcrypt"] if any(isinstance(n, Tcpcrypt) for n in self.needs) else []
        return out + (["devicecpu"] if self.devices else [])

    def key_log_nodes(self) -> list[str]:
        """Nodes whose tcpcryptd keeps a key log (`tcpcrypt_key_log: true` on a node that runs
        tcpcryptd in some cell): the results will hold their session keys."""
        crypt = {n.node for n in self.needs if isinstance(n, Tcpcrypt)}
        return [name for name, node in self.topology.nodes.items() if node.tcpcrypt_key_log and name in crypt]

    def device_of(self, node: str) -> Device | None:
        return self.devices.get(node)

    def radio_nodes(self) -> frozenset[str]:
        return frozenset(n for c in self.cells for n, s in c.nodes.items() if s.options.get("radio") == "bt")

    # -- the plan as data ----------------------------------------------------------------------
    def to_document(self) -> dict[str, Any]:
        return {
            "experiment": self.name, "file": self.file, "description": self.description,
            "workload": self.workload.name, "endpoints": self.endpoints, "servers": list(self.servers),
            "fields": {k: _plain(v) for k, v in self.fields.model_dump().items()},
            "runtime": self.runtime.value, "shaper": self.network.shaper.value,
            "repetitions": self.repetitions, "seed": self.seed, "timeout_s": self.timeout_s,
            "runs": len(self.cells) * self.repetitions,
            "fixed": {k: _plain(v) for k, v in self.fixed.items()},
            "ratios": [{k: _plain(v) for k, v in dataclasses.asdict(r).items()} for r in self.ratios],
            "claims": [c.to_document() for c in self.claims],
            "features": sorted(f.value for f in self.features),
            "cells": [{"cell": c.index, "group": c.group, "label": c.label,
                       "values": {k: _plain(v) for k, v in c.values.items()},
                       "timeline": c.timeline.name,
                       "nodes": {n: {"kind": s.kind.name, **{k: _plain(v) for k, v in s.options.items()}}
                                 for n, s in c.nodes.items()},
                       **({"links": _cell_links(self.topology, c.topology)} if c.topology is not None else {})}
                      for c in self.cells],
            **({"excluded": [{"values": {k: _plain(v) for k, v in x["values"].items()},
                              "by": {k: _plain(v) for k, v in x["by"].items()}} for x in self.excluded]}
               if self.excluded is not None else {}),
            "links": [lp.to_document() for lp in self.network.links],
            "addresses": {n: [{"interface": i.name, "ip": i.ip, "peer": i.peer} for i in intfs]
                          for n, intfs in self.addresses.interfaces.items()},
            "routes": self.addresses.routes,
            "needs": [{"node": n.node, "need": type(n).__name__.lower(),
                       **{k: _plain(v) for k, v in vars(n).items() if k != "node"}} for n in self.needs],
            "ports": [{n: {str(p): what for p, what in sorted(ps.items())} for n, ps in group.items()}
                      for group in self.ports],
            "columns": {"params": list(self.columns.params), "metrics": [m.name for m in self.columns.metrics],
                        "series": [s.name for s in self.columns.series]},
            "devices": {n: d.summary() for n, d in sorted(self.devices.items())},
            "notes": list(self.notes),
        }

    def digest(self) -> str:
        """sha256 of the plan document as canonical JSON: equal digests, equal runs."""
        return document_digest(self.to_document())


def run_order(groups: Iterable[Iterable[T]], repetitions: int) -> Iterator[tuple[int, int, T]]:
    """(run number, repetition, cell) of every run, in the order a run straight through takes them:
    repetitions outermost, then the groups (cells that share node settings), then their cells. The
    one definition of a run's number: resume, shards and merge all count with it."""
    groups = [list(g) for g in groups]
    n = 0
    for rep in range(1, repetitions + 1):
        for group in groups:
            for cell in group:
                n += 1
                yield n, rep, cell


def document_digest(doc: Mapping[str, Any]) -> str:
    """sha256 of a plan document (RunPlan.to_document, or plan.json as read back) as canonical JSON."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _cell_of(cells: tuple[CellPlan, ...] | list[CellPlan], values: Mapping[str, Any]) -> CellPlan:
    """The resolved cell whose values are `values`."""
    wanted = dict(values)
    for c in cells:
        if c.values == wanted:
            return c
    raise KeyError(f"no cell of the plan has the values {wanted}")


def _cell_links(topo: Topology, mine: Topology) -> dict[str, Any]:
    """A cell's links that differ from the experiment's, their profile, each direction's shaping
    and the band as a topology writes them, and the cell's 2.4 GHz couplings (model.interference)."""
    out: dict[str, Any] = {}
    for base, link in zip(topo.links, mine.links, strict=True):
        if link != base:
            out[link.name] = {"profile": link.profile, "band": link.band.value if link.band else None,
                              f"{link.a}->{link.b}": link.forward.to_document(),
                              f"{link.b}->{link.a}": link.reverse.to_document()}
    out["couplings"] = [{"node": c.node, "bt": "-".join(c.bt), "wifi": "-".join(c.wifi)}
                        for c in mine.interference.couplings]
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return str(v)


# ---------------------------------------------------------------------------------------------


class _Planner(PlanView):
    """The plan being made: what needs() may ask while the plan is incomplete."""

    def __init__(self, cells: list[CellPlan], network: NetworkPlan):
        self.cells, self.network = cells, network

    def address_of(self, node: str) -> str:
        return self.network.addresses.address_of(node)

    def kind_of(self, node: str, cell: Mapping[str, Any]) -> type[NodeKindDecl]:
        return _cell_of(self.cells, cell).nodes[node].kind


def plan(exp: Experiment, shaper: Shaper | str = Shaper.NETEM, runtime: Runtime | str | None = None) -> RunPlan:
    """Resolve and check `exp` (module doc). `runtime`: as chosen (default: as the experiment
    asks, `auto` included). Raises InputError listing every problem found."""
    catalog = exp.catalog
    workload = exp.workload_class
    topo = exp.topology

    # 1. resolve
    cells: list[CellPlan] = []
    groups: dict[tuple, int] = {}
    problems: list[Problem] = []
    for i, values in enumerate(exp.cells()):
        def at_link_key(key: str, message: str, values=values) -> None:
            problems.append(_at_matrix(exp, key, values, message))
        cell_topo = exp.topology_of(values, at_link_key)
        nodes = {}
        for n in topo.nodes:
            kind, options = exp.node_settings(n, values)
            nodes[n] = NodeSetting(catalog.node_kinds[kind], catalog.node_kinds[kind].resolved(options, catalog))
        group_key = tuple(sorted((n, s.key()) for n, s in nodes.items()))
        group = groups.setdefault(group_key, len(groups))
        cells.append(CellPlan(i, dict(values), nodes, exp.timeline_of(values), group, workload.describe_cell(values),
                              topology=cell_topo if cell_topo is not topo else None))
    _raise(problems)
    radio = frozenset(n for c in cells for n, s in c.nodes.items() if s.options.get("radio") == "bt")
    network = plan_network(topo, shaper, radio)
    _raise(_unshaped_rates(exp, network, cells))
    planner = _Planner(cells, network)

    # 2. needs
    try:
        needs = tuple(workload.needs(exp.workload, [c.values for c in cells], planner))
    except ServiceMissing as e:
        problems.append(_at_workload(exp, "server", str(e)))
        needs = ()
    for c in cells:
        for n, setting in c.nodes.items():
            for need in needs:
                if need.node == n and not isinstance(need, (Relay, Tcpcrypt)) and not setting.kind.accepts(need):
                    what = "serve files" if isinstance(need, Files) else f"provide {type(need).__name__.lower()}"
                    able = [k.name for k in catalog.node_kinds.values() if k.accepts(need)]
                    problems.append(_at_option(exp, n, "kind", c.values,
                                               f"node {n} (kind {setting.kind.name}) cannot {what} for this workload"
                                               + (f"; kinds that can: {', '.join(able)}" if able else "")))
    _raise(problems)

    # 3. checks
    endpoints = workload.endpoints(exp.workload)
    servers = tuple(workload.servers(exp.workload, [c.values for c in cells]))
    ends = {n: tuple(LinkEnd(l.index, l.other(n), topo.nodes[l.other(n)].role, l.medium)
                     for l in topo.links if n in (l.a, l.b)) for n in topo.nodes}
    for c in cells:
        for n, setting in c.nodes.items():
            view = NodeView(n, topo.nodes[n].role, setting.options, ends[n], c.values, endpoints,
                            tuple(catalog.schedulers or ()), dict(catalog.interface_policies or {}),
                            workload.name, workload.rides_transport, servers)
            for option, message in setting.kind.check(view):
                problems.append(_at_option(exp, n, option, c.values, message))
    ports = _ports(exp, workload, cells, needs, problems)
    ratios = (*workload.ratios, *exp.ratios)
    _raise(problems)

    # 4. kernel features and result columns
    features: set[KernelFeature] = set(workload.features([c.values for c in cells]))
    for need in needs:
        features |= need.features()
    for c in cells:
        for s in c.nodes.values():
            features |= s.kind.features(s.options)
    # A cell's own links may ask netem for what the experiment's do not (a delay, a loss).
    netem = network.needs_netem() or any(plan_network(c.topology, shaper, radio).needs_netem()
                                         for c in cells if c.topology is not None)
    if netem:
        features.add(KernelFeature.NETEM)
    if netem and exp.seed is not None:
        features.add(KernelFeature.NETEM_SEED)
    if any(lp.shaper == Shaper.HTB for lp in network.links):
        features.add(KernelFeature.HTB)
    devices = _devices(exp, problems)
    _raise(problems)
    used_kinds = sorted({s.kind.name for c in cells for s in c.nodes.values()})
    columns = columns_of(workload, [catalog.node_kinds[k] for k in used_kinds], exp.matrix)
    fixed = {**exp.fixed, **{f"{n}.{k}": v for n, opts in exp.nodes.items() for k, v in opts.items()}}
    claims = tuple(c.planned([{**fixed, **x.values} for x in cells]) for c in exp.claims)
    _raise(_claims_left_without_cells(exp, claims, fixed))
    return RunPlan(name=exp.name, file=exp.file, description=exp.description,
                   runtime=Runtime(runtime) if runtime is not None else exp.runtime,
                   repetitions=exp.repetitions, seed=exp.seed, timeout_s=exp.timeout_s, workload=workload,
                   fields=exp.workload, fixed=fixed, ratios=ratios, network=network,
                   claims=claims,
                   cells=tuple(cells), needs=needs, features=frozenset(features), ports=ports, columns=columns,
                   devices=devices, servers=servers,
                   schedulers={n: f"{c.__module__}:{c.__qualname__}" for n, c in (catalog.schedulers or {}).items()},
                   interface_policies={n: f"{c.__module__}:{c.__qualname__}"
                                       for n, c in (catalog.interface_policies or {}).items()},
                   excluded=tuple({"values": values, "by": by.values} for values, by in exp.excluded_cells())
                   if exp.exclusions else None)


def _claims_left_without_cells(exp: Experiment, claims: tuple[Claim, ...], fixed: Mapping[str, Any]) -> list[Problem]:
    """A claim whose cells - or one side of its contrast - `matrix: exclude:` left out entirely:
    `wearlab check` would find no runs for it, so the file contradicts itself (leave the claim's
    cells in, or read the claim from cells that are run). A group `--set` emptied is no error
    (the user narrowed the experiment on purpose; `wearlab check` says so)."""
    if not exp.exclusions:
        return []
    left_out = exp.excluded_cells()
    kept = [{**fixed, **v} for v in exp.cells()]
    out = []
    for i, (claim, planned) in enumerate(zip(exp.claims, claims, strict=True)):
        whole = claim.planned(kept + [{**fixed, **v} for v, _ in left_out])
        had = {(g.role, str(g.level)): g.cells for g in whole.groups}
        for g in planned.groups:
            gone = had.get((g.role, str(g.level)), ())
            if g.cells or not gone:
                continue
            by = sorted({left_out[j - len(kept)][1].at for j in gone if j >= len(kept)})
            contrast = claim.contrast
            path = ("expect", i, "cells") if contrast is None else ("expect", i, contrast.kind, g.role)
            what = "cells" if contrast is None else f"{g.role} ({contrast.over}: {getattr(contrast, g.role)})"
            out.append(exp.where.problem(path, f"claim {claim.id}: the cells of its {what} are all left out by "
                                               + ", ".join(f"matrix.exclude[{k}]" for k in by)
                                               + ", so wearlab check would find no run for it; keep those cells, "
                                               "or read the claim from cells that run"))
    return out


def _unshaped_rates(exp: Experiment, network: NetworkPlan, cells: list[CellPlan]) -> list[Problem]:
    """A cell's link rate where the network is built without one on an htb-shaped link: the
    network's qdiscs are the experiment's links' (plan.shaping builds netem alone where a link has
    no rate), and a cell's links are set on them in place, so there is no htb class to give the
    rate to."""
    out = []
    for c in cells:
        if c.topology is None:
            continue
        for lp, mine in zip(network.links, c.topology.links, strict=True):
            base = lp.link
            if lp.shaper != Shaper.HTB or (base.forward.rate_bps and base.reverse.rate_bps):
                continue
            if mine.forward.rate_bps != base.forward.rate_bps or mine.reverse.rate_bps != base.reverse.rate_bps:
                # the key that set the rate: a rate's, else a profile's (every profile has a rate)
                key = min((k for k in c.values if is_link_key(k) and
                           link_settings.parse_key(k, exp.topology).ends == (base.a, base.b)
                           and k.rsplit(".", 1)[1] in ("rate", "profile")), key=lambda k: k.endswith(".profile"))
                out.append(_at_matrix(exp, key, c.values,
                                      f"{base.name} is shaped by htb and the topology gives it no rate in some "
                                      "direction, so its qdisc has no htb class for a cell's rate: give the link a "
                                      "rate in the topology (the cells' values then replace it)"))
    return out


def _devices(exp: Experiment, problems: list[Problem]) -> dict[str, Device]:
    """Each node's `device:`: the topology's own devices first, then the built-in ones."""
    topo = exp.topology
    known = {**builtin_devices(), **topo.devices}
    out: dict[str, Device] = {}
    for n, node in topo.nodes.items():
        if node.device is None:
            continue
        if node.device not in known:
            problems.append(topo.where.problem(("nodes", n, "device"), f"unknown device '{node.device}'"
                                               f"{did_you_mean(node.device, known)} (devices: {', '.join(sorted(known))}; "
                                               "`wearlab devices` shows them, a topology's devices: adds its own)"))
        elif node.image:
            problems.append(topo.where.problem(("nodes", n, "device"), f"node {n} runs its software in a container "
                                               f"({node.image}), where wearlab's device mechanism cannot reach it"))
        else:
            out[n] = known[node.device]
            problems += _device_media(topo, n, out[n])
    return out


def _device_media(topo, n: str, device: Device) -> list[Problem]:
    """A node whose device has power levels gets energy from the media of its links: each link must
    say what carries it (`medium:`, or a profile that does), or the node would get no radio at all;
    and no medium may take a level below 0 (its radio's current above the level it was measured in)."""
    if device.power is None or not device.power.levels:
        return []
    links = [l for l in topo.links if n in (l.a, l.b)]
    out = [topo.where.problem(("links", l.index), f"node {n} has device {device.name}, whose energy depends on the "
                                                  f"medium of each of its links, and this link to {l.other(n)} declares "
                                                  "none: give it medium: (wifi, bt, ble, wired) or a profile that has one")
           for l in links if l.medium is None]
    media = [l.medium for l in links if l.medium is not None and l.medium.is_radio]
    for radios in dict.fromkeys([*((m,) for m in media), tuple(dict.fromkeys(media))]):
        for bad in negative_levels(device, radios):
            out.append(topo.where.problem(("nodes", n, "device"), f"device {device.name} on "
                                          f"{'+'.join(m.value for m in radios)}: a level below 0 ({bad}); its levels "
                                          "and radio currents contradict each other"))
    return out


def _raise(problems: list[Problem]) -> None:
    if problems:
        unique = list(dict.fromkeys(problems))
        raise InputError(sort_problems(unique))


def _ports(exp: Experiment, workload: type[WorkloadDecl], cells: list[CellPlan], needs: tuple[Need, ...],
           problems: list[Problem]) -> tuple[dict[str, dict[int, str]], ...]:
    """Every TCP port something of wearlab's listens on, per group of cells and node: the
    workload's agents (they run for the whole experiment) and what the group's node kinds run.
    Two uses of one port clash only where they run at once - within a group; groups run one
    after another, their nodes restarted between them."""
    agents: dict[str, dict[int, str]] = {}
    out: list[dict[str, dict[int, str]]] = []

    def use(ports: dict[str, dict[int, str]], node: str, port: int, what: str, cell: CellPlan | None) -> None:
        mine = ports.setdefault(node, {})
        if port in mine and mine[port] != what:
            message = f"port {port} on {node} is wanted twice: by {mine[port]} and by {what}"
            problems.append(_at_option(exp, node, "kind", cell.values if cell else {}, message))
        mine.setdefault(port, what)

    for node, ports in workload.ports(exp.workload, [c.values for c in cells]).items():
        for port, what in ports.items():
            use(agents, node, port, what, None)
    groups: dict[int, CellPlan] = {}
    for c in cells:
        groups.setdefault(c.group, c)   # cells of a group share node settings: its first stands for all
    for c in groups.values():
        ports = {n: dict(ps) for n, ps in agents.items()}
        for n, s in c.nodes.items():
            mine = [x for x in needs if x.node == n]
            for port, what in s.kind.ports(s.options, [x for x in mine if s.kind.accepts(x)]).items():
                use(ports, n, port, what, c)
            crypt = [x for x in mine if isinstance(x, Tcpcrypt)]
            if any(x.side == "outbound" for x in crypt):
                use(ports, n, TCPCRYPTD_OUT, "tcpcryptd (outbound)", c)
            if any(x.side == "inbound" for x in crypt):
                use(ports, n, TCPCRYPTD_IN, "tcpcryptd (inbound)", c)
        out.append(ports)
    return tuple(out)


# -- where a problem was written ----------------------------------------------------------------


def _at_workload(exp: Experiment, key: str, message: str) -> Problem:
    if key in exp.overridden:
        return Problem(COMMAND_LINE, None, f"--set {key}", message)
    return exp.where.problem(("workload", key), message)


def _at_matrix(exp: Experiment, key: str, cell: Mapping[str, Any], message: str) -> Problem:
    """Where the matrix key `key` got its value in `cell`: `--set`, or the value in `matrix:`."""
    if key in exp.overridden:
        return Problem(COMMAND_LINE, None, f"--set {key}", message)
    i = exp.matrix[key].index(cell[key]) if cell.get(key) in exp.matrix.get(key, []) else None
    return exp.where.problem(("matrix", key) + ((i,) if i is not None else ()), message)


def _at_option(exp: Experiment, node: str, option: str, cell: Mapping[str, Any], message: str) -> Problem:
    """Where `node`'s `option` got its value in `cell`: the matrix value, `--set`, the experiment's
    `nodes:`, the topology's node, or - a default - the node's kind where it is chosen."""
    key = f"{node}.{option}"
    kind_key = f"{node}.kind"
    for k in (key, kind_key):
        if k in exp.overridden:
            return Problem(COMMAND_LINE, None, f"--set {k}", message)
    for k in (key, kind_key):
        if k in exp.matrix and k in cell:
            i = exp.matrix[k].index(cell[k]) if cell[k] in exp.matrix[k] else None
            return exp.where.problem(("matrix", k) + ((i,) if i is not None else ()), message)
    for path in (("nodes", node, option), ("nodes", node, "kind")):
        if exp.where.written(path):
            return exp.where.problem(path, message)
    topo = exp.topology
    for path in (("nodes", node, option), ("nodes", node, "kind"), ("nodes", node)):
        if topo.where.written(path):
            return topo.where.problem(path, message)
    return topo.where.problem(("nodes", node), message)

