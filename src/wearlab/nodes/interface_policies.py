"""Interface-selection policies of a wearable: which ONE of the watch's interfaces carries its
app's flow now - the one concept `interface_policy:` names (docs/interface-selection.md). Each
policy says which interface the flow starts on (`initial`, and so the workload's first hop), what
moves it, and by which transport it can be moved (`transports`, the first the default; the
wearable's `policy_transport` picks another):

- `route`: the app's own connection goes out the chosen interface, routed through its neighbour
  (a phone proxies, an AP routes); a move breaks the connection and the app reconnects;
- `mptcp`: the kernel's MPTCP: a subflow per interface, the flow moved by subflow priority;
- `chunked`: wearlab's chunked multipath transport (wearlab.nodes.multipath_agent, seed 003 §5):
  one connection per path, both open all run, so a switch moves the next chunks to the other
  path's connection instead of reconnecting the app (seed 003 section 5.2, "Fast Interface Switch
  on Wearables").

What moves the flow (`moves_on`): nothing (`bt`, `wifi`); the load (`adaptive`, and a user's own:
the backlog waiting to cross BT and WiFi's throughput, below); or the user walking away from the phone
(`reactive`, `wifi-always`, `proactive`: Wear OS's BT -> WiFi handover and the paper's proactive
one, seed 003 section 6, run by wearlab.nodes.handover).

A load policy is a state machine over samples and nothing else (no I/O: wearlab.nodes.interface_selection
measures and applies): each `Sample` gives the bytes waiting to cross BT (in whichever direction
the flow goes: at the phone toward the watch, or at the watch toward the phone; the larger) and
the watch's WiFi throughput over the last sample interval; `observe` answers a `Switch` or None.

Pluggable like the multipath schedulers: an `InterfacePolicy` subclass with a `name` and a `doc`,
listed once in `wearlab.catalog` (`interface_policies=[...]`), a user's own registered with
`CATALOG.extended(interface_policies=[...])` and named in the wearable's `interface_policy:`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from wearlab.model.choices import PolicyTransport
from wearlab.model.columns import Series

BT, WIFI = "bt", "wifi"
ROUTE, MPTCP, CHUNKED = PolicyTransport.ROUTE.value, PolicyTransport.MPTCP.value, PolicyTransport.CHUNKED.value
STILL, LOAD, WALK = "nothing", "load", "walk"   # what moves the flow (module doc)
PHONE, WATCH = "phone", "watch"     # the BT link's two sides: where a backlog waits (toward the other)
EPSILON_S = 1e-9     # clocks compared as floats: 4.52 - 4.02 is 0.4999999999999991, and that is 500 ms
INTERFACE_SERIES = Series("interface", ("t_s", "t_ns", "event", "active", "backlog_bytes", "backlog_side",
                                        "backlog_at", "wifi_bps", "from", "to", "reason"),
                          "the interface policy's samples (bytes waiting to cross BT, the side they wait on - phone "
                          "or watch - and how they were read; WiFi throughput; the active path) and switches, with "
                          "why (interface_policy: ...)")


@dataclass(frozen=True)
class Sample:
    t: float                 # seconds (any origin; the controller's: since the run began)
    backlog_bytes: int       # bytes waiting to cross BT (the larger of the two directions)
    wifi_bps: float          # the watch's WiFi throughput over the interval ending at t
    backlog_side: str = PHONE   # where they wait: the phone (toward the watch) or the watch (toward the phone)


@dataclass(frozen=True)
class Switch:
    t: float
    from_: str
    to: str
    reason: str


@dataclass(frozen=True)
class PolicyOptions:
    """The wearable's `policy_*` options (the paper's values as defaults)."""
    backlog_bytes: int = 10_000      # B: 10 KB
    t1_s: float = 0.5                # T1: 500 ms
    t2_s: float = 5.0                # T2: 5 s
    wifi_low_bps: float = 500_000    # WiFi throughput at or below which it counts as low: 500 kbit/s


class InterfacePolicy:
    """Base: `initial` interface, then `observe` each sample; one instance per run. `radios_on`:
    the watch's radios the policy keeps on all run, carrying or not - what the energy model
    charges each radio's base power for (workloads.run_energy). By default both: a policy that may
    switch rides the multipath transport, which keeps both paths' connections up (seed 003 §5.2:
    "we first leverage ConnectivityManager ... to keep WiFi active when BT is also on")."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""
    initial: ClassVar[str] = BT
    radios_on: ClassVar[frozenset[str]] = frozenset({BT, WIFI})
    # A policy of one's own reads samples, so only the chunked transport can carry its switches.
    transports: ClassVar[tuple[str, ...]] = (CHUNKED,)
    moves_on: ClassVar[str] = LOAD

    def __init__(self, options: PolicyOptions = PolicyOptions()) -> None:
        self.options = options
        self.active = self.initial

    def observe(self, s: Sample) -> Switch | None:
        raise NotImplementedError

    def _switch(self, t: float, to: str, reason: str) -> Switch:
        sw = Switch(t, self.active, to, reason)
        self.active = to
        return sw


class StaticBt(InterfacePolicy):
    name = "bt"
    doc = "BT through the phone, always (what most watches do while the phone is near)"
    initial = BT
    # Wear OS's default: "when BT is connected, WiFi is not available (i.e., its interface is
    # turned off by the OS)" (seed 003 §6.3), so WiFi's base power is saved.
    radios_on = frozenset({BT})
    # By route: what a watch's app does (the workload's first hop is the phone). Over the chunked
    # transport: beside `adaptive`, each paying the transport's framing (seed 003 §5's Fig. 12).
    transports = (ROUTE, CHUNKED)
    moves_on = STILL

    def observe(self, s: Sample) -> Switch | None:
        return None


class StaticWifi(InterfacePolicy):
    name = "wifi"
    doc = "WiFi straight to the AP, always"
    initial = WIFI
    # BT stays connected to the phone (the watch keeps its companion link; the transport keeps
    # the BT path's connection open), as under every policy: its base power is in the baseline.
    radios_on = frozenset({BT, WIFI})
    transports = (ROUTE, CHUNKED)
    moves_on = STILL

    def observe(self, s: Sample) -> Switch | None:
        return None


class Adaptive(InterfacePolicy):
    name = "adaptive"
    doc = ("the paper's: BT through the phone; WiFi once more than policy_backlog (B) has waited to cross BT (at the "
           "phone, or at the watch for an upload) for policy_t1 (T1); back to BT once WiFi carried at most policy_wifi_low for policy_t2 (T2)")
    initial = BT
    # §5.2: a switch moves the flow over the multipath framework, which keeps WiFi up all run.
    radios_on = frozenset({BT, WIFI})

    def __init__(self, options: PolicyOptions = PolicyOptions()) -> None:
        super().__init__(options)
        self.above_since: float | None = None    # first sample of the current run of backlog > B (on BT)
        self.low_since: float | None = None      # first sample of the current run of WiFi <= threshold (on WiFi)

    def observe(self, s: Sample) -> Switch | None:
        o = self.options
        if self.active == BT:
            if s.backlog_bytes <= o.backlog_bytes:
                self.above_since = None
                return None
            if self.above_since is None:
                self.above_since = s.t
            if s.t - self.above_since >= o.t1_s - EPSILON_S:
                self.above_since = None
                return self._switch(s.t, WIFI, f"{s.backlog_bytes} B waiting at the {s.backlog_side}, above "
                                               f"{o.backlog_bytes} B for {o.t1_s:g} s")
            return None
        if s.wifi_bps > o.wifi_low_bps:
            self.low_since = None
            return None
        if self.low_since is None:
            self.low_since = s.t
        if s.t - self.low_since >= o.t2_s - EPSILON_S:
            self.low_since = None
            return self._switch(s.t, BT, f"WiFi at {s.wifi_bps / 1e3:.0f} kbit/s, at most "
                                         f"{o.wifi_low_bps / 1e3:g} kbit/s for {o.t2_s:g} s")
        return None


class WalkPolicy(InterfacePolicy):
    """Base of the policies the user's walk away from the phone drives (seed 003 section 6):
    wearlab.nodes.handover runs them - the mobility model, the phases P1-P3 and the moves - and
    their `observe` is never called. They start on BT."""

    initial = BT
    moves_on = WALK

    def observe(self, s: Sample) -> Switch | None:
        return None


class Reactive(WalkPolicy):
    name = "reactive"
    doc = ("Wear OS's BT -> WiFi handover as the user walks away: BT until the OS gives up on it (P1), no "
           "network (P2), WiFi's association (P3), then the app reconnects (the workload's reconnect)")
    transports = (ROUTE,)


class WifiAlways(WalkPolicy):
    name = "wifi-always"
    doc = "reactive, with WiFi associated all along: after P1 the route moves to WiFi at once (no P2, P3)"
    transports = (ROUTE,)


class Proactive(WalkPolicy):
    name = "proactive"
    doc = ("the paper's proactive handover (§6.3): when the Kalman-smoothed BT RSSI falls below proactive_dbm, "
           "WiFi comes up and an MPTCP subflow over it takes the flow before BT fails (needs mptcp: true)")
    transports = (MPTCP,)
