"""Running a wearable's interface-selection policy (`interface_policy:`; the policies:
wearlab.nodes.interface_policies): measure, decide, move the flow, record.

Every POLL_S a thread in the runner (it can reach every node's namespace; the agents each see
only their own) measures, hands a `Sample` to the policy, and on a `Switch` sends the new path's
name to both multipath agents' control sockets, so the next chunks of either direction go on
that path's connection, already open (wearlab.nodes.multipath_agent's `Pin`).

What is measured, and where it really sits (seed 003 section 5.2 tracks "the bytes buffered at
the CPROXY" from what goes in and out of it): the bytes waiting to cross BT, in whichever
direction the flow goes, read on both sides of the BT link every poll (the selector does not
know the workload's direction, and a matrix may sweep it):
- toward the watch (a download: server -> watch), at the phone:
  - when the phone FORWARDS the BT path (kind host, or a relay not intercepting the transport's
    port 7101): its BT link's egress queue, the root qdisc's `backlog` on the phone's device
    toward the watch (`tc -s -j qdisc show`, in the phone's namespace; bytes on the wire,
    headers included). What the sender has in flight beyond that sits in the links and the
    watch, not in the phone, so it is not counted;
  - when a relay SPLITS the path (its `intercept:` lists 7101; seen, not assumed: the phone
    holds established TCP connections with the watch's BT address): the bytes sit in the
    proxy's sockets, the receive queues of its connections from the server agent (arrived, not
    yet read by the proxy) plus the send queues of its connections to the watch (written by
    the proxy, not yet acknowledged by the watch: this includes what waits in the BT qdisc, so
    the qdisc is not added, and the bytes in flight on BT, rate x RTT: 2.5 KB at 2 Mbit/s over
    a 10 ms RTT). Read from the phone's /proc/net/tcp (tx_queue, rx_queue), through a process
    in the phone's namespace. The proxy's own user-space buffer is invisible from there; the
    proxy kind says what it holds (ProxyKind.held_down), which is added (`backlog_at`
    "sockets+KIND": the paper's count, in minus out, whole): wearlab's `relay` keeps what its
    pipes hold in a file (relay.HeldBytes, `--held`); a kind that cannot tell leaves "sockets".
    Only the relay splits the path (its `intercept:` with 7101): HAProxy and a command proxy
    take only the workload's (server, port), so under them the phone forwards it (the qdisc);
- toward the phone (an upload: watch -> server), at the watch (`watch_backlog`): the watch agent
  writes each chunk into its BT path's TCP socket, and the bytes wait in three places there, each
  counted once: the watch's BT link's egress queue (the root qdisc's `backlog` on the watch's
  device toward the phone: what TCP has sent), the bytes the BT path's sockets hold written
  but not yet sent (tcpi_notsent_bytes, wearlab.nodes.tcp_diag), and the frames the agent has
  written that the socket's send buffer has not taken yet (asyncio's write buffer: the agent
  keeps it in its --held file, wearlab.nodes.held_file, at most HELD_TICK_S old). The unsent
  bytes are not small: the
  agent writes up to its window (multipath_window, 64 KB) at the app's rate, but TCP sends only
  within its congestion window, which grows by at most a segment per segment acknowledged, i.e.
  at BT's rate. Measured (the guest test: 2 Mbit/s offered, BT cut from 4 Mbit/s to 500 kbit/s):
  for the first ~100 ms the window left from the fast phase took everything into the qdisc (it
  passed B alone, 43 ms after the cut); then the qdisc stayed at 35-42 KB and the unsent bytes
  grew to 29 KB beside it (the two together the agent's 64 KB window, plus headers): a larger B,
  or a window from a slower phase, and the unsent part decides when B is passed. The
  socket's tx_queue (/proc/net/tcp: write_seq - snd_una) is NOT used: it holds the qdisc's bytes
  too (sent, unacknowledged), so adding it to the qdisc would count them twice. Not counted:
  the bytes in flight past the qdisc (past the watch), and the app's own bytes the agent has not
  read yet (held back by the agent's window: the app's, not the path's). A splitting phone
  changes nothing here: past BT, its sockets hold what has crossed;
- the sample's backlog is the larger of the two sides (`backlog_side` in the series says which;
  a tie, e.g. both empty, reads as the phone's): each BT direction is its own queue with its
  own rate here (netem shapes each egress), so B, a per-queue threshold (the paper's CPROXY
  buffer), applies to each, and a bidirectional flow (`direction: both`) switches when either
  direction cannot keep up; a sum would switch two half-loaded directions that both keep up.
  The other side's queue holds only the transport's ACKs (a TCP ACK per two segments, a 13-byte
  chunk ACK per chunk), far below B;
- the WiFi throughput: bytes received plus sent by the watch's WiFi interface (`ip -s -j link`,
  the watch's namespace) over the trailing THROUGHPUT_WINDOW_S.

Recorded (series `interface`): a `sample` row per poll (backlog, on which side and how it was
read, WiFi throughput, active path)
and a `switch` row per switch (from, to, reason); the live view shows the active interface.
"""

from __future__ import annotations

import importlib
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.model.media import Medium
from wearlab.model.ports import MULTIPATH_AGENT
from wearlab.nodes.handover import IpBatch
from wearlab.nodes.interface_policies import (INTERFACE_SERIES, PHONE, WATCH, InterfacePolicy, PolicyOptions, Sample,
                                              Switch)
from wearlab.nodes.proxies import ProxyKind
from wearlab.nodes.software import KindError
from wearlab.nodes.tcp_diag import TcpDiag
from wearlab.realize.linkctl import TcBatch

POLL_S = 0.02
SOCKET_PATH_MAX = 100
THROUGHPUT_WINDOW_S = 0.1        # the WiFi throughput is over the trailing 100 ms (5 polls)


def load_policy(spec: str) -> type[InterfacePolicy]:
    """'module:Class' (the plan's) -> the class."""
    module, _, cls = spec.partition(":")
    obj = getattr(importlib.import_module(module), cls)
    if not (isinstance(obj, type) and issubclass(obj, InterfacePolicy)):
        raise KindError(f"{spec} is not an InterfacePolicy subclass")
    return obj


def root_backlog(qdiscs: list[dict[str, Any]]) -> int:
    """The root qdisc's backlog in bytes (it includes its children's: netem alone, or htb's tree)."""
    roots = [q for q in qdiscs if q.get("root")]
    return int(roots[0].get("backlog", 0)) if roots else 0


def _endpoint(hexaddr: str) -> tuple[str, int]:
    """/proc/net/tcp's '0100007F:1F90' -> ('127.0.0.1', 8080) (the address in host byte order: little-endian)."""
    ip, port = hexaddr.split(":")
    return socket.inet_ntoa(int(ip, 16).to_bytes(4, "little")), int(port, 16)


def proxy_backlog(proc_net_tcp: str, watch_ip: str, upstreams: Collection[tuple[str, int]]) -> tuple[bool, int]:
    """Whether the phone splits the watch's connections (it holds established ones with
    `watch_ip`), and the bytes its proxy holds for the watch, from its namespace's /proc/net/tcp:
    the send queues (tx_queue: unacknowledged or unsent) of its established connections to
    `watch_ip` plus the receive queues (rx_queue: not yet read) of those to the `upstreams` (the
    server agents)."""
    total, split = 0, False
    for line in proc_net_tcp.splitlines()[1:]:
        f = line.split()
        if len(f) < 5 or f[3] != "01":          # 01: ESTABLISHED
            continue
        remote = _endpoint(f[2])
        tx, rx = (int(x, 16) for x in f[4].split(":"))
        if remote[0] == watch_ip:
            split = True
            total += tx
        elif remote in upstreams:
            total += rx
    return split, total


@dataclass(frozen=True)
class Backlog:
    """Bytes waiting to cross BT, on one side of it: `side` (phone: toward the watch; watch:
    toward the phone) and how they were read (`at`: qdisc, sockets, sockets+KIND,
    qdisc+unsent+agent)."""
    bytes: int
    side: str
    at: str


def watch_backlog(qdisc_backlog: int, notsent: int, agent_held: int) -> Backlog:
    """The bytes waiting at the watch to cross BT (module doc): its BT egress qdisc's, what its BT
    path's sockets hold unsent, and what the agent holds for them - three disjoint sets (sent;
    in the socket, not sent; not yet in the socket)."""
    return Backlog(qdisc_backlog + notsent + agent_held, WATCH, "qdisc+unsent+agent")


def larger(phone: Backlog, watch: Backlog) -> Backlog:
    """The sample's backlog: the larger side's (each BT direction is its own queue; module doc),
    the phone's on a tie."""
    return watch if watch.bytes > phone.bytes else phone


class WifiThroughput:
    """bit/s over the trailing `window` seconds from a cumulative byte counter."""

    def __init__(self, window: float = THROUGHPUT_WINDOW_S) -> None:
        self.window = window
        self.points: deque[tuple[float, int]] = deque()

    def add(self, t: float, total_bytes: int) -> float:
        self.points.append((t, total_bytes))
        while len(self.points) > 2 and self.points[1][0] <= t - self.window:
            self.points.popleft()
        t0, b0 = self.points[0]
        return (total_bytes - b0) * 8 / (t - t0) if t > t0 else 0.0


class InterfaceSelector:
    def __init__(self, kind, endpoints, *, phone: str) -> None:
        self.kind, self.net, self.watch, self.phone = kind, kind.net, kind.node, phone
        s, plan = kind.settings, kind.ctx.plan
        self.policy_name = s["interface_policy"]
        self.policy_class = load_policy(plan.interface_policies[self.policy_name])
        self.options = PolicyOptions(backlog_bytes=s["policy_backlog"], t1_s=s["policy_t1"], t2_s=s["policy_t2"],
                                     wifi_low_bps=s["policy_wifi_low"])
        self.watch_bt_ip = self.net.addresses.interface_to(self.watch, phone).ip
        # the server agents' (address, port), one per server node: the BT path's far ends
        self.server_agents = [(plan.addresses.address_of(n), MULTIPATH_AGENT) for n in plan.servers]
        self.phone_dev = self.net.addresses.interface_to(phone, self.watch).name
        self.watch_bt_dev = self.net.addresses.interface_to(self.watch, phone).name
        (wifi_end,) = [l for l in plan.link_ends(self.watch) if l.medium == Medium.WIFI]
        self.wifi_dev = self.net.addresses.interface_to(self.watch, wifi_end.peer).name
        self.endpoints = endpoints
        # The agents' control sockets: in the wearable's work directory (the network's teardown
        # removes it, after a signal too) unless its path is too long for a Unix socket's
        # (at most 107 bytes): then a private directory under /tmp that close() removes.
        self.own_dir = len(str(kind.workdir / "interface-server.sock")) > SOCKET_PATH_MAX
        self.sockdir = Path(tempfile.mkdtemp(prefix="wearlab-ifsel-")) if self.own_dir else kind.workdir
        self.sockdir.mkdir(parents=True, exist_ok=True)
        endpoints.active = self.policy_class.initial
        endpoints.control = {agent: self.sockdir / f"interface-{agent}.sock" for agent in endpoints.agents}
        self.policy: InterfacePolicy = self.policy_class(self.options)
        # The series' rows not yet taken (the runner takes them at each run's end; a hold every
        # few seconds): 50 samples a second would otherwise grow the process by ~100 MB an hour.
        self.rows: list[dict[str, Any]] = []
        self.last_sample: dict[str, Any] | None = None   # for live(), whoever took the rows
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.tc = self.ip = self.watch_tc = self.watch_tcp = None
        self.since_s: float | None = None
        self.switches = 0

    # -- per run ---------------------------------------------------------------------------------
    def run_started(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.policy = self.policy_class(self.options)      # each run starts where the policy starts
        self.switches, self.since_s = 0, 0.0
        self._tell(self.policy.active)
        if self.tc is None:
            self.tc, self.ip = TcBatch(self.net, self.phone), IpBatch(self.net, self.watch)
            self.watch_tc, self.watch_tcp = TcBatch(self.net, self.watch), TcpDiag(self.net, self.watch)
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="interface-policy")
        self._thread.start()

    def run_ended(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def close(self) -> None:
        self.run_ended()
        for b in (self.tc, self.ip, self.watch_tc, self.watch_tcp):
            if b is not None:
                b.close()
        self.tc = self.ip = self.watch_tc = self.watch_tcp = None
        if self.own_dir:
            shutil.rmtree(self.sockdir, ignore_errors=True)
        else:
            for path in self.endpoints.control.values():
                path.unlink(missing_ok=True)

    # -- the loop ----------------------------------------------------------------------------------
    def _tell(self, path: str) -> None:
        """Both agents move their sessions to `path` (a datagram each; an agent not up yet takes
        its start from --active)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            for side, addr in self.endpoints.control.items():
                try:
                    sock.sendto(path.encode(), str(addr))
                except OSError as e:
                    raise KindError(f"{self.watch}'s interface policy cannot reach the {side} agent: {e}") from None

    def _measure(self) -> tuple[Backlog, int]:
        """(the backlog: the larger side's, the WiFi interface's rx + tx bytes)."""
        # /proc/PID/net is the network namespace of PID: tc's batch process lives in the phone's.
        split, held = proxy_backlog(Path(f"/proc/{self.tc.proc.pid}/net/tcp").read_text(), self.watch_bt_ip,
                                    self.server_agents)
        if split:
            proxy = self.kind.ctx.peers.get(self.phone)
            own = proxy.held_down() if isinstance(proxy, ProxyKind) else None
            phone = Backlog(held, PHONE, "sockets") if own is None else \
                Backlog(held + own, PHONE, f"sockets+{proxy.name}")
        else:
            (qdiscs,) = self.tc.query([f"qdisc show dev {self.phone_dev}"])
            phone = Backlog(root_backlog(qdiscs), PHONE, "qdisc")
        (watch_qdiscs,) = self.watch_tc.query([f"qdisc show dev {self.watch_bt_dev}"])
        watch = watch_backlog(root_backlog(watch_qdiscs),
                              sum(self.watch_tcp.notsent(self.watch_bt_ip, *agent) for agent in self.server_agents),
                              self.endpoints.held("watch", Medium.BT.value))
        (links,) = self.ip.query([f"link show dev {self.wifi_dev}"])
        stats = links[0].get("stats64", links[0].get("stats", {}))
        return larger(phone, watch), int(stats.get("rx", {}).get("bytes", 0)) + int(stats.get("tx", {}).get("bytes", 0))

    def _loop(self) -> None:
        try:
            self._polls()
        except Exception as e:          # the run goes on without a policy: say so in its series
            t_ns = time.time_ns()
            with self.lock:
                self.rows.append({**dict.fromkeys(INTERFACE_SERIES.columns, ""),
                                  "t_s": round((t_ns - self.t0_ns) / 1e9, 6), "t_ns": t_ns, "event": "error",
                                  "active": self.policy.active, "reason": f"the policy stopped: {e}"})
            print(f"{self.watch}'s interface policy stopped: {e}", file=sys.stderr)

    def _polls(self) -> None:
        wifi = WifiThroughput()
        while not self._stop.wait(POLL_S):
            backlog, wifi_bytes = self._measure()
            t_ns = time.time_ns()
            t = (t_ns - self.t0_ns) / 1e9
            sample = Sample(t, backlog.bytes, wifi.add(t, wifi_bytes), backlog.side)
            switch = self.policy.observe(sample)
            if switch is not None:
                self._tell(switch.to)
            self._record(t_ns, sample, backlog.at, switch)

    def _record(self, t_ns: int, sample: Sample, where: str, switch: Switch | None) -> None:
        base = {"t_s": round(sample.t, 6), "t_ns": t_ns, "backlog_bytes": sample.backlog_bytes,
                "backlog_side": sample.backlog_side, "backlog_at": where, "wifi_bps": round(sample.wifi_bps)}
        with self.lock:
            self.last_sample = {**base, "event": "sample", "active": self.policy.active if switch is None else switch.from_,
                                "from": "", "to": "", "reason": ""}
            self.rows.append(self.last_sample)
            if switch is not None:
                self.rows.append({**base, "event": "switch", "active": switch.to, "from": switch.from_,
                                  "to": switch.to, "reason": switch.reason})
                self.switches += 1
                self.since_s = sample.t

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            new, self.rows = self.rows, []
        return new

    def live(self) -> dict[str, Any]:
        """The live record's InterfaceState: the active path, and what the policy decides on (the
        last poll's inputs beside its thresholds), so `wearlab top` shows why it switches."""
        with self.lock:
            last = self.last_sample
        return {"policy": self.policy_name, "active": self.policy.active, "since_s": self.since_s,
                "switches": self.switches, "backlog_limit": self.options.backlog_bytes,
                "wifi_low_bps": self.options.wifi_low_bps,
                **({"backlog_bytes": last["backlog_bytes"], "backlog_side": last["backlog_side"],
                    "wifi_bps": last["wifi_bps"]} if last else {})}

    def facts(self) -> dict[str, Any]:
        o = self.options
        agents = ", ".join(f"{ip}:{port}" for ip, port in self.server_agents)
        return {"policy": self.policy_name, "class": f"{self.policy_class.__module__}:{self.policy_class.__qualname__}",
                "initial": self.policy_class.initial, "backlog_bytes": o.backlog_bytes, "t1_s": o.t1_s, "t2_s": o.t2_s,
                "wifi_low_bps": o.wifi_low_bps, "poll_s": POLL_S, "throughput_window_s": THROUGHPUT_WINDOW_S,
                "backlog_measured": (f"the larger of two sides (series columns backlog_side, backlog_at). Toward "
                                     f"{self.watch}, at {self.phone}: forwarding (no TCP connection with "
                                     f"{self.watch_bt_ip}), the root qdisc backlog of {self.phone}:{self.phone_dev}; "
                                     f"splitting, the send queues of its TCP connections to {self.watch_bt_ip} + the "
                                     f"receive queues of those to {agents} (/proc/net/tcp) + "
                                     f"what the proxy holds in its own buffers toward the watch, as its kind tells it "
                                     f"(wearlab's relay: its --held file). "
                                     f"Toward {self.phone}, at {self.watch}: the root qdisc backlog of "
                                     f"{self.watch}:{self.watch_bt_dev} + the unsent bytes (tcpi_notsent_bytes) of its "
                                     f"TCP connections from {self.watch_bt_ip} to {agents} + what the "
                                     f"watch agent's write buffers hold toward its bt path (its --held file)"),
                "wifi_measured": f"rx + tx bytes of {self.watch}:{self.wifi_dev}"}
