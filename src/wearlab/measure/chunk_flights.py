"""The chunked multipath transport's per-chunk records (wearlab.nodes.multipath_agent's ChunkLog
writes them, one CSV per agent) and what they measure: each path's busy intervals, the union of
its chunks' flights - a chunk copy is in flight from when its sender wrote it to the path to
when the receiver read it (the same definition the streams workload uses for its messages:
energy_model.activity_phases' union of flight times). Both agents of a run read one kernel
clock (time.time_ns), so a send on one side and the arrival on the other compare exactly.

A copy is (session, sender's side, seq, path): the receiver's record names the receiving side,
the sender is the other one; a seq sent twice on one path (not done today, allowed here) pairs
its n-th send with its n-th arrival. Every copy counts - a chunk reinjected on a second path
keeps both paths busy over their own flights - and so does a duplicate the receiver dropped:
its radio carried it.

A copy never received (its path died or went silent with it) is in flight from its send until
the sender gave up on it or it stopped mattering, whichever is first: the same chunk's next send
on any path (a reinjection or a path-down retransmission), or its first arrival over another
path, or else the end of the window asked for. So a dead path counts busy for at most
REINJECT_MIN_S-ish (the agent's reinjection delay) per stuck chunk, never for the rest of the run.

What a flight over-counts for the watch's radio: it runs from the sending agent to the receiving
agent, so it holds every hop on the way, not only the watch's own link - the phone's uplink and
relay on the BT path, the AP-to-server link on the WiFi path (their one-way delays, a few ms in
the testbed's topologies), and the time the chunk waits in the sender's socket and qdisc. What
it leaves out: the ACK frames (13 B, with TCP/IP headers ~65 B on the air: ~0.5 ms on a
1.1 Mbit/s BT link, ~0.05 ms on 10 Mbit/s WiFi) and the path connections' own TCP ACKs. The
watch sends an ACK the moment a chunk arrives, and receives the ACK for its own chunk about one
RTT after the send, i.e. inside or right after the chunk's flight, where the radio is in its
data state or at the start of its tail anyway: above the tail's level that is at most
(499 - 200) mW x 0.5 ms = 0.15 mJ per busy stretch on the watch (seed 003's levels), against the
tail's 40 mJ after each stretch - negligible, so they are not counted.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from wearlab.measure.intervals import union

# The record's columns (the agent writes them in this order); `side` is the recording agent's. Not
# `bytes`: the series file puts the cell's parameters beside them, and `bytes` is a stream parameter.
CHUNK_COLUMNS = ("t_ns", "side", "event", "session", "seq", "path_index", "path_name", "payload_bytes")
SENT, RECEIVED = "sent", "received"
SIDES = ("watch", "server")


def _sender_of(side: str, event: str) -> str:
    if event == SENT:
        return side
    (other,) = [s for s in SIDES if s != side]
    return other


def flights(rows: Iterable[Mapping[str, object]], end_ns: int) -> dict[str, list[tuple[int, int]]]:
    """Each path's chunk copies' flights (send ns, arrival ns), from both sides' records (module
    doc: a copy never received ends at its chunk's next send or first arrival elsewhere, or at
    `end_ns`; every flight is cut at `end_ns`)."""
    sends: dict[tuple[str, str, int, str], list[int]] = {}
    arrivals: dict[tuple[str, str, int, str], list[int]] = {}
    for r in rows:
        side, event = str(r["side"]), str(r["event"])
        key = (str(r["session"]), _sender_of(side, event), int(r["seq"]), str(r["path_name"]))  # type: ignore[arg-type]
        (sends if event == SENT else arrivals).setdefault(key, []).append(int(r["t_ns"]))  # type: ignore[arg-type]
    # per chunk (session, sender, seq), over all paths: its sends and its arrivals, sorted
    chunk_sends: dict[tuple[str, str, int], list[int]] = {}
    chunk_arrivals: dict[tuple[str, str, int], list[int]] = {}
    for (session, sender, seq, _), ts in sends.items():
        chunk_sends.setdefault((session, sender, seq), []).extend(ts)
    for (session, sender, seq, _), ts in arrivals.items():
        chunk_arrivals.setdefault((session, sender, seq), []).extend(ts)
    for ts in (*chunk_sends.values(), *chunk_arrivals.values()):
        ts.sort()
    out: dict[str, list[tuple[int, int]]] = {}
    for key, ts in sends.items():
        session, sender, seq, path = key
        got = sorted(arrivals.get(key, []))
        ts = sorted(ts)
        for n, sent in enumerate(ts):
            if n < len(got):
                end = got[n]
            else:   # never arrived: until the chunk's next send or first arrival, after this send
                later_sends = chunk_sends[(session, sender, seq)]
                later_arrivals = chunk_arrivals.get((session, sender, seq), [])
                candidates = [end_ns]
                i = bisect.bisect_right(later_sends, sent)
                if i < len(later_sends):
                    candidates.append(later_sends[i])
                j = bisect.bisect_right(later_arrivals, sent)
                if j < len(later_arrivals):
                    candidates.append(later_arrivals[j])
                end = min(candidates)
            out.setdefault(path, []).append((sent, min(end, end_ns)))
    return out


def path_busy(rows: Iterable[Mapping[str, object]], t0_ns: int, end_ns: int,
              paths: Iterable[str] = ()) -> dict[str, list[tuple[float, float]]]:
    """Each path's busy intervals in s from `t0_ns`: the union of its chunk copies' flights
    (`flights`) cut to [t0_ns, end_ns] - the energy model's input (energy_model.interface_phases).
    `paths`: names listed even when they carried nothing (an empty list)."""
    out: dict[str, list[tuple[float, float]]] = {p: [] for p in paths}
    for path, ivs in flights(rows, end_ns).items():
        cut = [(max(a, t0_ns), b) for a, b in ivs if b > t0_ns]
        out[path] = [((a - t0_ns) / 1e9, (b - t0_ns) / 1e9) for a, b in union(cut)]
    return out
