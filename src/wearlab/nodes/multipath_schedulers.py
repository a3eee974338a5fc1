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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

RTT_GAIN = 0.125        # RFC 6298's alpha: srtt <- (1 - a) srtt + a sample


@dataclass
class PathState:
    index: int
    name: str
    window: int                     # bytes that may be in flight (sent, not yet ACKed)
    srtt: float | None = None       # seconds; None until the first ACK
    inflight: int = 0
    up: bool = True

    def room(self, size: int) -> bool:
        # An idle path always takes a chunk, so a chunk larger than the window still moves.
        return self.up and (self.inflight == 0 or self.inflight + size <= self.window)

    def rtt_sample(self, seconds: float) -> None:
        self.srtt = seconds if self.srtt is None else (1 - RTT_GAIN) * self.srtt + RTT_GAIN * seconds


class Scheduler:
    """Base: `choose` the paths for one chunk of `size` bytes. One instance per sender, so a
    scheduler may keep state (round-robin's turn)."""

    name: ClassVar[str]
    doc: ClassVar[str] = ""

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
