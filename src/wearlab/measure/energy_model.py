"""The energy model: what a run costs the battery of each node that names a device.

    E(node, run) = sum over states s of P(node, s) x t(s)

The states are seed 000's phases of a transaction (model.choices.PowerState): the TCP handshake
(connect), the TLS or tcpcrypt handshake, data exchange (plaintext or encrypted), and the tail -
high-power idle after the last byte, for the device's fixed tail duration. t(s) are the run's
own measured phase times (http-get: from the capture; streams: the union of its messages' flight
times, send to delivery); P(node, s) are the device's power levels (model.devices.Power):

    P(node, s) = level(s) - radio(measured_on) [if the node does not use that medium]
                          + sum of radio(m) for the other media m the node's links use

i.e. a level measured over one medium (seed 000's watch: WiFi) moves to another by swapping the
radio's own active power (power_profile.xml currents). The tail is taken as it was measured,
whatever the medium (seed 000: independent of the protocol above). Energy is above the idle
baseline, as seed 000 reports it (background deducted).

What it cannot see: a real radio (no RSSI, retransmissions at the PHY, power-save polling, BT
sniff's own savings), the screen, DVFS beyond what the levels average, a CPU busier than the
measured transfers. It is a model applied to measured times, exact given both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wearlab.model.choices import PowerState
from wearlab.model.devices import Device
from wearlab.model.media import Medium

ACTIVE = (PowerState.CONNECT, PowerState.HANDSHAKE, PowerState.DATA, PowerState.DATA_ENCRYPTED)
ENERGY_SERIES_COLUMNS = ("node", "device", "media", "state", "seconds", "watts", "joules")


class NoPowerModel(ValueError):
    """The device lacks a figure the model needs (said in the run's metadata; energy left empty)."""


@dataclass(frozen=True)
class NodePower:
    """One node's power per state, in W, for the media its links use."""

    node: str
    device: str
    media: tuple[Medium, ...]
    watts: dict[PowerState, float]
    tail_s: float

    def describe(self) -> dict[str, object]:
        return {"node": self.node, "device": self.device, "media": [m.value for m in self.media],
                "watts": {s.value: w for s, w in self.watts.items()}, "tail_s": self.tail_s}


def node_power(node: str, device: Device, media: Iterable[Medium]) -> NodePower:
    p = device.power
    if p is None or not p.levels:
        raise NoPowerModel(f"device {device.name} has no power levels")
    radios = tuple(dict.fromkeys(m for m in media if m.is_radio))
    swap = 0.0
    if p.measured_on not in radios:
        if p.measured_on not in p.radios:
            raise NoPowerModel(f"device {device.name}: levels measured on {p.measured_on.value}, which node "
                               f"{node} does not use, and no radios.{p.measured_on.value} to take away")
        swap -= p.radios[p.measured_on].active.watts
    for m in radios:
        if m != p.measured_on:
            if m not in p.radios:
                raise NoPowerModel(f"device {device.name}: node {node} uses {m.value}, and the device has no "
                                   f"radios.{m.value}")
            swap += p.radios[m].active.watts
    level = {s: f.watts for s, f in p.levels.items()}
    level.setdefault(PowerState.CONNECT, level[PowerState.HANDSHAKE])
    level.setdefault(PowerState.DATA_ENCRYPTED, level[PowerState.DATA])
    watts = {s: max(0.0, level[s] + swap) for s in ACTIVE}
    watts[PowerState.TAIL] = level[PowerState.TAIL]
    return NodePower(node, device.name, radios, watts, p.levels[PowerState.TAIL].duration)


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
    merged: list[list[int]] = []
    for a, b in sorted(intervals_ns):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    busy = sum(b - a for a, b in merged) / 1e9
    tail_ns = round(tail_s * 1e9)
    tail = sum(min(tail_ns, nxt[0] - cur[1]) for cur, nxt in zip(merged, merged[1:])) / 1e9
    tail += tail_s if merged else 0.0
    return [(PowerState.DATA_ENCRYPTED if encrypted else PowerState.DATA, busy), (PowerState.TAIL, tail)]


def series_rows(power: NodePower, phases: Sequence[tuple[PowerState, float]]) -> list[dict[str, object]]:
    joules = energy(power, phases)
    seconds: dict[PowerState, float] = {}
    for s, t in phases:
        seconds[s] = seconds.get(s, 0.0) + max(0.0, t)
    media = "+".join(m.value for m in power.media) or "none"
    return [{"node": power.node, "device": power.device, "media": media, "state": s.value,
             "seconds": round(seconds[s], 9), "watts": power.watts[s], "joules": joules[s]} for s in seconds]
