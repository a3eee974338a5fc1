"""The Bluetooth radio's Active/Sniff state machine on a watch-phone link (seed 003 section 3,
Fig. 2-4), driven by what the link really carries.

The paper's findings, as emulated:
- Phone side: any data sent or received wakes it and resets its inactivity timer (5 s).
- Watch side: only its OWN transmissions wake it or reset its timer (5 s or 2 s): receptions do
  not. So a receive-only download sends the watch into Sniff every `sniff_timer` seconds: the
  "undesired Sniff mode".
- When the watch enters Sniff during a download, the link delivers nothing until the phone's
  request brings it back: `recovery`, uniformly 0.5-1.2 s by default (configurable).
- The fix: `uplink_keepalive` - the watch sends a small packet just before its timer expires
  (the paper's background app), which keeps the radio Active.

What counts as the watch's own transmission: an IP packet of >= 128 bytes leaving the watch
towards the phone (>= 76 bytes of TCP payload), counted by a classic-BPF tc filter on the watch's
egress (clsact, before any qdisc). The watch's TCP ACKs of a download do not count: in Wear OS the
watch-phone link is an RFCOMM/L2CAP channel that acknowledges at its own layer, so a download is
receive-only at the radio, which is why the paper sees the blackouts.

During a blackout data is HELD, not dropped: BT ACL links are reliable (L2CAP/baseband
retransmission) and both controllers buffer, so the paper's traces show delay spikes, not loss.
Held = a `plug` qdisc below each end's netem, blocked while asleep and released on waking. (A
link that goes out of range drops instead: timeline `state: down`.)

Wake-up from Sniff: the phone has data for the watch (its plug holds a packet) -> after
`recovery` (the paper's case: a download goes on); otherwise, the watch has anything to send
(a SYN, a request) -> after `watch_wake` (ASSUMPTION: 100 ms, about one sniff interval: the watch
wakes itself at its next anchor point; the paper gives no figure). Idle in both directions for
the phone's timer also puts the link to sleep.

`BtRadio` is the pure state machine (tests feed it observations); `RadioController` polls the
counters every POLL_S through a `tc -batch` per node and blocks/releases the plugs.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from wearlab.model.choices import RadioState
from wearlab.realize.linkctl import TcBatch

POLL_S = 0.02
OWN_TX_MIN_IP_BYTES = 128
FILTER_PRIO = 7
PLUG_HANDLE = "20:"
KEEPALIVE_MARGIN_S = 0.3       # the keepalive goes out this long before the watch's timer expires
KEEPALIVE_PAYLOAD = 100        # UDP payload bytes: a 128-byte IP packet, counted as own data
KEEPALIVE_PORT = 9             # discard
# ldh [net + 2] (IP total length); jge 128; ret -1 (match) : ret 0
OWN_TX_BPF = f"4,40 0 0 {(1 << 32) - 0x100000 + 2},53 0 1 {OWN_TX_MIN_IP_BYTES},6 0 0 {(1 << 32) - 1},6 0 0 0"

# Short names for the state machine's own code and its tests; the states are model.choices'.
ACTIVE, SNIFF, WAKING = RadioState.ACTIVE, RadioState.SNIFF, RadioState.WAKING


@dataclass
class Transition:
    t: float
    state: RadioState
    reason: str
    recovery_s: float | None = None


class BtRadio:
    """The link's radio state from observations at times t (seconds, any origin)."""

    def __init__(self, *, sniff_timer: float | None, phone_timer: float = 5.0, recovery: tuple[float, float] = (0.5, 1.2),
                 watch_wake: float = 0.1, rng: random.Random | None = None, t0: float = 0.0):
        self.sniff_timer, self.phone_timer = sniff_timer, phone_timer
        self.recovery, self.watch_wake = recovery, watch_wake
        self.rng = rng or random.Random(0)
        self.state = ACTIVE
        self.last_watch_tx = self.last_activity = t0
        self.wake_at: float | None = None

    def step(self, t: float, *, watch_own_tx: bool, activity: bool, phone_waiting: bool,
             watch_waiting: bool = False) -> Transition | None:
        """watch_own_tx: the watch sent data of its own since the last step; activity: anything
        crossed the link (either way, ACKs included); phone_waiting / watch_waiting: that side
        holds packets for the other (only meaningful while asleep)."""
        if self.state == ACTIVE:
            if watch_own_tx:
                self.last_watch_tx = t
            if watch_own_tx or activity:
                self.last_activity = t
            if self.sniff_timer is not None and t - self.last_watch_tx >= self.sniff_timer:
                return self._to(t, SNIFF, "watch timer expired")
            if t - self.last_activity >= self.phone_timer and t - self.last_watch_tx >= self.phone_timer:
                return self._to(t, SNIFF, "idle")
            return None
        if self.state == SNIFF:
            if phone_waiting:
                lo, hi = self.recovery
                return self._wake(t, self.rng.uniform(lo, hi), "phone request")
            if watch_own_tx or watch_waiting:
                return self._wake(t, self.watch_wake, "watch transmits")
            return None
        if t >= self.wake_at:
            self.wake_at = None
            self.last_watch_tx = self.last_activity = t
            return self._to(t, ACTIVE, "recovered")
        return None

    def _wake(self, t: float, after: float, reason: str) -> Transition:
        self.wake_at = t + after
        tr = self._to(t, WAKING, reason)
        tr.recovery_s = after
        return tr

    def _to(self, t: float, state: RadioState, reason: str) -> Transition:
        self.state = state
        return Transition(t, state, reason)

    def force(self, t: float, what: str) -> Transition | None:
        """A teacher's `wearlab radio sleep|wake`: the watch falls asleep now (and the usual rules
        wake it), or wakes now."""
        if what == "sleep" and self.state == ACTIVE:
            return self._to(t, SNIFF, "forced: wearlab radio sleep")
        if what == "wake" and self.state != ACTIVE:
            self.wake_at = None
            self.last_watch_tx = self.last_activity = t
            return self._to(t, ACTIVE, "forced: wearlab radio wake")
        return None

    def keepalive_due(self, t: float) -> bool:
        """The fix: the watch's timer is about to expire and the radio is awake."""
        return (self.state == ACTIVE and self.sniff_timer is not None
                and t - self.last_watch_tx >= max(0.0, self.sniff_timer - KEEPALIVE_MARGIN_S))


KEEPALIVE = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload = b"k" * int(sys.argv[2])
print("ready", flush=True)
for _ in sys.stdin:
    s.sendto(payload, (sys.argv[1], int(sys.argv[3])))
"""


class RadioController:
    """Runs a BtRadio on the watch-phone link of a built network."""

    def __init__(self, net, watch: str, phone: str, radio: BtRadio, *, keepalive: bool):
        self.net, self.watch, self.phone, self.radio = net, watch, phone, radio
        self.w_dev = net.addresses.interface_to(watch, phone).name
        self.p_dev = net.addresses.interface_to(phone, watch).name
        self.keepalive = keepalive
        self.transitions: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.batches: dict[str, TcBatch] = {}
        self.keepalives = 0
        self._ka = None
        self.forced: str | None = None    # `wearlab radio sleep|wake`, taken by the loop

    # -- set-up ------------------------------------------------------------------------------
    def _plug_parent(self, node: str, dev: str) -> str:
        """netem's class on dev: the plug goes below it (netem keeps its child across changes)."""
        qd = self.batches[node].query([f"qdisc show dev {dev}"])[0]
        netem = [q for q in qd if q.get("kind") == "netem"]
        if not netem:
            raise RuntimeError(f"{node}:{dev} has no netem qdisc to hang the radio's plug below")
        return netem[0]["handle"].rstrip(":") + ":1"

    def install(self) -> None:
        for node in (self.watch, self.phone):
            self.batches[node] = TcBatch(self.net, node)
        self.parents = {}
        for node, dev in ((self.watch, self.w_dev), (self.phone, self.p_dev)):
            parent = self.parents[node] = self._plug_parent(node, dev)
            present = any(q.get("kind") == "plug" for q in self.batches[node].query([f"qdisc show dev {dev}"])[0])
            lines = [] if present else [f"qdisc add dev {dev} parent {parent} handle {PLUG_HANDLE} plug limit 10000000"]
            said = self.batches[node].run([*lines, f"qdisc change dev {dev} parent {parent} handle {PLUG_HANDLE} "
                                                   "plug release_indefinite"])
            if said:
                raise RuntimeError(f"{node}: the radio needs the plug qdisc: {said}")
        # One own-data counter per watch interface: a restarted radio (next cell) replaces it.
        self.net.sh(self.watch, f"(tc qdisc show dev {self.w_dev} | grep -q clsact || tc qdisc add dev {self.w_dev} clsact) && "
                                f"(tc filter del dev {self.w_dev} egress prio {FILTER_PRIO} 2>/dev/null; true) && "
                                f"tc filter add dev {self.w_dev} egress prio {FILTER_PRIO} protocol ip bpf bytecode "
                                f"'{OWN_TX_BPF}' action continue")
        if self.keepalive:
            phone_ip = self.net.addresses.interface_to(self.watch, self.phone).peer_ip
            self._ka = self.net.popen(self.watch, [sys.executable, "-c", KEEPALIVE, phone_ip, str(KEEPALIVE_PAYLOAD),
                                                   str(KEEPALIVE_PORT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True)
            if self._ka.stdout.readline().strip() != "ready":
                raise RuntimeError("the watch's keepalive sender did not start")

    # -- running -----------------------------------------------------------------------------
    def _counters(self) -> tuple[int, int, int, int, int]:
        """(watch own-data packets, watch sent packets, phone sent packets, phone plug qlen,
        watch plug qlen)."""
        filt, wq = self.batches[self.watch].query([f"filter show dev {self.w_dev} egress", f"qdisc show dev {self.w_dev}"])
        (pq,) = self.batches[self.phone].query([f"qdisc show dev {self.p_dev}"])
        own = sum(a["stats"]["packets"] for f in filt if f.get("pref") == FILTER_PRIO
                  for a in f.get("options", {}).get("actions", []))
        w_root = next(q for q in wq if q.get("root"))["packets"]
        p_root = next(q for q in pq if q.get("root"))["packets"]
        p_plug = next((q for q in pq if q.get("kind") == "plug"), {}).get("qlen", 0)
        w_plug = next((q for q in wq if q.get("kind") == "plug"), {}).get("qlen", 0)
        return own, w_root, p_root, p_plug, w_plug

    def _set_plugs(self, block: bool) -> None:
        verb = "block" if block else "release_indefinite"
        for node, dev in ((self.watch, self.w_dev), (self.phone, self.p_dev)):
            said = self.batches[node].run([f"qdisc change dev {dev} parent {self.parents[node]} handle {PLUG_HANDLE} plug {verb}"])
            if said:
                raise RuntimeError(f"{node}: plug {verb}: {said}")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bt-radio", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # noqa: BLE001 - recorded in the radio series; the plugs are released
            with self.lock:
                self.transitions.append({"t_ns": time.time_ns(), "state": "error", "reason": str(e)[:300],
                                         "recovery_s": None})

    def _loop(self) -> None:
        last = self._counters()
        while not self._stop.wait(POLL_S):
            now = self._counters()
            t = time.monotonic()
            own, sent_w, sent_p, phone_waiting, watch_waiting = now
            forced, self.forced = self.forced, None
            if forced is not None:
                tr = self.radio.force(t, forced)
            else:
                tr = self.radio.step(t, watch_own_tx=own > last[0], activity=sent_w > last[1] or sent_p > last[2],
                                     phone_waiting=phone_waiting > 0, watch_waiting=watch_waiting > 0)
            last = now
            if tr is not None:
                if tr.state == SNIFF:
                    self._set_plugs(True)
                elif tr.state == ACTIVE:
                    self._set_plugs(False)
                with self.lock:
                    self.transitions.append({"t_ns": time.time_ns(), "state": tr.state, "reason": tr.reason,
                                             "recovery_s": tr.recovery_s})
            if self.keepalive and self._ka is not None and self.radio.keepalive_due(t):
                self._ka.stdin.write("\n")
                self._ka.stdin.flush()
                self.keepalives += 1
                self.radio.last_watch_tx = t   # sent now; the filter will count it on the next poll

    def take(self, t0_ns: int) -> list[dict[str, Any]]:
        with self.lock:
            rows, self.transitions = self.transitions, []
        return [{"t_s": (r["t_ns"] - t0_ns) / 1e9, "link": f"{self.watch}-{self.phone}", **r} for r in rows]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._set_plugs(False)
        except Exception:  # noqa: BLE001 - teardown goes on
            pass
        if self._ka is not None and self._ka.poll() is None:
            self._ka.kill()
        for b in self.batches.values():
            b.close()
