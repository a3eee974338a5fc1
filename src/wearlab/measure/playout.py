"""A video player on a CBR stream's deliveries: start-up delay, rebuffering events and stalled time
(seed 003 section 5's video workload: its QoE is throughput, with stalls beside it).

The stream is live media sent in real time at `rate`: message i carries the media from
pos_i = (the bytes before it) * 8 / rate for size_i * 8 / rate seconds (the media clock is in the
content, as a player's is; the sender's pacing jitter moves arrivals, not media positions). The
player (the usual buffer model of video QoE studies, e.g. ITU-T P.1203's stalling input):

- it starts once the media buffered covers `buffer_s` from the first message (or the stream has
  all arrived): the start-up delay is that time, counted from the first send;
- it plays in real time from then on; when message i is due and has not arrived, playback stalls
  (one rebuffering event) until the media from pos_i on covers `buffer_s` again (or the stream has
  all arrived), and resumes there: nothing is skipped.

Arrival times are deliveries to the app (measure.stream_records: all nodes share one clock).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from itertools import accumulate

EPS_S = 1e-6    # an arrival at its due time is in time


@dataclass(frozen=True)
class Playout:
    startup_s: float       # first send -> playback starts
    rebuffers: int         # stalls after the start
    rebuffer_s: float      # their total length

    def row(self, prefix: str) -> dict[str, float | int]:
        return {f"{prefix}_startup_s": self.startup_s, f"{prefix}_rebuffers": self.rebuffers,
                f"{prefix}_rebuffer_s": self.rebuffer_s}


def playout(records, rate_bps: float, buffer_s: float) -> Playout:
    """`records`: (seq, t_send_ns, t_deliver_ns, size) of one stream, any order."""
    recs = sorted(records)
    if not recs:
        raise ValueError("no message delivered: nothing to play")
    if rate_bps <= 0 or buffer_s < 0:
        raise ValueError("the rate must be positive and the buffer not negative")
    t0 = recs[0][1]
    end_max = list(accumulate(r[3] * 8 / rate_bps for r in recs))     # media end of each message
    pos = [0.0, *end_max[:-1]]
    # TCP delivers in order, but take the latest arrival so far to be safe.
    ready = list(accumulate(((r[2] - t0) / 1e9 for r in recs), max))

    def filled(i: int) -> float:
        """When the media from message i on covers buffer_s (or the last message has arrived)."""
        j = min(bisect.bisect_left(end_max, pos[i] + buffer_s - EPS_S, lo=i), len(recs) - 1)
        return ready[j]

    start = filled(0)
    offset = start - pos[0]          # playback time of media position p: offset + p
    rebuffers, stalled = 0, 0.0
    for i in range(len(recs)):
        due = offset + pos[i]
        if ready[i] > due + EPS_S:
            resume = filled(i)
            rebuffers += 1
            stalled += resume - due
            offset = resume - pos[i]
    return Playout(startup_s=start, rebuffers=rebuffers, rebuffer_s=stalled)
