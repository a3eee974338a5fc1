"""Energy columns for the workloads that have a client and a path (http-get, the stream kinds, page loads):
which of the run's nodes name a device - the client, and the path's first hop when it is not the
server (a phone relaying) - their power for the media they use, and each run's energy from its
phase times (wearlab.measure.energy_model holds the model).

Columns: energy_j (the client's device), energy_handshake_j (http-get: the client's handshake
part), energy_relay_j (the first hop's device); series/energy.csv has each node's states with
seconds, watts and joules. Without devices the columns stay empty and nothing else changes.

A wearable whose flow rides the chunked multipath transport (`interface_policy:` or `multipath:`)
sends over BT and WiFi at different times: its energy follows when each path really carried
(the union of its chunks' flights, from the transport's per-chunk records: RunEnergy.interfaces), not the workload's `path`, and so
does the phone's: it relays only while the BT path carries. energy_bt_active_s and
energy_wifi_active_s say how long each radio carried; a radio the policy keeps on pays its base
power while it carries nothing (energy_radio_on_j: WiFi's, except under `bt`, which switches
WiFi off as Wear OS does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from wearlab.measure import energy_model as model
from wearlab.model.choices import PowerState
from wearlab.model.columns import Metric, Series
from wearlab.model.devices import PowerFigure
from wearlab.model.media import Medium
from wearlab.plan.plan import RunPlan

ENERGY_SERIES = Series("energy", model.ENERGY_SERIES_COLUMNS,
                       doc="nodes with a device: each state's time, power and energy per run (the energy "
                           "model, docs/devices.md)")


def energy_metrics(handshake: bool) -> tuple[Metric, ...]:
    out = [Metric("energy_j", "J", label="energy", summarised=True,
                  doc="the client's device: the energy model applied to the run's phase times (above idle)")]
    if handshake:
        out.append(Metric("energy_handshake_j", "J", label="energy hs",
                          doc="the client's device: the TLS/tcpcrypt handshake's part of energy_j"))
    out.append(Metric("energy_relay_j", "J", label="relay energy", summarised=True,
                      doc="the path's first hop (a phone relaying), when it names a device: its energy for the run; "
                          "over the multipath transport the BT path's phone, for the time BT carried (0 J when "
                          "WiFi carried everything)"))
    out.append(Metric("energy_radio_on_j", "J", label="radios on", better="none",
                      doc="over the multipath transport: the part of energy_j that is the client's radios kept on "
                          "while carrying nothing (their base power, radios.<m>.on: WiFi's under `interface_policy: "
                          "wifi` or `adaptive`, none under `bt`, which switches WiFi off as Wear OS does)"))
    out += [Metric(f"energy_{m}_active_s", "s", label=f"{m} active", better="none",
                   doc=f"over the multipath transport (interface_policy, multipath): the time the client's {m.upper()} "
                       "radio carried the flow (the union of its path's chunk flights, sent to received), the time "
                       "the energy model charges it") for m in ("bt", "wifi")]
    return tuple(out)


class RunEnergy:
    """The powers of a workload's nodes with devices, per path, and each run's energy."""

    def __init__(self, plan: RunPlan, client: str, server: str):
        self.plan, self.client, self.server = plan, client, server
        self._powers: dict[str, tuple[model.NodePower | None, model.NodePower | None]] = {}
        self.problems: dict[str, str] = {}

    def powers(self, path: str) -> tuple[model.NodePower | None, model.NodePower | None]:
        """(client, relay) for a path; None where the node names no device or its device no power."""
        if path not in self._powers:
            to_hop = [e.medium for e in self.plan.link_ends(self.client) if e.peer == path and e.medium]
            relay = path if path != self.server else None
            self._powers[path] = (self._power(self.client, to_hop),
                                  self._power(relay, [e.medium for e in self.plan.link_ends(relay) if e.medium])
                                  if relay else None)
        return self._powers[path]

    def _power(self, node: str, media) -> model.NodePower | None:
        device = self.plan.device_of(node)
        if device is None:
            return None
        try:
            return model.node_power(node, device, media)
        except model.NoPowerModel as e:
            self.problems[node] = str(e)
            return None

    def facts(self, paths: Sequence[str], transport: bool = False) -> dict[str, Any]:
        """For metadata.json: each node's power per state, or why it has no energy. `transport`:
        the client's flow rides the multipath transport (interfaces): its power on each set of
        radios that may carry, and the phone's on the BT link, instead of per workload path."""
        if not transport:
            nodes = {p.node: p.describe() for path in paths for p in self.powers(path) if p is not None}
            return {"model": "E = sum of P(state) x t(state) over the run's phases, plus the tail (docs/devices.md)",
                    "nodes": nodes, "without_energy": dict(self.problems)}
        nodes = {}
        for media in ((Medium.BT,), (Medium.WIFI,), (Medium.BT, Medium.WIFI)):
            p = self._power(self.client, media)
            if p is not None:
                nodes[f"{self.client} on {'+'.join(m.value for m in media)}"] = p.describe()
        phone = next((e.peer for e in self.plan.link_ends(self.client) if e.medium == Medium.BT), None)
        relay = self._power(phone, [e.medium for e in self.plan.link_ends(phone) if e.medium]) if phone else None
        if relay is not None:
            nodes[relay.node] = relay.describe()
        bases = {m.value: f"{f.describe()} ({f.overall_basis}: {f.source})" for m, f in self._radio_bases(None).items()}
        return {"model": "E = sum of P(state) x t(state): each radio's data state for the time its path carried "
                         "(the union of the multipath transport's chunk flights), a tail after each busy stretch; the phone while "
                         "BT carried; each radio the interface policy keeps on, its base power while it carries "
                         "nothing (docs/interface-selection.md)",
                "radio_base": bases, "nodes": nodes, "without_energy": dict(self.problems)}

    def experiment_facts(self, paths: Sequence[str], over_transport: bool) -> dict[str, Any]:
        """For metadata.json: the paths' facts, and beside them (`over_transport`) the transport's
        when some cell's flow rides it (a matrix over `multipath:` mixes both; the kinds running at
        the workload's start are only the first group's)."""
        return {**self.facts(paths), "over_transport": self.facts(paths, transport=True) if over_transport else None}

    def transaction(self, path: str, wire: dict[str, Any], encrypted: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A fetch (http-get): the model on its wire phase times from the client's capture; the
        relaying phone moves bytes from the SYN to the last byte. `app_done_s` (on the capture's
        clock), when given: the client's application read its last byte then - later than the wire
        delivered it when its device pays a cost per byte received - and the client is in its data
        state until then."""
        if wire.get("wire_total_s") is None or wire.get("wire_connect_s") is None:
            return {}, []
        client_end = max(wire["wire_total_s"], wire.get("app_done_s") or 0.0)
        return self._account(
            path,
            lambda tail: model.transaction_phases(wire["wire_connect_s"], wire.get("wire_tls_handshake_s"),
                                                  client_end, encrypted, tail),
            lambda tail: model.relay_phases(wire["wire_total_s"], encrypted, tail))

    def activity(self, path: str, flights: list[tuple[int, int]],
                 encrypted: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A stream: the model on its messages' flights (send -> delivery); the client's and the
        relaying phone's radios carry every message."""
        def phases(tail: float) -> list[tuple[PowerState, float]]:
            return model.activity_phases(flights, encrypted, tail)
        return self._account(path, phases, phases)

    def spans(self, path: str, spans: list[tuple[PowerState, float, float]], total_s: float,
              encrypted: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A page load: the model on its connections' overlapping set-ups, handshakes and
        transfers (model.span_phases); a relaying phone moves bytes for the whole load."""
        return self._account(path, lambda tail: model.span_phases(spans, tail),
                             lambda tail: model.relay_phases(total_s, encrypted, tail))

    def interfaces(self, busy: dict[str, list[tuple[float, float]]], encrypted: bool, span_s: float,
                   radios_on: Iterable[Medium] | None = None,
                   read_s: float | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A flow over the chunked multipath transport: `busy` is each path's (medium name's)
        busy intervals in s (measure.chunk_flights.path_busy: the union of its chunks' flights, from
        both agents' per-chunk records). The client is in its
        data state on the radios busy at each instant (model.interface_phases: one radio's level,
        or both radios' while both carry); the phone on the client's BT link relays - its data
        state, on all its links' media (BT toward the watch, its uplink) - only while BT carries,
        then its tail; while WiFi carries the flow goes past the phone, which spends nothing for
        it. `radios_on`: the client's radios kept on all run (`span_s` long) - the interface
        policy's (InterfacePolicy.radios_on), or, None, every radio of its links (a `multipath:`
        scheduler keeps both paths up); each one whose device gives its base power (radios.<m>.on)
        is charged it for the time it is on but outside its data state and tail
        (model.radio_on_seconds) - over the run, or to the end of the last tail if later - in
        energy_j and apart in energy_radio_on_j. `read_s`: when the client's application read its
        last byte (a device with a cost per byte received), to which the client's data state
        lasts (model.until_read; the radios' active seconds and the phone's relaying stay the
        paths' own)."""
        media_busy = {Medium(name): ivs for name, ivs in busy.items()}
        client_busy = model.until_read(media_busy, read_s) if read_s is not None else media_busy
        row: dict[str, Any] = {f"energy_{m.value}_active_s": round(sum(b - a for a, b in media_busy.get(m, [])), 6)
                               for m in (Medium.BT, Medium.WIFI)}
        rows: list[dict[str, Any]] = []
        every = self._power(self.client, tuple(media_busy))
        if every is not None:
            joules = 0.0
            by_media: dict[tuple[Medium, ...], list[tuple[PowerState, float]]] = {}
            timeline = model.interface_phases(client_busy, encrypted, every.tail_s)
            for media, state, seconds in timeline:
                by_media.setdefault(media, []).append((state, seconds))
            for media, phases in by_media.items():
                power = self._power(self.client, media)
                if power is None:
                    return {}, []
                joules += sum(model.energy(power, phases).values())
                rows += model.series_rows(power, phases)
            bases = self._radio_bases(radios_on)
            base_j = 0.0
            # The window the radios are on in: the run, or to the end of the tail after its last
            # bytes when that is later (the energy above charges that tail).
            last = max((b for ivs in client_busy.values() for a, b in ivs if b > a), default=None)
            window_s = max(span_s, last + every.tail_s) if last is not None else span_s
            for m, seconds in model.radio_on_seconds(window_s, timeline, bases).items():
                watts = bases[m].watts
                base_j += watts * seconds
                rows.append({"node": self.client, "device": every.device, "media": m.value, "state": model.RADIO_ON,
                             "seconds": round(seconds, 9), "watts": watts, "joules": watts * seconds})
            row["energy_j"] = joules + base_j
            row["energy_radio_on_j"] = base_j
        phone = next((e.peer for e in self.plan.link_ends(self.client) if e.medium == Medium.BT), None)
        relay = self._power(phone, [e.medium for e in self.plan.link_ends(phone) if e.medium]) if phone else None
        if relay is not None:
            bt = [(round(a * 1e9), round(b * 1e9)) for a, b in media_busy.get(Medium.BT, [])]
            phases = model.activity_phases(bt, encrypted, relay.tail_s) if bt else []
            row["energy_relay_j"] = sum(model.energy(relay, phases).values())
            rows += model.series_rows(relay, phases)
        return row, rows

    def over_transport(self, client_kind: Any, t0_ns: int, encrypted: bool, end_ns: int | None = None,
                       read_ns: int | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """`interfaces` for a run from t0_ns to end_ns (default: now) whose flow rode the client's
        multipath transport (`client_kind.multipath`): its paths' busy intervals, and the radios
        its interface policy keeps on (its class's `radios_on`; no policy - a scheduler's - both).
        `read_ns`: when the client's application read its last byte (interfaces' read_s)."""
        end = end_ns or time.time_ns()
        busy = client_kind.multipath.busy(t0_ns, end)
        selector = getattr(client_kind, "selector", None)
        radios_on = [Medium(m) for m in selector.policy_class.radios_on] if selector is not None else None
        return self.interfaces(busy, encrypted=encrypted, span_s=(end - t0_ns) / 1e9, radios_on=radios_on,
                               read_s=(read_ns - t0_ns) / 1e9 if read_ns is not None else None)

    def _radio_bases(self, radios_on: Iterable[Medium] | None) -> dict[Medium, PowerFigure]:
        """The client's radios kept on (None: every radio of its links) whose device gives a base
        power (radios.<m>.on), with it."""
        device = self.plan.device_of(self.client)
        if device is None or device.power is None:
            return {}
        on = (tuple(radios_on) if radios_on is not None
              else tuple(dict.fromkeys(e.medium for e in self.plan.link_ends(self.client) if e.medium and e.medium.is_radio)))
        radios = device.power.radios
        return {m: radios[m].on for m in on if m in radios and radios[m].on is not None}

    def _account(self, path: str, client_phases: Callable[[float], list[tuple[PowerState, float]]],
                 relay_phases: Callable[[float], list[tuple[PowerState, float]]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Row values and energy series rows for one run (phases given each node's tail)."""
        client, relay = self.powers(path)
        row: dict[str, Any] = {}
        rows: list[dict[str, Any]] = []
        if client is not None:
            phases = client_phases(client.tail_s)
            joules = model.energy(client, phases)
            row["energy_j"] = sum(joules.values())
            if PowerState.HANDSHAKE in joules:
                row["energy_handshake_j"] = joules[PowerState.HANDSHAKE]
            rows += model.series_rows(client, phases)
        if relay is not None:
            phases = relay_phases(relay.tail_s)
            row["energy_relay_j"] = sum(model.energy(relay, phases).values())
            rows += model.series_rows(relay, phases)
        return row, rows
