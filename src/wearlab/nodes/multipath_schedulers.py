"""Schedulers of the chunked multipath transport (wearlab.nodes.multipath_wire): which path(s)
carry the next chunk. Upstream Linux MPTCP has only its default (minRTT-like) scheduler, so the
paper's round-robin and redundant ones live here, in user space.

A scheduler sees each path's state (`PathState`: smoothed RTT from the transport's own ACKs,
bytes in flight, its window) and answers with the paths to send the chunk on; an empty answer
means "wait until an ACK frees room". A path has room while its bytes in flight plus the chunk
fit its window (as MPTCP's schedulers look at a subflow's congestion window): without that
test, minRTT would pile every chunk into the faster path's socket buffer.

Pluggable like node kinds: a scheduler is a `Scheduler` subclass with a `name` and a `doc`,
listed once in `wearlab.catalog` (`schedulers=[...]`); a user's own is registered with
`CATALOG.extended(schedulers=[...])` and named in the wearable's `multipath: {scheduler: ...}`.

Before each `choose` the sender sets the scheduler's `backlog`: the bytes it holds behind the chunk
being scheduled (read from the app, or waiting for it in the kernel). Only ECF reads it; a
scheduler that ignores it needs no change.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

RTT_GAIN = 0.125        # RFC 6298's alpha: srtt <- (1 - a) srtt + a sample
RTTVAR_GAIN = 0.25      # RFC 6298's beta: rttvar <- (1 - b) rttvar + b |srtt - sample|
RATE_SAMPLES = 16       # delivery-rate samples a path's max is taken over (a few of its round trips)


@dataclass
class PathState:
    index: int
    name: str
    window: int                     # bytes that may be in flight (sent, not yet ACKed)
    srtt: float | None = None       # seconds; None until the first ACK
    inflight: int = 0
    up: bool = True
    rttvar: float = 0.0             # seconds: RFC 6298's mean deviation of the RTT samples
    flight: float | None = None     # bytes in flight when the sampled chunks were sent, smoothed as srtt
    stalled: bool = False           # holds a chunk unACKed past the reinjection limit (until its next ACK)
    min_rtt: float | None = None    # seconds: the lowest RTT sample (the path's delay without its queue)
    # bytes/s: each ACKed chunk's flight at send / its RTT (Little's law over one round trip), the last few
    rate_samples: deque[float] = field(default_factory=lambda: deque(maxlen=RATE_SAMPLES), repr=False)

    def room(self, size: int) -> bool:
        # An idle path always takes a chunk, so a chunk larger than the window still moves.
        return self.up and (self.inflight == 0 or self.inflight + size <= self.window)

    @property
    def delivery_rate(self) -> float | None:
        """bytes/s: the largest recent rate sample. A sample is the bytes in flight when a chunk was
        sent over its RTT: on a busy path about its rate (what was ahead of the chunk drained in that
        time), on an idle one what it was asked to carry, so the max of a few is the rate it showed."""
        return max(self.rate_samples, default=None)

    def rtt_sample(self, seconds: float, flight: int | None = None) -> None:
        """One ACK's RTT; `flight`: the path's bytes in flight just after that chunk was sent."""
        if flight is not None:
            self.flight = flight if self.flight is None else (1 - RTT_GAIN) * self.flight + RTT_GAIN * flight
            if seconds > 0:
                self.rate_samples.append(flight / seconds)
        self.min_rtt = seconds if self.min_rtt is None else min(self.min_rtt, seconds)
        # RFC 6298 section 2: the first sample sets rttvar to half of it; later, rttvar moves first
        # (against the old srtt), then srtt.
        if self.srtt is None:
            self.srtt, self.rttvar = seconds, seconds / 2
            return
        self.rttvar = (1 - RTTVAR_GAIN) * self.rttvar + RTTVAR_GAIN * abs(self.srtt - seconds)
        self.srtt = (1 - RTT_GAIN) * self.srtt + RTT_GAIN * seconds


class Scheduler:
    """Base: `choose` the paths for one chunk of `size` bytes. One instance per sender, so a
    scheduler may keep state (round-robin's turn)."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""
    backlog: int = 0        # bytes queued behind the chunk being scheduled; the sender sets it

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        raise NotImplementedError


class MinRtt(Scheduler):
    name = "minrtt"
    doc = ("the path with the lowest smoothed RTT among those with room in their window (MPTCP's default); "
           "a path not yet measured counts as fastest, so each gets probed")

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        ready = [p for p in paths if p.room(size)]
        if not ready:
            return []
        best = min(ready, key=lambda p: (p.srtt is not None, p.srtt or 0.0, p.index))
        return [best.index]


class RoundRobin(Scheduler):
    name = "round-robin"
    doc = "each path in turn, skipping one without room in its window"

    def __init__(self) -> None:
        self.turn = 0

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        n = len(paths)
        for k in range(n):
            p = paths[(self.turn + k) % n]
            if p.room(size):
                self.turn = (p.index + 1) % n
                return [p.index]
        return []


class Redundant(Scheduler):
    name = "redundant"
    doc = ("every chunk on every path with room (at least one); the receiver delivers the first copy and drops "
           "the others, so each chunk arrives as early as the better path brings it")

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        return [p.index for p in paths if p.room(size)]


def fastest_or_slower(paths: Sequence[PathState], size: int) -> list[int] | tuple[PathState, PathState]:
    """What ECF and BLEST share before their own test: the answer when it is plain (the fastest
    measured path f while it has room; a probe on an unmeasured path; nothing when no other path
    has room), else (f, s): f full, s the fastest other measured path with room, for the
    scheduler to decide whether s may take the chunk.

    A path without an RTT yet gets one chunk at a time (a probe), and only when f is full: an
    MPTCP subflow has an RTT from its handshake, ours have none, and minRTT's "unmeasured counts
    as fastest" would fill the slow path's whole window blind. A stalled path (a chunk unACKed
    past the agent's reinjection limit) is not waited for: its window stays full of chunks that
    may never be ACKed, so waiting could be forever."""
    up = [p for p in paths if p.up]
    measured = [p for p in up if p.srtt is not None and not p.stalled]
    probes = [p for p in up if p.srtt is None and p.inflight == 0]
    if not measured:
        return [probes[0].index] if probes else []
    f = min(measured, key=lambda p: (p.srtt, p.index))
    if f.room(size):
        return [f.index]
    if probes:
        return [probes[0].index]
    others = [p for p in measured if p is not f and p.room(size)]
    if not others:
        return []
    return f, min(others, key=lambda p: (p.srtt, p.index))


class Ecf(Scheduler):
    """Earliest Completion First (Lim, Nahum, Towsley, Gibbens: "ECF: An MPTCP Path Scheduler to
    Manage Heterogeneous Paths", CoNEXT 2017, Algorithm 1). minRTT sends on the slower path s
    whenever the fastest path f is full; ECF first asks whether the bytes still to send would
    finish sooner by waiting for f. With k bytes to send (this chunk and the backlog behind it):

        n = 1 + k / cwnd_f                    rounds of f until the last of them is delivered
        if n rtt_f < (1 + waiting beta)(rtt_s + delta):         waiting for f is faster...
            if (k / cwnd_s) rtt_s >= 2 rtt_f + delta:           ...and s would not finish sooner
                waiting = 1; send nothing (wait for f)
            else: send on s
        else: waiting = 0; send on s

    with delta = max(sigma_f, sigma_s) (the RTTs' deviations) and beta = 0.25, the paper's
    hysteresis: once it has chosen to wait, it keeps waiting until waiting looks 25 % worse than
    s, so it does not flap between the two on RTT noise.

    Adapted to this transport (the paper's unit is a TCP segment and cwnd a congestion window):
    - k -> bytes: this chunk plus `backlog`, what the agent can see of the app's stream (read from
      the app, or in the kernel's queue for it); MPTCP sees the app's whole send buffer, so a
      short upload's k is smaller here, which only makes ECF wait for f more readily.
    - cwnd -> `flight`, the bytes the path had in flight when the chunks behind its srtt were
      sent (smoothed like srtt). The paper's model is that a path delivers cwnd per RTT, and a
      TCP's RTT samples are taken with cwnd in flight; (flight, srtt) is the same pair here. The
      byte `window` is not: it is only a cap (64 KB by default), far above a 1 Mbit/s BT path's
      bandwidth-delay product (~10 KB), so "window per srtt" would credit a path with one probe
      in flight with 6x its rate, the k / cwnd_s test would always pass, and ECF would fill the
      slow path's window as minRTT does. f is full whenever the test runs, so its flight is
      about its window; s's flight grows only when ECF sends it chunks (the first test fails,
      a large backlog), as a subflow's cwnd grows only while it carries data.
    - sigma -> RFC 6298's rttvar (`PathState.rttvar`), as the Linux implementation's rttvar.
    - A path without an RTT yet (before its first ACK) gets one chunk at a time, a probe, and
      only when f is full: an MPTCP subflow has an RTT from its handshake, ours have none, and
      minRTT's "unmeasured counts as fastest" would fill the slow path's whole window blind.
    - What ECF does not change: how much s may hold. Once a large backlog has sent s chunks,
      they stay in its queue (up to its window) and may still arrive after f is done; ECF only
      stops adding to it (its srtt and flight then grow with that queue).
    """

    name = "ecf"
    doc = ("Earliest Completion First (Lim et al., CoNEXT 2017): the fastest path while it has room; when it is full, "
           "the slower path only if that finishes the queued bytes sooner than waiting for the fastest")
    BETA = 0.25             # the paper's hysteresis

    def __init__(self) -> None:
        self.waiting = False

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        pick = fastest_or_slower(paths, size)
        if isinstance(pick, list):
            return pick
        f, s = pick
        k = size + self.backlog
        cwnd_f, cwnd_s = (max(p.flight or 0.0, size) for p in (f, s))
        delta = max(f.rttvar, s.rttvar)
        n = 1 + k / cwnd_f
        if n * f.srtt < (1 + self.waiting * self.BETA) * (s.srtt + delta):
            if k / cwnd_s * s.srtt >= 2 * f.srtt + delta:
                self.waiting = True
                return []
            return [s.index]
        self.waiting = False
        return [s.index]


class Blest(Scheduler):
    """BLocking ESTimation (Ferlin, Alay, Mehani, Boreli: "BLEST: Blocking Estimation-based MPTCP
    Scheduler for Heterogeneous Networks", IFIP Networking 2016; its Linux implementation,
    `net/mptcp/mptcp_blest.c` in github.com/multipath-tcp/mptcp). minRTT sends on the slower
    path s whenever the fastest path f is full. A chunk on s holds the receiver's in-order
    delivery until it lands, and what f delivers meanwhile waits behind it in MPTCP's shared send
    window (the receiver's: data-level ACKs are cumulative). BLEST estimates what f would send
    during s's RTT,

        X = lambda x MSS_f x (cwnd_f + (rtt_s / rtt_f - 1) / 2) x rtt_s / rtt_f

    (cwnd_f segments per f round trip, one more each round in congestion avoidance, over
    rtt_s / rtt_f rounds), and sends on s only if X is below the window left once s's bytes in
    flight and this segment are counted; otherwise it sends nothing and waits for f's next ACK.

    Adapted to this transport, and why:
    - Units -> bytes: MSS_f x cwnd_f is f's `flight` (the bytes f had in flight when the chunks
      behind its srtt were sent, smoothed; as in `Ecf`, not its byte window, a mere cap), MSS_f
      the chunk's size, rtt_f f's srtt. f's bytes per round are capped at what it may hold (TCP's
      cwnd grows a segment a round; a path here never holds more than its cap, below).
    - The shared send window -> the sum of the up paths' byte windows (2 x 64 KB by default).
      This transport has no connection-level window: each chunk is ACKed on its own path, so f
      is never blocked by s; but what f delivers behind a chunk still on s waits in the
      receiver's reorder buffer, the head-of-line blocking BLEST bounds, and the paths may hold
      their windows' sum outstanding at once, so that sum bounds what may wait there as MPTCP's
      window does. (One path's window instead would keep s idle whenever rtt_s > 0.83 rtt_f.)
    - lambda fixed at the module's starting value, 1.2 (`lambda = 12`, tenths). The module moves
      it between 1.0 and 1.3 on the opportunistic retransmissions it makes when the meta window
      blocks; this transport makes none (it reinjects only for stalled paths).
    - rtt_s -> the module's linger estimate, not s's srtt: s's lowest srtt seen plus the span to
      its highest in proportion to how full its cap would be with this chunk, the highest when
      full (mptcp_blest.c, blestsched_estimate_linger_time; the paper's formula reads rtt_s).
      The module also takes s's srtt when that is larger; here it is not, because an idle path's
      srtt is stale: measured, 1 MB over 10 Mbit/s WiFi and 1 Mbit/s BT, BT's srtt stayed at the
      105 ms its first 14 KB saw, every later test failed, and BT idled from 0.29 s to the end.
    - A per-path cap, the congestion window BLEST presumes: a path may hold at most
      max(10 chunks, CAP_GAIN x its delivery rate x its lowest RTT) (TCP's initial window, RFC
      6928; BBR's cwnd gain of 2 bandwidth-delay products), within its byte window. A subflow's
      cwnd grows from 10 segments by its ACKs; a path here could take its whole 64 KB window
      within one round trip of f, before either srtt shows the queue it builds. Measured without
      the cap: 500 KB over the same paths, WiFi's srtt (its own 64 KB queue, ~50 ms) rose past
      BT's stale probe (43 ms), BT counted as fastest and filled its 64 KB window: 0.62 s, WiFi
      alone 0.40 s. The cap keeps each srtt near the path's own delay, so f stays f.
    - Probes and stalled paths as in `Ecf` (`fastest_or_slower`).

    What is left: BT still holds its few KB (about a bandwidth-delay product and a little queue,
    what keeps it busy) when the app's data runs out; those land tens of ms after WiFi's last.
    """

    name = "blest"
    doc = ("BLocking ESTimation (Ferlin et al., IFIP Networking 2016): the fastest path while it has room; when it "
           "is full, the slower one only if what the fastest would send during the slower one's RTT still fits the "
           "windows' sum beside the slower one's bytes in flight; each path capped near its bandwidth-delay product")
    LAMBDA = 1.2            # mptcp_blest.c's starting lambda (12 tenths)
    CAP_GAIN = 2.0          # bandwidth-delay products a path may hold (BBR's cwnd gain)
    CAP_FLOOR = 10          # chunks a path may always hold (TCP's initial window, RFC 6928)

    def __init__(self) -> None:
        self.srtt_range: dict[int, tuple[float, float]] = {}    # per path: its lowest and highest srtt seen

    def choose(self, paths: Sequence[PathState], size: int) -> list[int]:
        capped = [replace(p, window=min(p.window, int(self.cap(p, size)))) if p.srtt is not None else p
                  for p in paths]
        pick = fastest_or_slower(capped, size)
        if isinstance(pick, list):
            return pick
        f, s = pick
        for p in (f, s):
            low, high = self.srtt_range.get(p.index, (p.srtt, p.srtt))
            self.srtt_range[p.index] = (min(low, p.srtt), max(high, p.srtt))
        rounds = self.linger(s, size) / f.srtt
        per_round = min(max(f.flight or 0.0, size) + size * (rounds - 1) / 2, f.window)
        x = self.LAMBDA * per_round * rounds
        left = sum(p.window for p in paths if p.up) - (s.inflight + size)
        return [] if x >= left else [s.index]

    def cap(self, p: PathState, size: int) -> float:
        """Bytes path p may hold (within its window): CAP_GAIN x its delivery rate x its lowest
        RTT, at least CAP_FLOOR chunks."""
        return max(self.CAP_FLOOR * size, self.CAP_GAIN * (p.delivery_rate or 0.0) * (p.min_rtt or 0.0))

    def linger(self, s: PathState, size: int) -> float:
        """Seconds until a chunk sent on s now is ACKed (mptcp_blest.c's estimate, above): s's
        lowest srtt plus the span to its highest in proportion to how full its cap would be."""
        low, high = self.srtt_range[s.index]
        full = (s.inflight + size) / min(s.window, self.cap(s, size))
        return high if full >= 1 else low + (high - low) * full
