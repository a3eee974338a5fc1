"""The `wearable` kind: a watch (or glasses) with its Bluetooth radio's state machine.

Which of its interfaces carries its app's flow is its `interface_policy` (one concept,
wearlab.nodes.interface_policies, docs/interface-selection.md): `bt` or `wifi` for the whole run,
`adaptive` on the load (wearlab.nodes.interface_selection), or - the user walking away from the
phone - `reactive`, `wifi-always` or `proactive`, the BT -> WiFi handovers of seed 003 section 6
(wearlab.nodes.handover documents the mobility and quality model and the phases; they need a BT
link to a phone and a WiFi link to an AP). The workload's first hop is the neighbour across the
link of the policy's first medium; `policy_transport` says how a choice is carried out.

With `radio: bt` the BT link to the wearable's phone runs the Active/Sniff state machine of
seed 003 section 3 (wearlab.nodes.radio documents the model): `sniff_timer` (the watch's
Active->Sniff timer: the paper saw 5 s and 2 s), the phone's `phone_timer`, the blackout's
`recovery` range, and the paper's fix `uplink_keepalive`. Without it (the default) the wearable
is a plain host, so experiments that do not ask for the radio measure the link alone.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

from wearlab.model import params as P
from wearlab.model.choices import PolicyTransport, values
from wearlab.model.columns import Metric, Series
from wearlab.model.features import KernelFeature
from wearlab.model.declarations import NodeView
from wearlab.model.media import MEDIA, Medium
from wearlab.model.params import Param, ParamSet
from wearlab.model.roles import Role
from wearlab.model.quantities import format_duration, format_size
from wearlab.model.yamlsrc import did_you_mean
from wearlab.model.needs import Need
from wearlab.model.ports import MULTIPATH_LOCAL
from wearlab.nodes.interface_policies import CHUNKED, INTERFACE_SERIES, MPTCP, ROUTE, STILL, WALK
from wearlab.nodes.multipath_endpoints import MULTIPATH_CHUNKS_SERIES, MULTIPATH_SERIES
from wearlab.nodes.node_kind import NodeKind

HANDOVER_SERIES = Series("handover", ("t_s", "t_ns", "event", "detail"),
                         "the handover's actions and what the watch's interfaces showed (interface_policy: "
                         "reactive, wifi-always, proactive)")
RADIO_SERIES = Series("radio", ("t_s", "t_ns", "link", "state", "reason", "recovery_s"),
                      "the BT radio's state changes (wearable kind, radio: bt)")


def _undeclared(view: NodeView) -> str:
    missing = [l.peer for l in view.links if l.medium is None]
    return (f" (the links to {', '.join(missing)} declare no medium: give them `medium:` or a profile that has one)"
            if missing else "")


def _dur(v: float) -> str:
    return format_duration(float(v))


def _walk_start(v: Any) -> float | None:
    if isinstance(v, str) and v.strip().lower() == "manual":
        return None
    if v is None:
        return None
    return P.duration(v)


def _walk_doc(v: Any) -> str:
    return "manual" if v is None else _dur(v)


MULTIPATH_CHUNK_RANGE = (16, 65536)   # bytes: a chunk below 16 is mostly header; above 64 KB, no socket read returns it


def _scheduler(v: Any) -> str:
    """A scheduler's name (checked against the catalog's at plan time) or none."""
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"multipath names a scheduler (one of the catalog's: `wearlab kinds` lists them) or none; "
                         f"got {v!r}")
    return v.strip().lower()


def _policy(v: Any) -> str:
    """An interface policy's name (checked against the catalog's at plan time) or none."""
    if not isinstance(v, str) or not v.strip():
        raise ValueError(f"interface_policy names a policy (bt, wifi, adaptive, reactive, wifi-always, proactive, "
                         f"or one registered in the catalog) or none; got {v!r}")
    return v.strip().lower()


def _media_list(v: Any) -> tuple[str, ...]:
    """The watch's paths, one medium each, in path order: [wifi, bt]."""
    items = [x.strip() for x in v.split(",")] if isinstance(v, str) else v
    if not isinstance(items, (list, tuple)) or not items:
        raise ValueError(f"multipath_paths is a list of link media, like [wifi, bt]; got {v!r}")
    out = []
    for x in items:
        if not isinstance(x, str) or x.strip().lower() not in MEDIA:
            raise ValueError(f"multipath_paths: {x!r} is not a link medium ({', '.join(MEDIA)})")
        out.append(x.strip().lower())
    if len(set(out)) != len(out):
        raise ValueError(f"multipath_paths names a medium twice: {out}")
    return tuple(out)


def _chunk(v: Any) -> int:
    n = P.positive_size(v)
    lo, hi = MULTIPATH_CHUNK_RANGE
    if not lo <= n <= hi:
        raise ValueError(f"multipath_chunk must be {lo} B to {hi} B, got {v!r}")
    return n


def _number(name: str):
    def check(v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(f"{name} must be a number, got {v!r}")
        try:
            return float(v)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {v!r}") from None
    return check


def _positive_number(name: str):
    def check(v: Any) -> float:
        x = _number(name)(v)
        if x <= 0:
            raise ValueError(f"{name} must be more than 0, got {v!r}")
        return x
    return check


def transport_on(settings: Mapping[str, Any]) -> bool:
    """The chunked multipath transport runs: for a scheduler (`multipath`) or an interface policy
    it carries (settings as planned: `policy_transport` resolved, Wearable.resolved)."""
    return settings.get("multipath", "none") != "none" or (
        settings.get("interface_policy", "none") != "none" and settings.get("policy_transport") == CHUNKED)


def policy_chosen(settings: Mapping[str, Any]) -> bool:
    return settings.get("interface_policy", "none") != "none"


def policy_pins_transport(settings: Mapping[str, Any]) -> bool:
    """The chunked transport runs one path at a time, the policy's: only for a policy it carries.
    A static policy by route beside a scheduler names the path of the scheduler's `none` cells
    (Wearable._check_policy), so the scheduler's own cells spread over every path."""
    return transport_on(settings) and policy_chosen(settings) and settings.get("policy_transport") == CHUNKED


class Wearable(NodeKind):
    name = "wearable"
    doc = "a watch; radio: bt emulates its Bluetooth radio's Active/Sniff states (seed 003 section 3)"
    roles = frozenset({Role.WEARABLE})
    series = (RADIO_SERIES, HANDOVER_SERIES, MULTIPATH_SERIES, MULTIPATH_CHUNKS_SERIES, INTERFACE_SERIES)
    metrics = tuple(Metric(f"handover_p{i}_s", "s", label=f"P{i}", summarised=True, doc=doc) for i, doc in (
        (1, "BT's last reception -> BT interface down (BT connected but unusable)"),
        (2, "BT down -> WiFi interface up (no network)"),
        (3, "WiFi up -> its first reception (association)")))
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
        Param("proactive_dbm", _number("proactive_dbm"), -66.0, "proactive: smoothed RSSI that brings WiFi up "
              "(the paper's -66 dBm)"),
        Param("walk_start", _walk_start, 5.0, "when the user starts walking away from the phone; manual: "
              "when `wearlab handover now` says so", to_doc=_walk_doc, shown=_walk_doc),
        Param("walk_speed", _positive_number("walk_speed"), 1.0, "walking speed, m/s"),
        Param("rssi_1m", _number("rssi_1m"), -50.0, "BT RSSI at 1 m, dBm (the paper's watch on a desk)"),
        Param("path_loss_exponent", _positive_number("path_loss_exponent"), 2.5,
              "log-distance path-loss exponent (ASSUMPTION: indoor, body-worn)"),
        Param("shadowing_db", _number("shadowing_db"), 2.0, "Gaussian shadowing sigma, dB (seeded)"),
        Param("bt_unusable", _number("bt_unusable"), -85.0, "RSSI below which BT carries nothing, dBm (ASSUMPTION)"),
        Param("p1", P.duration, 12.9, "P1: BT connected but unusable (paper mean)", to_doc=_dur, shown=_dur),
        Param("p2", P.duration, 15.5, "P2: no network (paper mean)", to_doc=_dur, shown=_dur),
        Param("p3", P.duration, 8.3, "P3: WiFi association (paper mean)", to_doc=_dur, shown=_dur),
        Param("multipath", _scheduler, "none",
              "the chunked multipath transport (seed 003 section 5) between the watch and the workload's server "
              "(a page load: each origin's server), "
              "one TCP connection per path, with this scheduler (one of the catalog's: `wearlab kinds` lists them); "
              "none: off. docs/multipath.md"),
        Param("multipath_paths", _media_list, ("wifi", "bt"), "multipath: the watch's links it uses, by medium, "
              "in path order (each medium must be exactly one link of the watch)", to_doc=list,
              shown=lambda v: "+".join(v)),
        Param("multipath_chunk", _chunk, 1400, "multipath: the largest chunk (payload bytes; 13 B of header each)",
              to_doc=format_size),
        Param("multipath_window", P.positive_size, 65536, "multipath: bytes in flight per path (sent, not yet "
              "acknowledged by the other end); a scheduler sends on a path only while it has room",
              to_doc=format_size),
        Param("interface_policy", _policy, "none",
              "which ONE interface carries the watch's flow: bt, wifi (all run); adaptive (seed 003 section 5.2's "
              "B/T1/T2 rule, over the chunked transport); reactive, wifi-always, proactive (the BT->WiFi handover "
              "of a user walking away, seed 003 section 6); or one registered in the catalog. The workload's first "
              "hop is the neighbour across the policy's first medium. none: the client's first neighbour in link "
              "order. docs/interface-selection.md"),
        Param("policy_transport", P.choice("policy_transport", values(PolicyTransport)), "auto",
              "how the policy's choice is carried out: route (the app's own connection through the chosen "
              "neighbour), mptcp (kernel MPTCP subflows), chunked (the multipath transport: switches without "
              "reconnecting); auto: the policy's own (bt, wifi, reactive, wifi-always: route; proactive: mptcp; "
              "adaptive and one's own: chunked)"),
        Param("policy_backlog", P.positive_size, 10_000, "adaptive: B, the bytes waiting to cross BT (at the "
              "phone; at the watch for an upload) above which the clock T1 runs (paper: 10 KB)", to_doc=format_size),
        Param("policy_t1", P.positive_duration, 0.5, "adaptive: T1, how long the backlog stays above B before "
              "the flow moves to WiFi (paper: 500 ms)", to_doc=_dur, shown=_dur),
        Param("policy_t2", P.positive_duration, 5.0, "adaptive: T2, how long WiFi carries at most "
              "policy_wifi_low before the flow moves back to BT (paper: 5 s)", to_doc=_dur, shown=_dur),
        Param("policy_wifi_low", P.rate, 500_000, "adaptive: the WiFi throughput (bit/s) at or below which WiFi "
              "counts as idle (paper: 500 kbit/s)", to_doc=lambda v: f"{v / 1e3:g}kbit"),
    ))

    first_hop_option = "interface_policy"
    renamed = {"handover": "write interface_policy: reactive, wifi-always or proactive (the handover modes are "
                           "interface policies now, docs/interface-selection.md)"}

    # -- plan time ---------------------------------------------------------------------------
    @classmethod
    def resolved(cls, options: Mapping[str, Any], catalog) -> dict[str, Any]:
        """`policy_transport: auto` becomes the policy's own first transport."""
        out = dict(options)
        policy = (catalog.interface_policies or {}).get(out.get("interface_policy", "none"))
        if policy is not None and out.get("policy_transport", PolicyTransport.AUTO.value) == PolicyTransport.AUTO.value:
            out["policy_transport"] = policy.transports[0]
        return out

    @classmethod
    def first_medium(cls, options: Mapping[str, Any], catalog) -> Medium | None:
        """The policy's first medium; over the chunked transport BT: the app's own connection is
        made as Wear OS makes it, through the phone, and the transport moves its chunks."""
        policy = (catalog.interface_policies or {}).get(options.get("interface_policy", "none"))
        if policy is None:
            return None
        transport = cls.resolved(options, catalog).get("policy_transport")
        return Medium.BT if transport == CHUNKED else Medium(policy.initial)

    @classmethod
    def check(cls, view: NodeView) -> list[tuple[str, str]]:
        s, out = view.settings, []
        if s["recovery_min"] > s["recovery_max"]:
            out.append(("recovery_min", f"recovery_min {_dur(s['recovery_min'])} is above recovery_max "
                                        f"{_dur(s['recovery_max'])}"))
        bt = view.links_of(Medium.BT, Role.PHONE)
        if s["radio"] == "bt" and len(bt) != 1:
            out.append(("radio", f"radio: bt needs exactly one Bluetooth link (medium bt) to a phone; found "
                                 f"{len(bt)}{_undeclared(view)}"))
        if s["multipath"] != "none":
            out += cls._check_multipath(view, "multipath")
        if policy_chosen(s):
            out += cls._check_policy(view)
        return out

    @classmethod
    def _check_policy(cls, view: NodeView) -> list[tuple[str, str]]:
        s, out = view.settings, []
        name = s["interface_policy"]
        policy = view.interface_policies.get(name)
        if policy is None:
            return [("interface_policy", f"unknown interface policy '{name}'"
                                         f"{did_you_mean(name, view.interface_policies)} "
                                         f"(policies: {', '.join(view.interface_policies)}, or none)")]
        transport = s["policy_transport"]
        if transport not in policy.transports:
            out.append(("policy_transport", f"interface_policy {name} is carried out by "
                                            f"{' or '.join(policy.transports)}, not by {transport}"))
        # A static policy by route beside a scheduler is the path of the scheduler's `none` cells.
        if s["multipath"] != "none" and (transport != ROUTE or policy.moves_on != STILL):
            out.append(("interface_policy", f"interface_policy {name} moves the flow or rides the chunked transport; "
                                            "multipath's scheduler spreads it over several paths: set one of them"))
        first = [l for l in view.links if l.medium == Medium(policy.initial)]
        if len(first) != 1:
            out.append(("interface_policy", f"interface_policy {name} starts on {policy.initial}: {view.name} needs "
                                            f"exactly one link with medium {policy.initial}; found "
                                            f"{len(first)}{_undeclared(view)}"))
        # A move by route or MPTCP follows the one connection to the workload's server; the chunked
        # transport carries every server's (_check_multipath).
        if transport != CHUNKED and (transport != ROUTE or policy.moves_on != STILL) and "server" not in view.endpoints:
            out.append(("interface_policy", f"interface_policy {name} moves the connection {view.name} opens to "
                                            "the workload's server; this workload has none (a workload with several "
                                            "servers: bt or wifi by route choose its first hop, policy_transport: "
                                            "chunked carries all its connections)"))
        elif view.endpoints.get("client") != view.name:
            out.append(("interface_policy", f"interface_policy chooses the path of the connections {view.name} "
                                            f"opens; the workload's client is {view.endpoints.get('client')}"))
        if out:
            return out
        if policy.moves_on == WALK:
            wifi = view.links_of(Medium.WIFI, Role.AP)
            if len(view.links_of(Medium.BT, Role.PHONE)) != 1 or len(wifi) != 1:
                out.append(("interface_policy", f"interface_policy {name} walks the user away from the phone: it "
                                                "needs a BT path and a WiFi path: exactly one link with medium bt "
                                                f"to a phone and one with medium wifi to an AP{_undeclared(view)}"))
            if transport == MPTCP and not view.cell.get("mptcp"):
                out.append(("interface_policy", f"interface_policy {name} moves the flow to an MPTCP subflow over "
                                                "WiFi: the workload needs mptcp: true"))
        if transport == CHUNKED:
            out += cls._check_multipath(view, "interface_policy")
            if not {"bt", "wifi"} <= set(s["multipath_paths"]):
                out.append(("multipath_paths", "interface_policy switches between bt and wifi: multipath_paths "
                                               f"must list both; it lists {list(s['multipath_paths'])}"))
            if len(view.links_of(Medium.BT, Role.PHONE)) != 1:
                out.append(("interface_policy", "interface_policy measures the backlog at the phone: the watch "
                                                f"needs exactly one BT link to a phone{_undeclared(view)}"))
        return out

    @classmethod
    def _check_multipath(cls, view: NodeView, field: str) -> list[tuple[str, str]]:
        """The chunked transport's checks: for `multipath` (a scheduler) or an interface policy it
        carries (one path at a time)."""
        s, out = view.settings, []
        if s["multipath"] != "none" and s["multipath"] not in view.schedulers:
            out.append(("multipath", f"unknown scheduler '{s['multipath']}'{did_you_mean(s['multipath'], view.schedulers)} "
                                     f"(schedulers: {', '.join(view.schedulers)}, or none)"))
        for medium in s["multipath_paths"]:
            ends = [l for l in view.links if l.medium == Medium(medium)]
            if len(ends) != 1:
                out.append(("multipath_paths", f"a {medium} path needs exactly one link with medium {medium} on "
                                               f"{view.name}; found {len(ends)}{_undeclared(view)}"))
        if not view.rides_transport:
            out.append((field, f"the chunked transport carries the stream kinds, http-get and page-load; a "
                               f"{view.workload} workload's connections are not carried by it: choose the path by "
                               f"route (interface_policy with policy_transport: route), or run without the transport"))
        elif not view.servers:
            out.append((field, f"{field} carries the workload's connections to its servers; this workload has none"))
        elif view.endpoints.get("client") != view.name:
            out.append((field, f"{field} carries the connections {view.name} opens; the workload's client "
                               f"is {view.endpoints.get('client')}"))
        if view.cell.get("mptcp"):
            out.append((field, "the app's connection is carried by the chunked transport, not MPTCP: "
                               "drop mptcp: true"))
        # What the watch's netfilter REDIRECT cannot hand to the agent, or what would end there:
        if str(view.cell.get("http_version")) == "3":
            out.append((field, "the chunked transport carries TCP, and HTTP/3 is QUIC over UDP (the watch's "
                               "REDIRECT takes TCP only): this cell's http_version 3 would go around it; use "
                               "http_version 1.1 or 2, or leave 3 out of this experiment's transport cells"))
        if view.cell.get("protocol") == "tcpcrypt":
            out.append((field, "tcpcrypt's TCP-ENO runs between the two ends of one TCP connection, and over the "
                               "chunked transport the app's connection ends at the watch's agent (the paths are "
                               "the agents' own): the server would see no tcpcrypt; use protocol http or https here"))
        return out

    @classmethod
    def carries_over_transport(cls, settings: Mapping[str, Any]) -> bool:
        return transport_on(settings)

    @classmethod
    def features(cls, settings: Mapping[str, Any]) -> set[KernelFeature]:
        out = set()
        if settings.get("radio") == "bt":
            out |= {KernelFeature.PLUG, KernelFeature.HTB, KernelFeature.CLSACT}
        if policy_chosen(settings) and settings.get("policy_transport") == MPTCP:
            out.add(KernelFeature.MPTCP)
        if transport_on(settings):
            out.add(KernelFeature.IPT_REDIRECT)
        return out

    @classmethod
    def ports(cls, settings: Mapping[str, Any], needs: list[Need]) -> dict[int, str]:
        # (the server agent's port, MULTIPATH_AGENT, is on the server node: its kind does not list it)
        return {MULTIPATH_LOCAL: "multipath watch agent"} if transport_on(settings) else {}

    # -- run time ----------------------------------------------------------------------------
    def prepare(self) -> None:
        self.controller = self.handover = self.multipath = None
        self.selector = None
        if transport_on(self.settings):
            from wearlab.nodes.multipath_endpoints import MultipathEndpoints
            self.multipath = MultipathEndpoints(self)
            self.multipath.prepare()
        if policy_pins_transport(self.settings):
            from wearlab.nodes.interface_selection import InterfaceSelector
            self.selector = InterfaceSelector(self, self.multipath, phone=self._peer(Medium.BT, Role.PHONE))
        from wearlab.nodes.handover import POLICIES as WALK_POLICIES
        if self.settings.get("interface_policy") in WALK_POLICIES:
            from wearlab.nodes.handover import HandoverController
            digest = hashlib.sha256(f"wearlab-walk:{self.seed}:{self.node}".encode()).digest()
            self.handover = HandoverController(self, bt_peer=self._peer(Medium.BT, Role.PHONE),
                                               ap=self._peer(Medium.WIFI, Role.AP), settings=self.settings,
                                               rng=random.Random(int.from_bytes(digest[:8], "big")))
        if self.settings.get("radio") != "bt":
            return
        s = self.settings
        phone = self._peer(Medium.BT, Role.PHONE)
        from wearlab.nodes.radio import BtRadio, RadioController
        digest = hashlib.sha256(f"wearlab-radio:{self.seed}:{self.node}-{phone}".encode()).digest()
        radio = BtRadio(sniff_timer=s["sniff_timer"], phone_timer=s["phone_timer"],
                        recovery=(s["recovery_min"], s["recovery_max"]), watch_wake=s["watch_wake"],
                        rng=random.Random(int.from_bytes(digest[:8], "big")))
        self.controller = RadioController(self.net, self.node, phone, radio, keepalive=s["uplink_keepalive"])
        self.controller.install()

    def _peer(self, medium: Medium, role: Role) -> str:
        """The one peer over a link of `medium` (the plan checked there is exactly one)."""
        (end,) = [l for l in self.ctx.plan.link_ends(self.node) if l.medium == medium and l.peer_role == role]
        return end.peer

    def run_started(self, t0_ns: int) -> None:
        if self.run_seed is not None:
            # Each run draws from its own identity's sequences, not from where the run before left them.
            if self.handover is not None:
                self.handover.rng.seed(self.run_seed)
            if getattr(self, "controller", None) is not None:
                self.controller.radio.rng.seed(self.run_seed ^ 0x5EED)
        if self.handover is not None:
            server = self.ctx.plan.endpoints["server"]
            self.handover.run_started(t0_ns, self.ctx.plan.addresses.address_of(server))
        if self.selector is not None:
            self.selector.run_started(t0_ns)

    def run_ended(self) -> None:
        if self.handover is not None:
            self.handover.run_ended()
        if getattr(self, "selector", None) is not None:
            self.selector.run_ended()

    def live(self) -> dict[str, Any]:
        """The fields of the live record's NodeState (report.livedoc): the radio's state, the
        handover's last action."""
        out: dict[str, Any] = {}
        if getattr(self, "controller", None) is not None:
            out["radio"] = self.controller.radio.state
        if getattr(self, "handover", None) is not None:
            last = self.handover.last_event()
            out["handover"] = {"mode": self.settings["interface_policy"], "last_event": last["event"] if last else None,
                               "at_s": last["t_s"] if last else None}
        if getattr(self, "selector", None) is not None:
            out["interface"] = self.selector.live()
        if getattr(self, "multipath", None) is not None:
            out["multipath"] = self.multipath.live()
        return out

    def controls(self, action: str) -> bool:
        return (action == "radio" and getattr(self, "controller", None) is not None) or \
               (action == "handover" and getattr(self, "handover", None) is not None)

    def control(self, action: str, arg: str | None) -> str:
        if action == "radio":
            if arg in ("sleep", "wake"):
                self.controller.forced = arg
                return f"{self.node}'s radio: {arg} requested (it was {self.controller.radio.state})"
            return f"{self.node}'s radio is {self.controller.radio.state}"
        return self.handover.walk_now()

    def run_metrics(self) -> dict[str, Any]:
        return self.handover.phases() if self.handover is not None else {}

    def start(self) -> None:
        if self.controller is not None:
            self.controller.start()
        if self.multipath is not None:
            self.multipath.start()

    def stop(self) -> None:
        if getattr(self, "selector", None) is not None:
            self.selector.close()
        if getattr(self, "multipath", None) is not None:
            self.multipath.stop()
        if getattr(self, "controller", None) is not None:
            self.controller.stop()
        if getattr(self, "handover", None) is not None:
            self.handover.close()

    def take_series(self, t0_ns: int) -> dict[str, list[dict[str, Any]]]:
        out = {}
        if getattr(self, "controller", None) is not None:
            out["radio"] = self.controller.take(t0_ns)
        if getattr(self, "handover", None) is not None:
            out["handover"] = self.handover.take()
        if getattr(self, "multipath", None) is not None:
            out["multipath"] = self.multipath.take(t0_ns)
            out["multipath_chunks"] = self.multipath.take_chunks(t0_ns)
        if getattr(self, "selector", None) is not None:
            out["interface"] = self.selector.take()
        return out

    def facts(self) -> dict[str, Any]:
        out = super().facts()
        if getattr(self, "controller", None) is not None:
            out["radio_model"] = "seed 003 section 3: watch timer reset by own TX (IP >= 128 B), blackout held in plug"
        if getattr(self, "multipath", None) is not None:
            out["multipath"] = self.multipath.facts()
        if getattr(self, "selector", None) is not None:
            out["interface_policy"] = self.selector.facts()
        return out
