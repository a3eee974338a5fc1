"""The energy model: what a run costs the battery of each node that names a device.

    E(node, run) = sum over states s of P(node, s) x t(s)

The states are seed 000's phases of a transaction (model.choices.PowerState): the TCP handshake
(connect), the TLS or tcpcrypt handshake, data exchange (plaintext or encrypted), and the tail -
high-power idle after the last byte, for the device's fixed tail duration. t(s) are the run's
own measured phase times (http-get: from the capture; streams: the union of its messages' flight
times, send to delivery); P(node, s) are the device's power levels (model.devices.Power):

    P(node, s) = level(s) - radio(m) for each medium m of measured_on the node does not use
                          + radio(m) for each medium m the node's links use beyond measured_on

i.e. a level measured over one medium (seed 000's watch: WiFi) moves to another by swapping the
radio's own active power (power_profile.xml currents). The tail is taken as it was measured,
whatever the medium (seed 000: independent of the protocol above). Energy is above the idle
baseline, as seed 000 reports it (background deducted). Over the multipath transport a radio
that the interface policy keeps on is charged its base power (radios.<m>.on, when the device
gives it) for the time it is on but carrying nothing (radio_on_seconds); the baseline then
holds no radio whose base the device gives (lg-g-watch-r gives WiFi's: its baseline is BT
connected and WiFi off, Wear OS's default).

Nothing is taken silently: every level a device does not give (connect, data_encrypted) was filled
in by model.devices as `assumed` with its reason; each state's power here carries its basis and
every assumption behind it (the level's, the radios' currents and voltages), which metadata.json
and `wearlab devices` show; a level that moving to another medium would make negative is an input
error (NegativePower), never clamped to 0.

What it cannot see: a real radio (no RSSI, retransmissions at the PHY, power-save polling, BT
sniff's own savings), the screen, DVFS beyond what the levels average, a CPU busier than the
measured transfers. It is a model applied to measured times, exact given both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from wearlab.measure.intervals import union
from wearlab.model.choices import PowerState
from wearlab.model.devices import Device, radio_swaps
from wearlab.model.media import Medium

ACTIVE = (PowerState.CONNECT, PowerState.HANDSHAKE, PowerState.DATA, PowerState.DATA_ENCRYPTED)
# series/energy.csv's state for a radio on but carrying nothing (its base power: radios.<m>.on)
RADIO_ON = "radio_on"
ENERGY_SERIES_COLUMNS = ("node", "device", "media", "state", "seconds", "watts", "joules")


class NoPowerModel(ValueError):
    """The device lacks a figure the model needs (said in the run's metadata; energy left empty)."""


class NegativePower(NoPowerModel):
    """A level minus the radio it was measured with is below 0: the device's figures contradict
    each other for this medium (an input error: the plan reports it at the node's device)."""


@dataclass(frozen=True)
class NodePower:
    """One node's power per state, in W, for the media its links use; per state its basis
    (measured / derived / fitted / assumed: an assumption anywhere makes it one) and how it is
    made (the level, the radios taken away and added, each with its basis)."""

    node: str
    device: str
    media: tuple[Medium, ...]
    watts: dict[PowerState, float]
    tail_s: float
    basis: dict[PowerState, str] = field(default_factory=dict)
    how: dict[PowerState, str] = field(default_factory=dict)
    assumed: dict[PowerState, tuple[str, ...]] = field(default_factory=dict)

    def describe(self) -> dict[str, object]:
        return {"node": self.node, "device": self.device, "media": [m.value for m in self.media],
                "watts": {s.value: w for s, w in self.watts.items()}, "tail_s": self.tail_s,
                "basis": {s.value: b for s, b in self.basis.items()},
                "how": {s.value: h for s, h in self.how.items()},
                "assumed": {s.value: list(a) for s, a in self.assumed.items() if a}}


def node_power(node: str, device: Device, media: Iterable[Medium]) -> NodePower:
    p = device.power
    if p is None or not p.levels:
        raise NoPowerModel(f"device {device.name} has no power levels")
    radios = tuple(dict.fromkeys(m for m in media if m.is_radio))
    try:
        swaps = [(sign, m.value, r) for sign, m, r in radio_swaps(p, radios)]
    except KeyError as e:
        m = e.args[0]
        if m in p.measured_media:
            raise NoPowerModel(f"device {device.name}: levels measured on {m.value}, which node {node} does not "
                               f"use, and no radios.{m.value} to take away") from None
        raise NoPowerModel(f"device {device.name}: node {node} uses {m.value}, and the device has no "
                           f"radios.{m.value}") from None
    missing = [s.value for s in (*ACTIVE, PowerState.TAIL) if s not in p.levels]
    if missing:   # model.devices fills connect and data_encrypted in (assumed); a Power built by hand may not
        raise NoPowerModel(f"device {device.name} has no level for {', '.join(missing)}")
    watts: dict[PowerState, float] = {}
    basis: dict[PowerState, str] = {}
    how: dict[PowerState, str] = {}
    assumed: dict[PowerState, tuple[str, ...]] = {}
    for s in ACTIVE:
        f = p.levels[s]
        w = f.watts + sum(sign * r.watts for sign, _, r in swaps)
        parts = [f"{f.describe()} ({f.overall_basis})"] + [
            f"{'-' if sign < 0 else '+'} {m} radio {r.watts * 1e3:.4g} mW ({r.overall_basis})" for sign, m, r in swaps]
        why = f.assumptions + tuple(a for _, _, r in swaps for a in r.assumptions)
        if w < 0:
            raise NegativePower(f"device {device.name} on {'+'.join(m.value for m in radios) or 'no radio'}: its "
                                f"{s.value} level comes to {w * 1e3:.4g} mW ({' '.join(parts)}): a level below its "
                                "radio's own power; give levels and radio currents that agree")
        watts[s], how[s], assumed[s] = w, " ".join(parts), why
        basis[s] = "assumed" if why else ("derived" if swaps else f.basis)
    tail = p.levels[PowerState.TAIL]
    watts[PowerState.TAIL] = tail.watts
    how[PowerState.TAIL] = f"{tail.describe()} ({tail.overall_basis}; taken as measured, whatever the medium)"
    assumed[PowerState.TAIL] = tail.assumptions
    basis[PowerState.TAIL] = tail.overall_basis
    return NodePower(node, device.name, radios, watts, tail.duration, basis, how, assumed)


def energy(power: NodePower, phases: Sequence[tuple[PowerState, float]]) -> dict[PowerState, float]:
    """Joules per state: P(state) x the state's time."""
    out: dict[PowerState, float] = {}
    for state, seconds in phases:
        out[state] = out.get(state, 0.0) + power.watts[state] * max(0.0, seconds)
    return out


def transaction_phases(connect_s: float, handshake_s: float | None, total_s: float, encrypted: bool,
                       tail_s: float) -> list[tuple[PowerState, float]]:
    """A fetch's phases from its wire times (SYN departure -> handshake done -> handshake(s) done ->
    last response byte), then the tail."""
    hs = handshake_s or 0.0
    data = PowerState.DATA_ENCRYPTED if encrypted else PowerState.DATA
    # A fetch without a handshake (plain HTTP: None) has no handshake phase, not one of 0 s: its
    # energy_handshake_j is absent ("–"), never a 0 J that reads like a measurement.
    handshake = [(PowerState.HANDSHAKE, hs)] if handshake_s is not None else []
    return [(PowerState.CONNECT, connect_s), *handshake, (data, total_s - connect_s - hs), (PowerState.TAIL, tail_s)]


def relay_phases(total_s: float, encrypted: bool, tail_s: float) -> list[tuple[PowerState, float]]:
    """A node that forwards the transaction (a phone's proxy): it moves bytes from the client's SYN
    to the last byte - its data state throughout, since the handshakes compute on the ends - then
    its tail."""
    return [(PowerState.DATA_ENCRYPTED if encrypted else PowerState.DATA, total_s), (PowerState.TAIL, tail_s)]


def activity_phases(intervals_ns: Iterable[tuple[int, int]], encrypted: bool,
                    tail_s: float) -> list[tuple[PowerState, float]]:
    """Messages in flight (send -> delivery, ns): the data state for the union of the intervals;
    after each busy stretch the tail, cut short where the next stretch begins."""
    merged = union(intervals_ns)
    busy = sum(b - a for a, b in merged) / 1e9
    tail_ns = round(tail_s * 1e9)
    tail = sum(min(tail_ns, nxt[0] - cur[1]) for cur, nxt in zip(merged, merged[1:])) / 1e9
    tail += tail_s if merged else 0.0
    return [(PowerState.DATA_ENCRYPTED if encrypted else PowerState.DATA, busy), (PowerState.TAIL, tail)]


def span_phases(spans: Iterable[tuple[PowerState, float, float]], tail_s: float) -> list[tuple[PowerState, float]]:
    """Overlapping activities (state, start s, end s), e.g. a page's connections - set-up,
    handshakes, transfers - on several connections at once: at each instant the device is in the
    most demanding state any of them is in (handshake, then connect, then data encrypted, then
    data); between busy stretches the tail, cut short where the next stretch begins, and after
    the last one the whole tail."""
    order = (PowerState.HANDSHAKE, PowerState.CONNECT, PowerState.DATA_ENCRYPTED, PowerState.DATA)
    spans = [(s, a, b) for s, a, b in spans if b > a]
    edges = sorted({t for _, a, b in spans for t in (a, b)})
    seconds: dict[PowerState, float] = {}
    tail, busy_until = 0.0, None
    for a, b in zip(edges, edges[1:]):
        active = [s for s, x, y in spans if x <= a and y >= b]
        if not active:
            continue
        if busy_until is not None and a > busy_until:
            tail += min(tail_s, a - busy_until)
        state = min(active, key=order.index)
        seconds[state] = seconds.get(state, 0.0) + (b - a)
        busy_until = b
    out = [(s, seconds[s]) for s in order if s in seconds]
    return out + ([(PowerState.TAIL, tail + tail_s)] if spans else [])


def series_rows(power: NodePower, phases: Sequence[tuple[PowerState, float]]) -> list[dict[str, object]]:
    joules = energy(power, phases)
    seconds: dict[PowerState, float] = {}
    for s, t in phases:
        seconds[s] = seconds.get(s, 0.0) + max(0.0, t)
    media = "+".join(m.value for m in power.media) or "none"
    return [{"node": power.node, "device": power.device, "media": media, "state": s.value,
             "seconds": round(seconds[s], 9), "watts": power.watts[s], "joules": joules[s]} for s in seconds]


def interface_phases(busy: dict[Medium, Sequence[tuple[float, float]]], encrypted: bool,
                     tail_s: float) -> list[tuple[tuple[Medium, ...], PowerState, float]]:
    """A node whose radios carry bytes at different times (a watch under an interface policy or a
    multipath scheduler): (media active, state, seconds). At each instant the device is in its data
    state on the set of radios busy then - one radio's level while one carries, both radios'
    (the level plus the other radio) while both do; after each busy stretch of any radio the
    tail, cut short where the next stretch begins (the tail is taken as measured, whatever the
    medium: it is listed under the media of the stretch it follows). Idle time counts nothing
    here: the levels are above the idle baseline; a radio kept on while it carries nothing is
    charged its base power apart (radio_on_seconds)."""
    data = PowerState.DATA_ENCRYPTED if encrypted else PowerState.DATA
    spans = [(m, a, b) for m, ivs in busy.items() for a, b in ivs if b > a]
    edges = sorted({t for _, a, b in spans for t in (a, b)})
    seconds: dict[tuple[tuple[Medium, ...], PowerState], float] = {}
    last_media: tuple[Medium, ...] = ()
    busy_until: float | None = None

    def add(media: tuple[Medium, ...], state: PowerState, s: float) -> None:
        if s > 0:
            seconds[(media, state)] = seconds.get((media, state), 0.0) + s

    for a, b in zip(edges, edges[1:]):
        media = tuple(sorted({m for m, x, y in spans if x <= a and y >= b}, key=lambda m: m.value))
        if not media:
            continue
        if busy_until is not None and a > busy_until:
            add(last_media, PowerState.TAIL, min(tail_s, a - busy_until))
        add(media, data, b - a)
        last_media, busy_until = media, b
    if busy_until is not None:
        add(last_media, PowerState.TAIL, tail_s)
    return [(media, state, s) for (media, state), s in seconds.items()]


def until_read(busy: dict[Medium, list[tuple[float, float]]], read_s: float) -> dict[Medium, list[tuple[float, float]]]:
    """A client's busy intervals per radio, its data state held until its application read its
    last byte at `read_s`, as transaction_phases holds it on a direct route: the device's data
    level is a whole device's (seed 000 measured the watch's while its platform, not its radio,
    set the rate), and its platform's work goes on while the app reads what a transport already
    delivered. When that is after the radios' last busy stretch, the stretch of the radio that
    carried last runs on to it (the radios' own busy time is what `busy` says)."""
    ends = [(b, m.value, m) for m, ivs in busy.items() for a, b in ivs if b > a]
    if not ends:
        return busy
    last, _, medium = max(ends)
    if read_s <= last:
        return busy
    out = {m: list(ivs) for m, ivs in busy.items()}
    out[medium].append((last, read_s))
    return out


def radio_on_seconds(span_s: float, phases: Iterable[tuple[tuple[Medium, ...], PowerState, float]],
                     on: Iterable[Medium]) -> dict[Medium, float]:
    """Each radio of `on` (kept on all of a window `span_s` long): the time it is on but carrying
    nothing - the run less its time in the states whose levels hold its whole draw (its data
    state, and the tail after a stretch it carried in: `phases` as interface_phases gives them).
    Never below 0 (a flight cut at the run's end, and the tail after it, may pass the window)."""
    own = {m: 0.0 for m in on}
    for media, _, seconds in phases:
        for m in media:
            if m in own:
                own[m] += seconds
    return {m: max(0.0, span_s - t) for m, t in own.items()}
