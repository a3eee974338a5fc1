"""The virtual-queue mitigation of CPROXY bufferbloat (Zhu et al., seed 003 section 4.3).

The phone keeps ONE virtual queue for all the connections it relays:

    Q = sum over connections (bytes received from the server - bytes acknowledged by the watch)

both read from the kernel with getsockopt(TCP_INFO): tcpi_bytes_received of the server-side
socket and tcpi_bytes_acked of the watch-side socket. Q is every byte that has reached the phone
and not yet the watch - in the phone's receive buffer, the relay, its send buffer and on BT.
When Q exceeds Q_UB = BW (1 - eps) T the server -> phone direction is throttled to BW/2; below
Q_LB = BW (1 - 2 eps) T it is released. T and eps default to the paper's 1 s and 0.3. The
throttle is an htb class on the phone's ifb (RelayProxy builds it), changed in place with
`tc class change` (released = 10 Gbit/s).

BW, the BT side's rate, is estimated while the relay runs: the watch side's acknowledged bytes
(summed over connections, closed ones included) over a sliding window of WINDOW_S, counted only
while the queue stayed backlogged (Q above BACKLOG_BYTES through the window) - an idle link says
nothing about what BT can carry. Until the first estimate there are no thresholds and nothing is
throttled; the estimate never falls below MIN_BW_BPS (a blackout inside a backlogged window would
otherwise make it zero). The estimate and thresholds are written every sample to the series file
(t_ns,vq_bytes,bw_bps,q_ub_bytes,q_lb_bytes,throttled).

`Decision` logic is pure (`VirtualQueue.step`), so tests feed it samples; the controller does the
I/O (TCP_INFO, tc, the series file).
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass

# struct tcp_info (include/uapi/linux/tcp.h): 8 u8-sized fields, 24 u32 fields (through
# tcpi_total_retrans at offset 100), then u64 pacing_rate (104), max_pacing_rate (112),
# bytes_acked (120), bytes_received (128).
TCP_INFO_LEN = 232
OFF_BYTES_ACKED = 120
OFF_BYTES_RECEIVED = 128

SAMPLE_S = 0.05
WINDOW_S = 1.0
BACKLOG_BYTES = 3000          # two full segments: the BT side had something to send
RELEASED_RATE = "10gbit"
MIN_BW_BPS = 64_000           # floor: a window of a stalled link (a BT blackout while backlogged)
                              # must not drive the thresholds, and the throttle rate, to zero


def tcp_bytes(sock: socket.socket) -> tuple[int, int]:
    """(bytes_acked, bytes_received) of a TCP socket, from TCP_INFO. Linux's bytes_acked counts
    the SYN's (and later the FIN's) sequence number too: one byte off, which Q ignores."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    if len(raw) < OFF_BYTES_RECEIVED + 8:
        raise OSError("TCP_INFO too short for tcpi_bytes_received (Linux >= 4.1 needed)")
    acked, = struct.unpack_from("=Q", raw, OFF_BYTES_ACKED)
    received, = struct.unpack_from("=Q", raw, OFF_BYTES_RECEIVED)
    return acked, received


@dataclass
class Sample:
    t: float            # s (monotonic)
    queue: int          # bytes (Q)
    acked_total: int    # the watch side's acknowledged bytes so far, all connections


@dataclass
class Decision:
    queue: int
    bw_bps: float | None
    q_ub: float | None
    q_lb: float | None
    throttled: bool
    changed: bool


class VirtualQueue:
    """The controller's state: BW estimate and throttle, one sample at a time."""

    def __init__(self, T: float = 1.0, epsilon: float = 0.3):
        if not (0 < epsilon < 0.5) or T <= 0:
            raise ValueError("need 0 < epsilon < 0.5 and T > 0")
        self.T, self.epsilon = T, epsilon
        self.window: deque[Sample] = deque()
        self.bw_bps: float | None = None
        self.throttled = False

    def thresholds(self) -> tuple[float | None, float | None]:
        if self.bw_bps is None:
            return None, None
        bw = self.bw_bps / 8
        return bw * (1 - self.epsilon) * self.T, bw * (1 - 2 * self.epsilon) * self.T

    def step(self, s: Sample) -> Decision:
        self.window.append(s)
        while self.window and s.t - self.window[0].t > WINDOW_S:
            self.window.popleft()
        first = self.window[0]
        span = s.t - first.t
        if span >= 0.8 * WINDOW_S and all(x.queue > BACKLOG_BYTES for x in self.window):
            self.bw_bps = max(MIN_BW_BPS, (s.acked_total - first.acked_total) * 8 / span)
        q_ub, q_lb = self.thresholds()
        changed = False
        if q_ub is not None:
            if not self.throttled and s.queue > q_ub:
                self.throttled = changed = True
            elif self.throttled and s.queue < q_lb:
                self.throttled, changed = False, True
        return Decision(s.queue, self.bw_bps, q_ub, q_lb, self.throttled, changed)


class VirtualQueueController:
    """Samples the relay's connections every SAMPLE_S and drives the throttle."""

    def __init__(self, relay, *, T: float, epsilon: float, device: str, classid: str, series: str | None):
        self.relay = relay
        self.vq = VirtualQueue(T, epsilon)
        self.device, self.classid = device, classid
        self.series = open(series, "a") if series else None
        if self.series is not None and self.series.tell() == 0:
            self.series.write("t_ns,vq_bytes,bw_bps,q_ub_bytes,q_lb_bytes,throttled\n")
        self.acked_closed = 0
        self.last: dict[int, tuple[int, int]] = {}    # connection id -> (acked, received) last seen
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vqueue", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def closed(self, conn) -> None:
        # Keep what a closed connection's watch side acknowledged in the BW estimate's total.
        with self.lock:
            acked, _ = self.last.pop(conn.id, (0, 0))
            self.acked_closed += acked

    def sample(self) -> Sample:
        queue = 0
        acked_live = 0
        for conn in self.relay.connections():
            try:
                acked, _ = tcp_bytes(conn.client)
                _, received = tcp_bytes(conn.upstream)
            except OSError:
                continue
            with self.lock:
                self.last[conn.id] = (acked, received)
            queue += max(0, received - acked)
            acked_live += acked
        with self.lock:
            total = self.acked_closed + acked_live
        return Sample(time.monotonic(), queue, total)

    def _set_rate(self, rate: str) -> None:
        subprocess.run(["tc", "class", "change", "dev", self.device, "classid", self.classid, "htb",
                        "rate", rate, "ceil", rate], check=False, capture_output=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            d = self.vq.step(self.sample())
            if d.changed:
                self._set_rate(f"{int(d.bw_bps / 2)}bit" if d.throttled else RELEASED_RATE)
            if self.series is not None:
                self.series.write(f"{time.time_ns()},{d.queue},{d.bw_bps or 0:.0f},{d.q_ub or 0:.0f},"
                                  f"{d.q_lb or 0:.0f},{int(d.throttled)}\n")
                self.series.flush()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.vq.throttled:
            self._set_rate(RELEASED_RATE)
        if self.series is not None:
            self.series.close()
