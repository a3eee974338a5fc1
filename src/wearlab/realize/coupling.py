"""2.4 GHz coexistence applied live: while a node's BT/BLE link and its 2.4 GHz WiFi link both carry
traffic, each loses its configured fraction of rate (model.interference; defaults seed 003 section
5), and gets it back when either stops.

`CouplingRule` is the decision, pure (tests feed it counter samples): per window, each coupled
link's rate from its root qdiscs' byte counters (both directions together), active above the
threshold; a link is reduced while any coupling it belongs to has both links active.
`InterferenceController` reads the counters every window (LinkControl.counters: `tc -s -j` on a
monitor batch, never delaying a change) and applies the rule as any link change: `tc qdisc change`
in place through LinkControl.apply, each change a row of the run's timeline (source
`interference`). Reaction time: a flow that starts is seen after at most one full window, and its
change takes one tc exchange, so <= 2 windows.

A reduction scales the rate each direction has when it starts (the topology's, or a timeline's);
the restore puts that rate back. Should anyone else change the link meanwhile (a timeline, a live
`wearlab link set`, the end-of-run reset), the rule forgets its reduction and starts from the new
rate at the next window.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from wearlab.model.interference import Interference
from wearlab.model.media import Medium
from wearlab.model.shape import ShapeSpec
from wearlab.model.timeline import LinkChange

Pair = tuple[str, str]


def _dirs(link: Pair) -> tuple[Pair, Pair]:
    a, b = link
    return (a, b), (b, a)


@dataclass
class Decision:
    link: Pair
    reduce: bool
    why: str


@dataclass
class CouplingRule:
    """Which coupled links are reduced, from byte counters sampled at times t (seconds)."""

    rule: Interference
    media: dict[Pair, Medium]                       # each coupled link's medium
    reduced: set[Pair] = field(default_factory=set)
    rates: dict[Pair, float] = field(default_factory=dict)   # the last window's bit/s per link
    _last: tuple[float, dict[str, int]] | None = None

    @classmethod
    def of(cls, rule: Interference, links) -> CouplingRule:
        """links: the topology's (resolved) links."""
        wanted = {c.bt for c in rule.couplings} | {c.wifi for c in rule.couplings}
        return cls(rule, {(l.a, l.b): l.medium for l in links if (l.a, l.b) in wanted})

    def step(self, t: float, sent_bytes: dict[str, int]) -> list[Decision]:
        """sent_bytes: "src->dst" -> bytes its root qdisc has sent so far. Returns the links whose
        state changes now (the first sample only sets the origin)."""
        last, self._last = self._last, (t, dict(sent_bytes))
        if last is None or t <= last[0]:
            return []
        dt = t - last[0]
        for link in self.media:
            # A counter that went back (a qdisc made anew) counts from zero.
            moved = sum(max(0, sent_bytes.get(f"{s}->{d}", 0) - last[1].get(f"{s}->{d}", 0)) for s, d in _dirs(link))
            self.rates[link] = moved * 8 / dt
        active = {link: r > self.rule.active_above_bps for link, r in self.rates.items()}
        target: dict[Pair, str] = {}
        for c in self.rule.couplings:
            if active.get(c.bt) and active.get(c.wifi):
                why = (f"{c.node}: {'-'.join(c.bt)} {self.rates[c.bt] / 1e3:.0f} kbit/s and {'-'.join(c.wifi)} "
                       f"{self.rates[c.wifi] / 1e3:.0f} kbit/s share 2.4 GHz")
                target.setdefault(c.bt, why)
                target.setdefault(c.wifi, why)
        out = []
        for link in self.media:
            if link in target and link not in self.reduced:
                self.reduced.add(link)
                out.append(Decision(link, True, target[link]))
            elif link not in target and link in self.reduced:
                self.reduced.discard(link)
                idle = [f"{'-'.join(l)} {self.rates[l] / 1e3:.0f} kbit/s" for l in self.media if not active[l]]
                out.append(Decision(link, False, "coexistence ended: " + (", ".join(idle) or "no coupling active")))
        return out

    def forget(self, link: Pair) -> None:
        """Someone else changed the link: it is not reduced by us any more."""
        self.reduced.discard(link)

    def loss_pct(self, link: Pair) -> float:
        return self.rule.loss_pct(self.media[link])


class InterferenceController:
    """Runs a CouplingRule on a built network's LinkControl, logging to its ChangeLog."""

    SOURCE = "interference"

    def __init__(self, links, changes, rule: Interference, topo_links):
        self.links, self.changes, self.interference = links, changes, rule
        self.rule = CouplingRule.of(rule, topo_links)
        self.base: dict[Pair, int] = {}        # direction -> its rate before the reduction
        self.applied: dict[Pair, int] = {}     # direction -> the reduced rate we set
        self.errors: list[str] = []
        self.count = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="interference", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            while True:
                counters = self.links.counters(only={d for link in self.rule.media for d in _dirs(link)})
                self.tick(time.monotonic(), {d: c["bytes"] for d, c in counters.items()})
                if self._stop.wait(self.interference.window_s):
                    return
        except Exception as e:  # noqa: BLE001 - recorded in the metadata; the links keep their last shape
            self.errors.append(str(e)[:300])

    def tick(self, t: float, sent_bytes: dict[str, int]) -> None:
        for link in list(self.rule.reduced):
            if any(self.links.current[d].rate_bps != self.applied.get(d) for d in _dirs(link)):
                self.rule.forget(link)
                for d in _dirs(link):
                    self.applied.pop(d, None)
        for decision in self.rule.step(t, sent_bytes):
            self._apply(decision)

    def _apply(self, decision: Decision) -> None:
        link = decision.link
        for d in _dirs(link):
            if decision.reduce:
                base = self.base[d] = self.links.current[d].rate_bps
                rate = self.applied[d] = max(1, round(base * (1 - self.rule.loss_pct(link) / 100)))
            else:
                rate = self.base.pop(d, self.links.current[d].rate_bps)
                self.applied.pop(d, None)
            what = (f"-{self.rule.loss_pct(link):g} %: {decision.why}" if decision.reduce
                    else decision.why)
            change = LinkChange(0.0, link, (d,), "set", ShapeSpec.model_validate({"rate": f"{rate}bit"}),
                                origin=f"interference: {what}")
            applied = self.links.apply(change)
            self.changes.add(applied, change, self.SOURCE)
            self.count += 1

    def record(self) -> dict[str, Any]:
        """For the run's metadata."""
        return {**self.interference.to_record(), "changes": self.count, "errors": list(self.errors)}
