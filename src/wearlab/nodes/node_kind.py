"""Node kinds at run time: what runs on a node, separate from its role (what forwards).

`role` (wearable, phone, ap, router, server) decides addressing and routing; `kind` decides the
software: `nginx` on a server, a proxy (`relay`, `haproxy`, `command`) on a phone, `host` (nothing
of its own) elsewhere. What a kind declares - roles, options, services, the needs it accepts, its
plan-time checks - is `wearlab.model.declarations.NodeKindDecl`; this class adds the lifecycle:

  prepare() (sysctls, qdiscs: before any traffic) -> start() -> ready() ... stop()

with hooks around each run (run_started/run_ended, run_metrics, take_series), live state and live
requests. A kind gets everything it works with at construction (`NodeContext`: the network, its
settings, its work directory, the run's plan) and the needs the plan found for it; a `Tcpcrypt`
need starts wearlab's tcpcryptd beside whatever the kind runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wearlab.model.declarations import NodeKindDecl
from wearlab.model.needs import Need, Tcpcrypt
from wearlab.nodes.software import KindError
from wearlab.nodes.tcpcrypt import TcpcryptDaemon, key_log_path

if TYPE_CHECKING:
    from wearlab.plan.plan import RunPlan
    from wearlab.realize.changelog import ChangeLog
    from wearlab.realize.linkctl import LinkControl
    from wearlab.realize.netns import Network


@dataclass(frozen=True)
class NodeContext:
    """What a node kind works with."""

    net: Network
    node: str
    settings: dict[str, Any]     # its options, resolved for the cell it starts in
    workdir: Path
    seed: int = 0                # the experiment's: a kind's randomness is seeded from it
    plan: RunPlan | None = None  # the run's plan (None: a kind started on its own, e.g. by a test)
    links: LinkControl | None = None   # the run's links, for kinds that change them (a handover)
    changes: ChangeLog | None = None   # ... and the log every change goes to
    out_dir: Path | None = None        # the experiment's results directory (None: not in a run)
    # The kinds running now, by node (the run's live map): what a kind may read of its neighbours
    # (a wearable's interface selector, the relay's own buffer on its phone).
    peers: Mapping[str, NodeKind] = field(default_factory=dict)


class NodeKind(NodeKindDecl):
    def __init__(self, ctx: NodeContext, needs: list[Need]):
        self.ctx = ctx
        self.net, self.node, self.settings, self.workdir = ctx.net, ctx.node, ctx.settings, ctx.workdir
        self.seed = ctx.seed
        # This run's seed for the kind's per-run draws (plan.seeds: from the run's identity, set by
        # the runner before run_started); None outside a run.
        self.run_seed: int | None = None
        self.needs = [n for n in needs if not isinstance(n, Tcpcrypt)]
        self.tcpcrypt: TcpcryptDaemon | None = None
        self._crypt = [n for n in needs if isinstance(n, Tcpcrypt)]

    # -- what the runner calls ---------------------------------------------------------------
    def bring_up(self) -> None:
        """prepare, start, and tcpcryptd beside the software when a workload needs it."""
        self.prepare()
        self.start()
        if self._crypt:
            device = self.ctx.plan.device_of(self.node) if self.ctx.plan is not None else None
            spec = self.net.topo.nodes.get(self.node) if getattr(self.net, "topo", None) is not None else None
            key_log = None
            if getattr(spec, "tcpcrypt_key_log", False):
                # With the results, where `wearlab decrypt` looks; a kind started outside a run
                # keeps it in its work directory.
                key_log = key_log_path(self.ctx.out_dir or self.workdir, self.node)
            self.tcpcrypt = TcpcryptDaemon(self.net, self.node, self.workdir, self._crypt, device,
                                           require_all=getattr(spec, "tcpcrypt", "opportunistic") == "require",
                                           resumption=bool(getattr(spec, "tcpcrypt_resumption", False))
                                           or any(n.resume for n in self._crypt),
                                           key_log=key_log)
            self.tcpcrypt.start()

    def shut_down(self) -> None:
        if self.tcpcrypt is not None:
            self.tcpcrypt.stop()
        self.stop()

    # -- lifecycle (kinds override) ----------------------------------------------------------
    def prepare(self) -> None:
        """Node settings that must be in place before any traffic (sysctls, qdiscs)."""

    def start(self) -> None:
        """Start the node's software."""

    def ready(self, timeout: float = 15.0) -> None:
        """Return once the node's services accept; raise KindError otherwise."""

    def stop(self) -> None:
        """Stop gracefully and undo what prepare() set up; network teardown kills whatever is left."""

    def version(self) -> str | None:
        return None

    def run_started(self, t0_ns: int) -> None:
        """A run begins (t0_ns: its start, time.time_ns)."""

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
            facts["tcpcrypt"] = {"argv": self.tcpcrypt.argv(), "version": self.tcpcrypt.version(),
                                 "resumption": self.tcpcrypt.resumption}
            if self.tcpcrypt.key_log is not None:
                facts["tcpcrypt"]["key_log"] = str(self.tcpcrypt.key_log)
        image = self.net.topo.nodes[self.node].image
        if image:
            facts["container"] = {"image": image, "id": getattr(self.net.hosts[self.node], "cid", None)}
        return facts
