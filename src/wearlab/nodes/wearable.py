"""The `wearable` kind: a watch (or glasses) with its Bluetooth radio's state machine.

With `radio: bt` the BT link to the wearable's phone runs the Active/Sniff state machine of
seed 003 section 3 (wearlab.nodes.radio documents the model): `sniff_timer` (the watch's
Active->Sniff timer: the paper saw 5 s and 2 s), the phone's `phone_timer`, the blackout's
`recovery` range, and the paper's fix `uplink_keepalive`. Without it (the default) the wearable
is a plain host, so experiments that do not ask for the radio measure the link alone.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from wearlab.model import params as P
from wearlab.model.params import Param, ParamSet
from wearlab.model.roles import Role
from wearlab.model.units import format_duration
from wearlab.nodes.kinds import KindError, NodeKind, register
from wearlab.workloads.base import Series

RADIO_SERIES = Series("radio", ("t_s", "t_ns", "link", "state", "reason", "recovery_s"),
                      "the BT radio's state changes (wearable kind, radio: bt)")


def _dur(v: float) -> str:
    return format_duration(float(v))


@register
class Wearable(NodeKind):
    name = "wearable"
    doc = "a watch; radio: bt emulates its Bluetooth radio's Active/Sniff states (seed 003 section 3)"
    roles = frozenset({Role.WEARABLE})
    series = (RADIO_SERIES,)
    options = ParamSet((
        Param("radio", P.choice("radio", ("none", "bt")), "none", "bt: the BT link to the phone sleeps (Sniff) as a "
              "watch's does; none: the link alone"),
        Param("sniff_timer", P.positive_duration, 5.0, "the watch's Active->Sniff timer, reset only by its own "
              "transmissions (paper: 5 s or 2 s)", to_doc=_dur, shown=_dur),
        Param("phone_timer", P.positive_duration, 5.0, "the phone's inactivity timer (any traffic resets it)",
              to_doc=_dur, shown=_dur),
        Param("recovery_min", P.positive_duration, 0.5, "shortest blackout after entering Sniff (uniform)",
              to_doc=_dur, shown=_dur),
        Param("recovery_max", P.positive_duration, 1.2, "longest blackout (uniform between min and max)",
              to_doc=_dur, shown=_dur),
        Param("watch_wake", P.positive_duration, 0.1, "the watch waking itself to transmit (ASSUMPTION)",
              to_doc=_dur, shown=_dur),
        Param("uplink_keepalive", P.flag("uplink_keepalive"), False, "the paper's fix: a small uplink packet "
              "just before the watch's timer expires"),
    ))

    def prepare(self) -> None:
        self.controller = None
        if self.settings.get("radio") != "bt":
            return
        s = self.settings
        if s["recovery_min"] > s["recovery_max"]:
            raise KindError(f"{self.node}: recovery_min {_dur(s['recovery_min'])} is above recovery_max "
                            f"{_dur(s['recovery_max'])}")
        phone = self._bt_peer()
        from wearlab.nodes.radio import BtRadio, RadioController
        digest = hashlib.sha256(f"wearlab-radio:{self.seed}:{self.node}-{phone}".encode()).digest()
        radio = BtRadio(sniff_timer=s["sniff_timer"], phone_timer=s["phone_timer"],
                        recovery=(s["recovery_min"], s["recovery_max"]), watch_wake=s["watch_wake"],
                        rng=random.Random(int.from_bytes(digest[:8], "big")))
        self.controller = RadioController(self.net, self.node, phone, radio, keepalive=s["uplink_keepalive"])
        self.controller.install()

    def _bt_peer(self) -> str:
        topo = self.net.topo
        peers = [l.other(self.node) for l in topo.links if self.node in (l.a, l.b)
                 and (l.profile or "").startswith("bt") and topo.nodes[l.other(self.node)].role == Role.PHONE]
        if len(peers) != 1:
            raise KindError(f"{self.node}: radio: bt needs exactly one Bluetooth link (profile bt-*) to a phone; "
                            f"found {len(peers)}")
        return peers[0]

    def start(self) -> None:
        if self.controller is not None:
            self.controller.start()

    def stop(self) -> None:
        if getattr(self, "controller", None) is not None:
            self.controller.stop()

    def take_series(self, t0_ns: int) -> dict[str, list[dict[str, Any]]]:
        if getattr(self, "controller", None) is None:
            return {}
        return {"radio": self.controller.take(t0_ns)}

    def facts(self) -> dict[str, Any]:
        out = super().facts()
        if getattr(self, "controller", None) is not None:
            out["radio_model"] = "seed 003 section 3: watch timer reset by own TX (IP >= 128 B), blackout held in plug"
        return out
