"""2.4 GHz coexistence: which links share spectrum on a node, and by how much each loses while both
carry traffic (the topology's `interference:` key, resolved once when the topology loads).

Bluetooth (2.402-2.480 GHz) and 2.4 GHz WiFi share spectrum; a node with both radios active
time-shares its antenna and suffers the other's transmissions. Seed 003 section 5 measured it on a
phone: BT throughput -47 % and WiFi -7 % while both carry traffic, against the same BT beside
5 GHz WiFi. Those two fractions are the defaults here, so a run that shows them again is a
CALIBRATION (the paper's numbers are inputs), not a reproduction.

A coupling is one (BT/BLE link, 2.4 GHz WiFi link) pair ending on the same node. The band is
declared data (`band:` on the link or its profile); a WiFi link without one, or on 5 GHz, is never
coupled. realize.coupling applies the rule live.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from wearlab.model import unit_input
from wearlab.model.media import Band, Medium

# Seed 003 section 5 (phone, BT beside 2.4 GHz vs 5 GHz WiFi): the paper's inputs.
PAPER_BT_LOSS_PCT = 47.0
PAPER_WIFI_LOSS_PCT = 7.0
# A link "carries traffic" above this rate (both directions together). ASSUMPTION: well above a
# keepalive's or a idle TCP connection's trickle, well below BLE's 236.7 kbit/s.
DEFAULT_ACTIVE_ABOVE_BPS = 50_000
# How often the counters are read and the rule decided. ASSUMPTION: 100 ms, several RTTs of a BT
# link (30 ms) so a bulk flow's rate is measurable in one window; the reaction time is <= 2 windows.
DEFAULT_WINDOW_S = 0.1


def _opt(parser):
    return BeforeValidator(lambda v: None if v is None else parser(v))


class InterferenceSpec(BaseModel):
    """`interference:` as written in a topology."""

    model_config = ConfigDict(extra="forbid")

    # None: on when some node has both a BT/BLE link and a 2.4 GHz WiFi link.
    coupled: bool | None = None
    bt_loss: Annotated[float | None, _opt(unit_input.parse_percent)] = None
    wifi_loss: Annotated[float | None, _opt(unit_input.parse_percent)] = None
    active_above: Annotated[int | None, _opt(unit_input.parse_rate)] = None
    window: Annotated[float | None, _opt(unit_input.parse_duration), Field(gt=0)] = None


class Coupling(BaseModel):
    """A BT/BLE link and a 2.4 GHz WiFi link that end on `node`: (a, b) of each link."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node: str
    bt: tuple[str, str]
    wifi: tuple[str, str]


class Interference(BaseModel):
    """The resolved rule: losses in percent of each link's rate, the activity threshold (bit/s,
    both directions together), the decision window (s), and the couplings (empty: off)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bt_loss_pct: float = PAPER_BT_LOSS_PCT
    wifi_loss_pct: float = PAPER_WIFI_LOSS_PCT
    active_above_bps: int = DEFAULT_ACTIVE_ABOVE_BPS
    window_s: float = DEFAULT_WINDOW_S
    couplings: tuple[Coupling, ...] = ()
    written: dict = Field(default_factory=dict)   # the key as written, for to_document
    declared: bool = False                        # the topology wrote `interference:` (even empty: on)

    def loss_pct(self, medium: Medium) -> float:
        return self.bt_loss_pct if medium.is_bluetooth else self.wifi_loss_pct

    def to_record(self) -> dict:
        """What a run's metadata keeps (what makes its results reproducible)."""
        return {"bt_loss_pct": self.bt_loss_pct, "wifi_loss_pct": self.wifi_loss_pct,
                "active_above_bps": self.active_above_bps, "window_s": self.window_s,
                "couplings": [{"node": c.node, "bt": "-".join(c.bt), "wifi": "-".join(c.wifi)} for c in self.couplings],
                "source": "defaults: seed 003 section 5 (BT -47 %, WiFi -7 %), the paper's inputs (a calibration)"}


def couplings_of(links) -> tuple[list[Coupling], list[str]]:
    """Every (BT/BLE, 2.4 GHz WiFi) pair of links ending on one node, and the WiFi links that end on
    such a node without a declared band (reported when the rule is asked for explicitly)."""
    out: list[Coupling] = []
    unbanded: list[str] = []
    nodes = sorted({n for link in links for n in (link.a, link.b)})
    for node in nodes:
        mine = [l for l in links if node in (l.a, l.b)]
        bts = [l for l in mine if l.medium is not None and l.medium.is_bluetooth]
        wifis = [l for l in mine if l.medium == Medium.WIFI]
        if not bts:
            continue
        for w in wifis:
            if w.band is None:
                unbanded.append(f"{w.a}-{w.b}")
            elif w.band == Band.GHZ_2_4:
                out.extend(Coupling(node=node, bt=(b.a, b.b), wifi=(w.a, w.b)) for b in bts)
    return out, unbanded
