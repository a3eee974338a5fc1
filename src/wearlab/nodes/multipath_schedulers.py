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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

RTT_GAIN = 0.125        # RFC 6298's alpha: srtt <- (1 - a) srtt + a sample
RTTVAR_GAIN = 0.25      # RFC 6298's beta: rttvar <- (1 - b) rttvar + b |srtt - sample|


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

    def room(self, size: int) -> bool:
        # An idle path always takes a chunk, so a chunk larger than the window still moves.
        return self.up and (self.inflight == 0 or self.inflight + size <= self.window)

    def rtt_sample(self, seconds: float, flight: int | None = None) -> None:
        """One ACK's RTT; `flight`: the path's bytes in flight just after that chunk was sent."""
        if flight is not None:
            self.flight = flight if self.flight is None else (1 - RTT_GAIN) * self.flight + RTT_GAIN * flight
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
        up = [p for p in paths if p.up]
        # A stalled path (a chunk unACKed past the agent's reinjection limit) is not waited for:
        # its window stays full of chunks that may never be ACKed, so waiting could be forever.
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
        s = min(others, key=lambda p: (p.srtt, p.index))
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
