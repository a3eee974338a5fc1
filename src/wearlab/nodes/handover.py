"""BT -> WiFi handover of a watch walking away from its phone (seed 003 section 6, Table 5).

Mobility: the user walks away from the phone at `walk_speed` from `walk_start` on; BT RSSI
follows the log-distance path-loss model RSSI(d) = rssi_1m - 10 n log10(d / 1 m) + shadowing,
d = 1 m + speed (t - walk_start), n = 2.5 (ASSUMPTION: indoor, body-worn), rssi_1m -50 dBm (the
paper's watch on a desk), shadowing Gaussian sigma 2 dB per 100 ms sample (seeded). Quality model
(ASSUMPTION, the paper gives no curve): the BT link works as its profile says while RSSI stays
above `bt_unusable` (-85 dBm, about a BT Classic receiver's sensitivity); below it, it carries
nothing (loss 100 %) although both ends still believe it is connected.

Reactive policy (Wear OS's default), the paper's four phases:
- P1 "BT connected but unusable": from the moment the link stops carrying until the OS gives up
  on BT: timer `p1` (paper mean 12.9 s); then the watch's BT interface goes down (routes vanish);
- P2 "no network": timer `p2` (15.5 s); then the WiFi interface comes up;
- P3 "WiFi association": timer `p3` (8.3 s) during which WiFi carries nothing; then the watch
  routes to the server through the AP;
- P4 "app reconnect": the app's own behaviour (the stream workload's `reconnect`).
`wifi-always`: WiFi is associated all along, so after P1 the route moves at once (P2 = P3 = 0).

Proactive policy (the paper's section 6.3, on-demand WiFi): a Kalman filter smooths the RSSI
samples (random-walk model: process noise KALMAN_Q dB^2 per sample, measurement noise the
shadowing's variance); when the estimate falls below `proactive_dbm` (-66 dBm, the paper's) WiFi
comes up and associates (P3), then an MPTCP subflow over WiFi joins the app's connection (an
`ip mptcp endpoint ... subflow` on the watch, source-routed through the AP) and the BT subflow is
marked backup (MP_PRIO), so the flow moves to WiFi and stays there; when BT later fails (P1,
then its interface goes down) nothing is left on it. The app must use MPTCP (`mptcp: true`) and
the phone must route (kind host), so the connection is end to end.

Measured, not copied from the timers: a monitor polls the watch's interfaces every POLL_S
(operational state and packets received, `ip -s -j link`) and logs what it sees - BT's last
reception, BT down, WiFi up, WiFi's first reception - into series/handover.csv; the workload's
deliveries give the app's gap (`down_gap_max_s`).
"""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

from wearlab.model.timeline import LinkChange
from wearlab.nodes.interface_policies import WalkPolicy
from wearlab.realize.linkctl import TcBatch

POLL_S = 0.02
RSSI_STEP_S = 0.1
POLICIES = tuple(p.name for p in WalkPolicy.__subclasses__())   # the policies this module runs
KALMAN_Q = 0.5
WIFI_TABLE = 100                # the watch's routing table for sources on its WiFi address


def kalman(samples: list[tuple[float, float]], measurement_var: float, q: float = KALMAN_Q) -> list[tuple[float, float]]:
    """(t, smoothed RSSI): a one-dimensional Kalman filter with a random-walk state."""
    out, x, p = [], None, 0.0
    for t, z in samples:
        if x is None:
            x, p = z, measurement_var
        else:
            p += q
            k = p / (p + max(measurement_var, 1e-9))
            x += k * (z - x)
            p *= 1 - k
        out.append((t, x))
    return out


def rssi_trace(*, walk_start: float, speed: float, rssi_1m: float, exponent: float, shadowing_db: float,
               rng: random.Random, until: float) -> list[tuple[float, float]]:
    """(t, RSSI dBm) every RSSI_STEP_S from 0 to `until`."""
    out = []
    for i in range(int(until / RSSI_STEP_S) + 1):
        t = i * RSSI_STEP_S
        d = 1.0 + speed * max(0.0, t - walk_start)
        out.append((t, rssi_1m - 10 * exponent * math.log10(d) + rng.gauss(0.0, shadowing_db)))
    return out


class IpBatch(TcBatch):
    """`ip -s -j -batch -` in a node (the same line protocol as tc's)."""

    TOOL = "ip"


class HandoverController:
    def __init__(self, kind, *, bt_peer: str, ap: str, settings: dict[str, Any], rng: random.Random):
        self.kind, self.net, self.watch = kind, kind.net, kind.node
        self.phone, self.ap, self.s, self.rng = bt_peer, ap, settings, rng
        self.bt_dev = self.net.addresses.interface_to(self.watch, self.phone).name
        self.wifi_dev = self.net.addresses.interface_to(self.watch, self.ap).name
        self.ap_ip = self.net.addresses.interface_to(self.watch, self.ap).peer_ip
        self.events: list[dict[str, Any]] = []
        self.taken: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.ip = IpBatch(self.net, self.watch)
        self.walk = threading.Event()      # `wearlab handover now` (walk_start: manual)
        self.walk_at: float | None = None

    # -- per run -------------------------------------------------------------------------------
    def run_started(self, t0_ns: int, server_ip: str) -> None:
        self.t0_ns, self.server_ip = t0_ns, server_ip
        self.taken: list[dict[str, Any]] = []
        self._stop.clear()
        wifi_on = self.s["interface_policy"] == "wifi-always"
        self.net.sh(self.watch, f"ip link set {self.wifi_dev} {'up' if wifi_on else 'down'}")
        # Each run starts with fresh neighbour caches on both ends of the watch's links: the last
        # run's teardown (its BT link still dropping everything until the links are reset) can
        # leave an entry FAILED, and a connect through it fails at once with EHOSTUNREACH - which
        # the tinyCam app would answer by waiting its 60 s before trying again.
        for node, peer in ((self.watch, self.phone), (self.phone, self.watch), (self.watch, self.ap),
                           (self.ap, self.watch)):
            self.net.sh(node, f"ip neigh flush dev {self.net.addresses.interface_to(node, peer).name}", check=False)
        if self.s["interface_policy"] == "proactive":
            server = self.kind.ctx.plan.endpoints["server"]
            wifi_ip = self.net.addresses.interface_to(self.watch, self.ap).ip
            for node in (self.watch, server):
                self.net.sh(node, "ip mptcp endpoint flush && ip mptcp limits set subflow 2 add_addr_accepted 2")
            self.net.sh(self.watch, f"(ip rule del from {wifi_ip} table {WIFI_TABLE} 2>/dev/null; true) && "
                                    f"ip rule add from {wifi_ip} table {WIFI_TABLE}")
        self._threads = [threading.Thread(target=self._policy, daemon=True, name="handover"),
                         threading.Thread(target=self._monitor, daemon=True, name="handover-monitor")]
        for th in self._threads:
            th.start()

    def run_ended(self) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout=5)
        # Back to the start: BT up (its routes return with it), WiFi down, the server via the phone.
        self.net.sh(self.watch, f"ip link set {self.bt_dev} up && ip link set {self.wifi_dev} down")
        if self.s["interface_policy"] == "proactive":
            self.net.sh(self.watch, "ip mptcp endpoint flush", check=False)
        phone_ip = self.net.addresses.interface_to(self.watch, self.phone).peer_ip
        self.net.sh(self.watch, f"ip route replace {self.server_ip}/32 via {phone_ip} dev {self.bt_dev}")

    def _log(self, event: str, detail: str = "", t_ns: int | None = None) -> None:
        t_ns = t_ns or time.time_ns()
        with self.lock:
            self.events.append({"t_s": (t_ns - self.t0_ns) / 1e9, "t_ns": t_ns, "event": event, "detail": detail})

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            rows, self.events = self.events, []
            self.taken += rows
        return rows

    def last_event(self) -> dict[str, Any] | None:
        with self.lock:
            rows = [e for e in [*self.taken, *self.events] if not e["event"].startswith("seen:")]
        return rows[-1] if rows else None

    def phases(self) -> dict[str, float | None]:
        """P1-P3 of the run that just ended, from what the interfaces showed (the reactive path's
        phases; a proactive handover has none: the app's gap is its measure)."""
        if self.s["interface_policy"] == "proactive":
            return {f"handover_p{i}_s": None for i in (1, 2, 3)}
        with self.lock:
            seen = {e["event"]: e["t_ns"] for e in [*self.taken, *self.events] if e["event"].startswith("seen:")}
        marks = [seen.get("seen: BT last reception"), seen.get("seen: BT DOWN"), seen.get("seen: WiFi UP"),
                 seen.get("seen: WiFi first reception")]
        if self.s["interface_policy"] == "wifi-always":
            marks[2] = marks[1]   # WiFi was up all along: P2 = 0, P3 = BT down -> first reception
        out = {}
        for i in range(3):
            a, b = marks[i], marks[i + 1]
            out[f"handover_p{i + 1}_s"] = (b - a) / 1e9 if a is not None and b is not None else None
        return out

    def _sleep_until(self, t_s: float) -> bool:
        """False when stopped first."""
        left = self.t0_ns / 1e9 + t_s - time.time()
        return not self._stop.wait(max(0.0, left))

    def _link(self, peer: str, action: str, why: str) -> None:
        change = LinkChange(0.0, (self.watch, peer), ((self.watch, peer), (peer, self.watch)), action,
                            origin=f"handover: {why}")
        applied = self.kind.ctx.links.apply(change)
        self.kind.ctx.changes.add(applied, change, "handover")

    # -- the policy ----------------------------------------------------------------------------
    def walk_now(self) -> str:
        if self.s["walk_start"] is not None:
            return f"{self.watch} walks away at {self.s['walk_start']:g} s of each run already (walk_start)"
        if self.walk.is_set():
            return f"{self.watch} is walking away already"
        self.walk_at = (time.time_ns() - self.t0_ns) / 1e9
        self.walk.set()
        return f"{self.watch} starts walking away now ({self.walk_at:.1f} s into the run)"

    def _policy(self) -> None:
        s = dict(self.s)
        if s["walk_start"] is None:        # manual: wait for `wearlab handover now`
            self.walk.clear()
            self._log("waiting", "for `wearlab handover now`")
            while not self.walk.wait(0.1):
                if self._stop.is_set():
                    return
            s["walk_start"] = self.walk_at
        trace = rssi_trace(walk_start=s["walk_start"], speed=s["walk_speed"], rssi_1m=s["rssi_1m"],
                           exponent=s["path_loss_exponent"], shadowing_db=s["shadowing_db"], rng=self.rng,
                           until=self.kind.ctx.plan.timeout_s + 600)
        crossing = next((t for t, r in trace if r < s["bt_unusable"] and t >= s["walk_start"]), None)
        self._log("walk", f"from {s['walk_start']:g} s at {s['walk_speed']:g} m/s; BT below "
                          f"{s['bt_unusable']:g} dBm at {crossing if crossing is None else round(crossing, 1)} s")
        if s["interface_policy"] == "proactive" and not self._proactive(trace, s):
            return
        if crossing is None or not self._sleep_until(crossing):
            return
        self._link(self.phone, "down", "BT unusable")
        self._log("P1 start", f"RSSI below {s['bt_unusable']:g} dBm: BT connected but unusable")
        t = crossing + s["p1"]
        if not self._sleep_until(t):
            return
        self.net.sh(self.watch, f"ip link set {self.bt_dev} down")
        self._log("BT disconnected", "the OS gives up on BT (end of P1)")
        if s["interface_policy"] == "proactive":
            return   # the flow is on WiFi already; BT's end changes nothing
        if s["interface_policy"] == "reactive":
            t += s["p2"]
            if not self._sleep_until(t):
                return
            self._link(self.ap, "down", "associating")
            self.net.sh(self.watch, f"ip link set {self.wifi_dev} up")
            self._log("WiFi on", "association starts (end of P2)")
            t += s["p3"]
            if not self._sleep_until(t):
                return
            self._link(self.ap, "up", "associated")
        self.net.sh(self.watch, f"ip route replace {self.server_ip}/32 via {self.ap_ip} dev {self.wifi_dev}")
        # What a real association ends with (DHCP, the gateway's ARP): one exchange with the AP,
        # which is what the monitor sees as WiFi's first reception.
        self.net.sh(self.watch, f"ping -n -c 1 -W 2 {self.ap_ip} >/dev/null", check=False)
        self._log("WiFi connected", "the server is routed through the AP (end of P3)")

    def _proactive(self, trace: list[tuple[float, float]], s: dict[str, Any]) -> bool:
        """WiFi up and a WiFi subflow in before BT fails; False when the run ended first."""
        smooth = kalman(trace, s["shadowing_db"] ** 2)
        predicted = next((t for t, x in smooth if x < s["proactive_dbm"] and t >= s["walk_start"]), None)
        if predicted is None or not self._sleep_until(predicted):
            return False
        self._log("predicted", f"Kalman-smoothed RSSI below {s['proactive_dbm']:g} dBm: WiFi on")
        self._link(self.ap, "down", "associating")
        self.net.sh(self.watch, f"ip link set {self.wifi_dev} up")
        if not self._sleep_until(predicted + s["p3"]):
            return False
        self._link(self.ap, "up", "associated")
        wifi_ip = self.net.addresses.interface_to(self.watch, self.ap).ip
        bt_ip = self.net.addresses.interface_to(self.watch, self.phone).ip
        self.net.sh(self.watch, f"ip route replace default via {self.ap_ip} dev {self.wifi_dev} table {WIFI_TABLE} && "
                                f"ip mptcp endpoint add {wifi_ip} dev {self.wifi_dev} subflow && "
                                f"ip mptcp endpoint add {bt_ip} dev {self.bt_dev} backup")
        self._log("WiFi subflow", "an MPTCP subflow over WiFi joins; BT marked backup")
        return True

    # -- what the interfaces show --------------------------------------------------------------
    def _state(self) -> dict[str, tuple[str, int]]:
        # One `link show dev X` each: a batch's `show dev` filter may stick to later plain shows.
        answers = self.ip.query([f"link show dev {self.bt_dev}", f"link show dev {self.wifi_dev}"])
        return {l["ifname"]: (l.get("operstate", "?"), l.get("stats64", l.get("stats", {})).get("rx", {}).get("packets", 0))
                for links in answers for l in links}

    def _monitor(self) -> None:
        prev = self._state()
        bt_last_rx = time.time_ns()
        wifi_seen = bt_gone = False
        while not self._stop.wait(POLL_S):
            now = self._state()
            t = time.time_ns()
            (bt_op, bt_rx), (wifi_op, wifi_rx) = now[self.bt_dev], now[self.wifi_dev]
            if bt_rx > prev[self.bt_dev][1]:
                bt_last_rx = t
            if bt_op != prev[self.bt_dev][0]:
                if bt_op == "DOWN":
                    bt_gone = True
                    self._log("seen: BT last reception", "", bt_last_rx)
                self._log(f"seen: BT {bt_op}")
            if wifi_op != prev[self.wifi_dev][0]:
                self._log(f"seen: WiFi {wifi_op}")
            if bt_gone and wifi_op == "UP" and not wifi_seen and wifi_rx > prev[self.wifi_dev][1]:
                wifi_seen = True
                self._log("seen: WiFi first reception")
            prev = now

    def close(self) -> None:
        self._stop.set()
        self.ip.close()
