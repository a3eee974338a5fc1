"""What a workload gets to work with during an experiment: the plan, the live network, the node
kinds running on it, captures, routes, and where its files go. The runner makes it; workloads
only use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from wearlab.measure.capture import LOOPBACK, ClientCapture

if TYPE_CHECKING:
    from wearlab.nodes.node_kind import NodeKind
    from wearlab.plan.plan import RunPlan
    from wearlab.plan.seeds import RunSeeds
    from wearlab.realize.netns import Network


@dataclass
class WorkloadContext:
    plan: RunPlan
    net: Network
    out_dir: Path
    nodes: dict[str, NodeKind] = field(default_factory=dict)         # the kinds running now, by node
    captures: dict[str, ClientCapture] = field(default_factory=dict)
    routes: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, destination) -> via
    run_start_ns: int | None = None  # time.time_ns() at the run's start: t = 0 of its series and timeline
    seeds: RunSeeds | None = None    # the run's seeds (plan.seeds): a workload's own draws use seeds.workload()

    @property
    def timeout_s(self) -> float:
        return self.plan.timeout_s

    def address(self, node: str) -> str:
        """The node's address as others reach it (its first interface)."""
        return self.plan.addresses.address_of(node)

    def capture(self, node: str, snaplen: int = 0) -> ClientCapture:
        """One capture of all of `node`'s interfaces for the whole experiment (kept in captures/);
        snaplen 0 keeps whole packets. A node whose apps' TCP rides the multipath transport in
        any cell is captured on its loopback too, where their connections end (at the agent): the
        capture is made once, before the cells of other node settings run."""
        if node not in self.captures:
            intfs = [i.name for i in self.plan.addresses.interfaces[node]]
            if self.carried_in_any_cell(node):
                intfs.append(LOOPBACK)
            self.captures[node] = ClientCapture(self.net, node, intfs, self.out_dir / "captures", snaplen=snaplen)
        return self.captures[node]

    def carried_in_any_cell(self, node: str) -> bool:
        """Whether `node`'s apps' TCP rides the multipath transport in some cell of the plan (the
        kinds running now are one group's)."""
        return any(c.nodes[node].kind.carries_over_transport(c.nodes[node].options) for c in self.plan.cells)

    def transport(self, node: str):
        """The multipath transport `node`'s apps' TCP rides (its wearable kind's
        MultipathEndpoints: `multipath:` or an `interface_policy:` by `chunked`), or None."""
        return getattr(self.nodes.get(node), "multipath", None)

    def select_route(self, node: str, destination: str, via: str) -> None:
        """Send `node`'s packets for `destination` through its neighbour `via` (only when it
        changes). A phone on that path proxies if its kind intercepts, else it routes."""
        if self.routes.get((node, destination)) == via:
            return
        dest_ip = self.address(destination)
        hop = self.plan.addresses.interface_to(node, via)
        self.net.sh(node, f"ip route replace {dest_ip}/32 via {hop.peer_ip} dev {hop.name}")
        self.routes[(node, destination)] = via

    def workdir(self, name: str) -> Path:
        d = self.net.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d
