"""What a node kind and a workload kind declare (containerlab's idea: small registered types).

These are the declarations the loaders and the plan read - options and parameters, metrics,
series, services, which needs a kind accepts, plan-time checks, the kernel features and ports
it uses - with nothing that runs. The running side subclasses them (`wearlab.nodes.node_kind.NodeKind`,
`wearlab.workloads.workload.Workload`), and `wearlab.catalog` lists every kind once. Model code gets
kinds from a `Catalog` handed to it, never by importing them. `Catalog` (at the end) is the type of
that one list: every node kind and workload kind, each role's default kind, and the multipath
transport's schedulers (`SchedulerDecl`) and a wearable's interface-selection policies
(`InterfacePolicyDecl`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from wearlab.errors import Problem
from wearlab.model.columns import Metric, Ratio, Series
from wearlab.model.features import KernelFeature
from wearlab.model.media import Medium
from wearlab.model.needs import Need, Relay, Service
from wearlab.model.params import ParamSet
from wearlab.model.roles import Role
from wearlab.model.yamlsrc import YamlPath, YamlSource


class TopologyView(Protocol):
    """What a workload's load-time check reads of the topology (model.topology.Topology; the
    topology loader needs the kinds, so the kinds do not import it)."""

    nodes: Mapping[str, Any]

    def neighbors(self, node: str) -> list[str]: ...

    def reachable(self, start: str, goal: str, *, avoiding: tuple[str, ...] = ()) -> bool: ...


class ServiceMissing(LookupError):
    """A kind offers no service matching a request (the plan turns it into an input error)."""


@dataclass(frozen=True)
class LinkEnd:
    """One link of a node as its kind's checks see it: the peer and what carries the link."""

    index: int
    peer: str
    peer_role: Role
    medium: Medium | None       # None: the topology does not say


@dataclass(frozen=True)
class NodeView:
    """What a node kind's plan-time check sees of one node in one cell."""

    name: str
    role: Role
    settings: Mapping[str, Any]          # the kind's options, resolved (defaults filled in)
    links: tuple[LinkEnd, ...]
    cell: Mapping[str, Any]              # the cell's workload parameters
    endpoints: Mapping[str, str]         # the workload's roles -> nodes (client, server)
    schedulers: tuple[str, ...] = ()     # the catalog's multipath schedulers, by name
    # the catalog's interface-selection policies: name -> class (its initial medium, moves_on, transports)
    interface_policies: Mapping[str, type[InterfacePolicyDecl]] = field(default_factory=dict)
    workload: str = ""                   # the workload's kind
    rides_transport: bool = True         # ... and whether its client's TCP may ride the chunked transport
    servers: tuple[str, ...] = ()        # ... and the nodes its client's connections end at (WorkloadDecl.servers)

    def links_of(self, medium: Medium, peer_role: Role) -> list[LinkEnd]:
        return [l for l in self.links if l.medium == medium and l.peer_role == peer_role]


class NodeKindDecl:
    """A node kind's declaration: what runs on a node, separate from its role (what forwards)."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""
    roles: ClassVar[frozenset[Role]] = frozenset(Role)
    options: ClassVar[ParamSet] = ParamSet()
    SERVICES: ClassVar[tuple[Service, ...]] = ()
    ACCEPTS: ClassVar[tuple[type[Need], ...]] = ()     # needs it provides (Relay: it proxies)
    # Whether the kind's software can run inside a container image (a node with `image:`): it
    # starts its programs with Network.run_app, never as wearlab's own Python in the namespace.
    in_container: ClassVar[bool] = False
    series: ClassVar[tuple[Series, ...]] = ()     # what it records per run (take_series)
    metrics: ClassVar[tuple[Metric, ...]] = ()    # what it adds to each run's row (run_metrics)
    # Options it no longer takes -> what to write instead (the error a file using one gets).
    renamed: ClassVar[Mapping[str, str]] = {}
    # The option by which a node of this kind, as a workload's client, chooses its own first hop
    # (a wearable's interface_policy, first_medium): the workload's `path` is then not written.
    first_hop_option: ClassVar[str | None] = None

    @classmethod
    def resolved(cls, options: Mapping[str, Any], catalog: Catalog) -> dict[str, Any]:
        """Plan time: its options with every `auto` made what it stands for (the plan holds what
        runs, not what it was written as). By default: as they are."""
        return dict(options)

    @classmethod
    def first_medium(cls, options: Mapping[str, Any], catalog: Catalog) -> Medium | None:
        """The medium a workload whose client is this node starts on, when the kind chooses it (a
        wearable's `interface_policy:`): the workload's first hop is then the neighbour across
        the node's link of that medium. None: the workload's `path` chooses."""
        return None

    @classmethod
    def accepts(cls, need: Need) -> bool:
        return isinstance(need, cls.ACCEPTS)

    @classmethod
    def proxies(cls) -> bool:
        """Whether it intercepts the connections routed through it (a phone proxy)."""
        return Relay in cls.ACCEPTS

    @classmethod
    def splits(cls, settings: Mapping[str, Any], port: int) -> bool:
        """Whether, with these settings, it terminates every TCP connection routed through it to
        `port` in a proxy of its own, whatever the server (a phone proxy's `intercept:`), rather
        than routing it: what a workload that asks it to relay nothing meets on its path."""
        return False

    @classmethod
    def carries_over_transport(cls, settings: Mapping[str, Any]) -> bool:
        """Whether, with these settings, the TCP its applications open rides the chunked multipath
        transport (a wearable's `multipath:`, or an interface policy by `chunked`): it then ends
        at the transport's agent, on the node's loopback."""
        return False

    @classmethod
    def service(cls, protocol: str, **attrs: str) -> Service:
        for s in cls.SERVICES:
            if s.matches(protocol, **attrs):
                return s
        wanted = protocol + "".join(f" {k}={v}" for k, v in attrs.items())
        raise ServiceMissing(f"kind {cls.name} offers no {wanted} service "
                             f"(it offers: {', '.join(s.describe() for s in cls.SERVICES) or 'none'})")

    @classmethod
    def check(cls, view: NodeView) -> list[tuple[str, str]]:
        """Plan time: problems of this node in this cell, as (option or "", message)."""
        return []

    @classmethod
    def features(cls, settings: Mapping[str, Any]) -> set[KernelFeature]:
        """Kernel features its software needs with these settings."""
        return set()

    @classmethod
    def ports(cls, settings: Mapping[str, Any], needs: list[Need]) -> dict[int, str]:
        """TCP ports it listens on in its node, and what for."""
        return {s.port: f"{cls.name} {s.protocol}" for s in cls.SERVICES}

    @classmethod
    def commands(cls, settings: Mapping[str, Any], needs: list[Need]) -> list[str]:
        """Shell lines it runs in its node before any traffic (sysctls, iptables), planned from its
        settings and needs: what it runs and what `wearlab plan --commands` shows."""
        return []


class WorkloadFields(BaseModel):
    """Base for a workload's fixed fields: unknown keys are errors. `kind` is the YAML key that
    chose the workload; the loader dispatches on it to the class whose `name` it is, so a workload
    writes its name once (`WorkloadDecl.name`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str


class PlanView:
    """What a workload's needs() may ask of the plan being made (the plan implements it)."""

    def address_of(self, node: str) -> str:
        raise NotImplementedError

    def kind_of(self, node: str, cell: Mapping[str, Any]) -> type[NodeKindDecl]:
        raise NotImplementedError


class WorkloadDecl:
    """A workload kind's declaration (Flent's runners): what it is told and what it reports.

    - `Fields`: fixed for the whole experiment (client and server node, ...);
    - `params`: what a matrix may vary, each with its one normaliser;
    - `metrics`, `series`, `ratios`: its results (model.columns);
    - checks at load time (`check`) and the plan's questions (`needs`, `features`, `ports`).
    """

    name: ClassVar[str]       # what `workload: {kind: ...}` names, written once
    doc: ClassVar[str] = ""
    Fields: ClassVar[type[BaseModel]]
    params: ClassVar[ParamSet] = ParamSet()
    metrics: ClassVar[tuple[Metric, ...]] = ()
    series: ClassVar[tuple[Series, ...]] = ()
    ratios: ClassVar[tuple[Ratio, ...]] = ()
    headline: ClassVar[tuple[str, ...]] = ()  # metrics a progress line shows (seconds), first present
    # Its client's agent charges a device's platform cost per byte received (nodes.devicecpu's
    # per_byte): such a client receives no faster than its device allows (the estimate paces it so).
    client_pays_per_byte: ClassVar[bool] = False
    # Its client's TCP may ride a wearable's chunked multipath transport (`multipath:`, or an
    # interface policy by `chunked`): it runs through the transport's agent, and its results say
    # what each path carried (energy per radio from the chunks' flights, RunEnergy.over_transport).
    rides_transport: ClassVar[bool] = False

    @classmethod
    def captured(cls, plan: Any) -> set[str]:
        """The nodes whose packets a run captures: tcpdump in each one's namespace, beside its
        software (a RunPlan is given). A container node under uml runs on the host, outside the
        guest, where wearlab starts no process beside it: run.start refuses that before anything
        is made."""
        return set()

    @classmethod
    def check(cls, fields: BaseModel, fixed: dict[str, Any], matrix: dict[str, list[Any]],
              where: dict[tuple[str, Any], YamlPath], topo: TopologyView, src: YamlSource) -> list[Problem]:
        """Load time: problems between parameters and the topology. May fill computed defaults
        into `fixed` (e.g. the client's first hop)."""
        return []

    @classmethod
    def expand_cell(cls, cell: dict[str, Any]) -> dict[str, Any]:
        """Plan time: a cell with what its presets stand for filled in (e.g. the stream's `app:`),
        before parameters that do not apply are blanked. The default: the cell as it is."""
        return cell

    @classmethod
    def run_length(cls, cell: Mapping[str, Any]) -> float | None:
        """How long one run of `cell` lasts by design (s), if the workload knows: a timeline's
        events after it could never happen."""
        return None

    @classmethod
    def endpoints(cls, fields: BaseModel) -> dict[str, str]:
        """Role name -> node name of the nodes this workload runs on (e.g. client, server)."""
        return {}

    @classmethod
    def servers(cls, fields: BaseModel, cells: list[Mapping[str, Any]]) -> tuple[str, ...]:
        """The nodes the client's connections end at, over all cells (where the chunked
        transport's server agents run). The default: the `server` endpoint, if there is one."""
        server = cls.endpoints(fields).get("server")
        return (server,) if server else ()

    @classmethod
    def needs(cls, fields: BaseModel, cells: list[Mapping[str, Any]], plan: PlanView) -> list[Need]:
        """What the cells need of nodes: files to serve, connections a first hop should proxy,
        tcpcrypt daemons. Raise ServiceMissing when a node's kind cannot serve a cell."""
        return []

    @classmethod
    def features(cls, cells: list[Mapping[str, Any]]) -> set[KernelFeature]:
        return set()

    @classmethod
    def ports(cls, fields: BaseModel, cells: list[Mapping[str, Any]]) -> dict[str, dict[int, str]]:
        """node -> {port: what} its own agents listen on."""
        return {}

    @classmethod
    def describe_cell(cls, cell: Mapping[str, Any]) -> str:
        return " ".join(p.shown(cell[p.name]) for p in cls.params
                        if cell.get(p.name) not in (None, "", "default"))


class SchedulerDecl(Protocol):
    """A multipath scheduler as the catalog lists it (the running class:
    `wearlab.nodes.multipath_schedulers.Scheduler`): its name, as `multipath:` names it, and a
    line of doc. Its module and class are what the transport's agent process imports."""

    name: ClassVar[str]
    doc: ClassVar[str]
    __module__: str
    __qualname__: str


class InterfacePolicyDecl(Protocol):
    """A wearable's interface-selection policy as the catalog lists it (the running class:
    `wearlab.nodes.interface_policies.InterfacePolicy`): its name, as `interface_policy:` names it,
    a line of doc, the medium its flow starts on (`initial`: the workload's first hop follows it),
    what moves the flow (`moves_on`) and the transports that can carry it (`transports`, values of
    PolicyTransport, the first the default); its module and class are what the run imports."""

    name: ClassVar[str]
    doc: ClassVar[str]
    initial: ClassVar[str]
    moves_on: ClassVar[str]
    transports: ClassVar[tuple[str, ...]]
    __module__: str
    __qualname__: str


@dataclass(frozen=True)
class Catalog:
    node_kinds: Mapping[str, type[NodeKindDecl]]
    workloads: Mapping[str, type[WorkloadDecl]]
    default_kinds: Mapping[Role, str]
    schedulers: Mapping[str, type[SchedulerDecl]] = field(default_factory=dict)
    interface_policies: Mapping[str, type[InterfacePolicyDecl]] = field(default_factory=dict)

    @classmethod
    def of(cls, node_kinds: list[type[NodeKindDecl]], workloads: list[type[WorkloadDecl]],
           default_kinds: Mapping[Role, str], schedulers: list[type[SchedulerDecl]] = (),
           interface_policies: list[type[InterfacePolicyDecl]] = ()) -> Catalog:
        kinds = {k.name: k for k in node_kinds}
        loads = {w.name: w for w in workloads}
        scheds = {s.name: s for s in schedulers}
        policies = {p.name: p for p in interface_policies}
        if len(kinds) != len(node_kinds) or len(loads) != len(workloads) or len(scheds) != len(schedulers) \
                or len(policies) != len(interface_policies):
            raise ValueError("two kinds share a name")
        missing = set(Role) - set(default_kinds)
        if missing or not set(default_kinds.values()) <= set(kinds):
            raise ValueError(f"every role needs a default kind from the catalog (missing: {missing})")
        if "none" in scheds:
            raise ValueError("a scheduler cannot be called 'none' (multipath: none turns the transport off)")
        if "none" in policies:
            raise ValueError("an interface policy cannot be called 'none' (interface_policy: none turns it off)")
        return cls(kinds, loads, dict(default_kinds), scheds, policies)

    def extended(self, node_kinds: list[type[NodeKindDecl]] = (), workloads: list[type[WorkloadDecl]] = (),
                 default_kinds: Mapping[Role, str] | None = None,
                 schedulers: list[type[SchedulerDecl]] = (),
                 interface_policies: list[type[InterfacePolicyDecl]] = ()) -> Catalog:
        """This catalog plus more kinds: how kinds written outside `wearlab.catalog` (a test's
        toy kinds, an extension of one's own, a multipath scheduler or interface policy of one's own)
        are registered.
        Hand the result to `load_experiment(path, catalog)` as the CLI hands `CATALOG`. A name
        already in the catalog is an error (ValueError), as in `Catalog.of`; `default_kinds`
        replaces roles' defaults."""
        return Catalog.of([*self.node_kinds.values(), *node_kinds], [*self.workloads.values(), *workloads],
                          {**self.default_kinds, **(default_kinds or {})},
                          [*(self.schedulers or {}).values(), *schedulers],
                          [*(self.interface_policies or {}).values(), *interface_policies])
