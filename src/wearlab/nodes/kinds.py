"""Node kinds: what runs on a node, separate from its role (what forwards).

`role` (wearable, phone, ap, router, server) decides addressing and routing; `kind` decides the
software: `nginx` on a server, a proxy (`relay`, `haproxy`, `command`) on a phone, `host` (nothing
of its own) elsewhere. A node says `kind:` in the topology (or an experiment's `nodes:`), else
it gets its role's default. A kind is a small registered class (containerlab's idea) with:

- `roles`: the roles it may run on; `options`: its settings, each a declared `Param`;
- `services`: what it offers once started (protocol, port, attributes), declared up front so
  workloads can ask for "https with an ECDSA certificate" instead of a port number;
- a lifecycle: `configure(needs)` (what the workloads need of it), `prepare()` (sysctls, qdiscs:
  before any traffic), `start()`, `ready()`, `stop()`, `version()`, `facts()`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from wearlab.errors import EnvironmentProblem
from wearlab.model.params import ParamSet
from wearlab.model.roles import Role

if TYPE_CHECKING:
    from wearlab.realize.network import Network


@dataclass(frozen=True)
class Service:
    """Something a node offers on the network."""

    protocol: str                        # "http", "https", "tcp"
    port: int
    attrs: tuple[tuple[str, str], ...] = ()

    def matches(self, protocol: str, **attrs: str) -> bool:
        return self.protocol == protocol and all(dict(self.attrs).get(k) == v for k, v in attrs.items())


@dataclass(frozen=True)
class Need:
    """What a workload needs of one node; a kind that cannot provide it says so."""

    node: str


@dataclass(frozen=True)
class Files(Need):
    """Serve generated files of these sizes (seeded, incompressible)."""

    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Relay(Need):
    """Proxy connections that the node's clients open to (server address, port)."""

    server: str = ""
    address: str = ""
    port: int = 0


class KindError(EnvironmentProblem):
    """A node kind cannot do what was asked of it: a need it does not provide, software that
    exits or never listens. Exit status 2, like any machine that cannot do what was asked."""


class NodeKind:
    name: ClassVar[str]
    doc: ClassVar[str] = ""
    roles: ClassVar[frozenset[Role]] = frozenset(Role)
    options: ClassVar[ParamSet] = ParamSet()
    SERVICES: ClassVar[tuple[Service, ...]] = ()
    # Whether the kind's software can run inside a container image (a node with `image:`): it
    # starts its programs with Network.run_app, never as wearlab's own Python in the namespace.
    in_container: ClassVar[bool] = False
    tcpcrypt = None  # a nodes.tcpcrypt.TcpcryptDaemon beside the software, when a workload needs it
    series: ClassVar[tuple] = ()    # workloads.base.Series this kind records per run (take_series)
    metrics: ClassVar[tuple] = ()   # workloads.base.Metric this kind adds to each run's row (run_metrics)

    def __init__(self, net: Network, node: str, options: dict[str, Any], workdir: Path, *, seed: int = 0):
        self.net, self.node, self.settings, self.workdir, self.seed = net, node, options, workdir, seed
        self.needs: list[Need] = []

    # -- lifecycle ---------------------------------------------------------------------------
    def configure(self, needs: list[Need]) -> None:
        for need in needs:
            if not self.accepts(need):
                raise KindError(f"node {self.node} (kind {self.name}) cannot provide "
                                f"{type(need).__name__.lower()} for this workload")
        self.needs = list(needs)

    def accepts(self, need: Need) -> bool:
        return False

    def prepare(self) -> None:
        """Node settings that must be in place before any traffic (sysctls, qdiscs)."""

    def start(self) -> None:
        """Start the node's software."""

    def ready(self, timeout: float = 15.0) -> None:
        """Return once the node's services accept; raise KindError otherwise."""

    def stop(self) -> None:
        """Stop gracefully; network teardown kills whatever is left."""

    def version(self) -> str | None:
        return None

    def run_started(self, t0_ns: int) -> None:
        """A run begins (t0_ns: its start, time.time_ns); `self.ctx` is the run's context."""

    def run_ended(self) -> None:
        """The run's workload is done (before the links go back to the topology's)."""

    def live(self) -> dict[str, Any]:
        """Its state for a live view (called from another thread)."""
        return {}

    def controls(self, action: str) -> bool:
        """Whether it answers live `action` requests (`wearlab radio`, `wearlab handover`)."""
        return False

    def control(self, action: str, arg: str | None) -> str:
        """Carry out a live request; returns what happened (one line)."""
        raise KindError(f"kind {self.name} takes no {action}")

    def run_metrics(self) -> dict[str, Any]:
        """Values of its declared metrics for the run that just ended."""
        return {}

    def take_series(self, t0_ns: int) -> dict[str, list[dict[str, Any]]]:
        """Rows of its declared series since the last call, times from t0_ns (the run's start)."""
        return {}

    def facts(self) -> dict[str, Any]:
        """What metadata.json records about this node's software."""
        facts = {"kind": self.name, "settings": self.settings, "version": self.version()}
        if self.tcpcrypt is not None:
            facts["tcpcrypt"] = {"argv": self.tcpcrypt.argv(), "version": self.tcpcrypt.version()}
        image = self.net.topo.nodes[self.node].image
        if image:
            facts["container"] = {"image": image, "id": getattr(self.net.hosts[self.node], "cid", None)}
        return facts

    # -- services ----------------------------------------------------------------------------
    @classmethod
    def service(cls, protocol: str, **attrs: str) -> Service:
        for s in cls.SERVICES:
            if s.matches(protocol, **attrs):
                return s
        wanted = protocol + "".join(f" {k}={v}" for k, v in attrs.items())
        raise KindError(f"kind {cls.name} offers no {wanted} service "
                        f"(it offers: {', '.join(s.protocol + ':' + str(s.port) for s in cls.SERVICES) or 'none'})")


def listening_ports(net: Network, node: str) -> set[int]:
    """TCP ports something listens on in `node` (ss -Htln)."""
    out = net.run(node, ["ss", "-Htln"]).stdout
    return {int(l.split()[3].rsplit(":", 1)[1]) for l in out.splitlines() if l.strip()}


def wait_listening(net: Network, node: str, ports: set[int], what: str, timeout: float, proc=None) -> None:
    """Return once every port accepts in `node`; KindError when `proc` died or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ports <= listening_ports(net, node):
            return
        if proc is not None and proc.poll() is not None:
            raise KindError(f"{what} on {node} exited with status {proc.returncode} before listening on "
                            f"{', '.join(map(str, sorted(ports)))}")
        time.sleep(0.05)
    raise KindError(f"{what} on {node} is not listening on {', '.join(map(str, sorted(ports)))} "
                    f"after {timeout:.0f} s")


REGISTRY: dict[str, type[NodeKind]] = {}
DEFAULT_KIND: dict[Role, str] = {
    Role.WEARABLE: "wearable", Role.PHONE: "relay", Role.AP: "host", Role.ROUTER: "host", Role.SERVER: "nginx",
}


def register(cls: type[NodeKind]) -> type[NodeKind]:
    REGISTRY[cls.name] = cls
    return cls


def node_kinds() -> dict[str, type[NodeKind]]:
    # Importing the modules registers their kinds.
    from wearlab.nodes import host as _host, nginx as _nginx, proxies as _proxies, wearable as _wearable  # noqa: F401
    return REGISTRY


@dataclass(frozen=True)
class NodeSettings:
    """A node's kind and its option values, resolved (defaults filled in)."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)
