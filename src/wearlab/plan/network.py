"""The network part of a plan: every link with its medium and how each direction is shaped, and
the addresses and routes. Computed from a topology alone, so a network can be built (and tested)
without an experiment; `realize.network.build` reads nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wearlab.model.choices import Shaper
from wearlab.model.media import Medium
from wearlab.model.shape import Shape
from wearlab.model.topology import Link, Topology
from wearlab.plan.addressing import AddressPlan, plan_addresses


@dataclass(frozen=True)
class LinkPlan:
    link: Link
    shaper: Shaper          # the run's, except where a wearable's BT radio sleeps on it (htb)

    @property
    def name(self) -> str:
        return self.link.name

    @property
    def medium(self) -> Medium | None:
        return self.link.medium

    def shape(self, src: str, dst: str) -> Shape:
        return self.link.shape(src, dst)

    def to_document(self) -> dict[str, Any]:
        l = self.link
        return {"link": l.name, "medium": l.medium.value if l.medium else None, "profile": l.profile,
                "shaper": self.shaper.value, f"{l.a}->{l.b}": l.forward.to_document(),
                f"{l.b}->{l.a}": l.reverse.to_document()}


@dataclass(frozen=True)
class NetworkPlan:
    topology: Topology
    addresses: AddressPlan
    links: tuple[LinkPlan, ...]
    shaper: Shaper

    def link(self, a: str, b: str) -> LinkPlan:
        for lp in self.links:
            if {lp.link.a, lp.link.b} == {a, b}:
                return lp
        raise KeyError(f"no link between {a} and {b}")

    def needs_netem(self) -> bool:
        return any(l.forward.needs_netem() or l.reverse.needs_netem() or l.forward.rate_bps or l.reverse.rate_bps
                   for l in self.topology.links)


def plan_network(topo: Topology, shaper: Shaper | str = Shaper.NETEM, radio_nodes: frozenset[str] = frozenset()
                 ) -> NetworkPlan:
    """`radio_nodes`: wearables whose BT radio sleeps in some cell. Their blackouts are held in a
    plug below netem, and the rate limit must come after the plug (htb above netem), so the
    backlog drains at the link's rate when the radio wakes instead of leaving at once: the
    blackout's time is lost, as on a real radio. So their BT links are shaped with htb."""
    shaper = Shaper(shaper)
    links = tuple(LinkPlan(l, Shaper.HTB if l.medium == Medium.BT and {l.a, l.b} & radio_nodes else shaper)
                  for l in topo.links)
    return NetworkPlan(topology=topo, addresses=plan_addresses(topo), links=links, shaper=shaper)
