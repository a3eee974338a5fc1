"""tc commands that give one direction of a link its rate, delay, jitter, loss and queue: planned
here, from the link's Shape alone; plan.commands gathers them per node, realize.netns issues them
at build and realize.linkctl on every change.

Two shapers, both applied on the sending end's egress:
- `netem` (default): one netem qdisc does delay, jitter, loss, rate and the queue limit.
- `htb`: an htb class does the rate; a netem leaf below it does delay, jitter, loss and the queue.
bench/bench_link.py measures which is truer on a given kernel.

Queue limit: `queue_packets` is the bottleneck buffer, the packets that may wait for the rate.
netem's own `limit` also counts packets still on the delay line, so the limit we set is
queue + the delay line's capacity at the link rate (delay × rate / MTU frame), otherwise a
long, fast link would drop packets that are merely propagating. `queue_bytes` is turned into
packets of a full MTU frame (netem has no byte limit); the conversion is recorded, not hidden.

Seeds: netem (Linux >= 6.6) draws loss and jitter from its own PRNG, seeded per qdisc with
`seed`. Every direction of every link gets its own seed derived from the experiment's seed and
the link's end names (adding a link elsewhere does not change it), so the same experiment gives
the same loss and jitter sequences twice, and no two directions share a sequence. Those are the
qdiscs' seeds as built (the warm-up's); every run then re-seeds every direction in place with the
seed its own identity gives it (plan.seeds, realize.linkctl.LinkControl.reseed).

Jitter without reordering: netem reorders jittered packets unless it also shapes a rate (with a
rate it never schedules a packet before its predecessor). When `reorder` is false and no rate is
set, we give netem a rate far above the veth's (100 Gbit/s), which keeps order and adds < 0.2 µs
per packet.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from wearlab.model.shape import Shape

MTU_FRAME = 1514          # bytes on the wire of a full-size Ethernet frame (MTU 1500)
DEFAULT_LIMIT = 1000      # netem's own default, used when no queue limit is configured
ORDER_KEEPING_RATE = 100_000_000_000
SHAPERS = ("netem", "htb")


@dataclass(frozen=True)
class QdiscPlan:
    """The tc lines (for `tc -batch`) for one interface and notes on what was converted."""

    lines: list[str]
    notes: list[str]


def _us(seconds: float) -> str:
    return f"{round(seconds * 1e6)}us"


def _pct(p: float) -> str:
    return f"{p:.6g}%"


def netem_seed(experiment_seed: int, src: str, dst: str, change: int = 0) -> int:
    """The netem PRNG seed for traffic sent from `src` to `dst` (a u64). netem re-seeds itself on
    every `tc qdisc change` (randomly, when no seed is given), so the n-th change of a direction
    during a run passes its own derived seed: the same timeline draws the same losses twice."""
    tag = f"{src}->{dst}" if change == 0 else f"{src}->{dst}#{change}"
    digest = hashlib.sha256(f"wearlab-netem:{experiment_seed}:{tag}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def netem_limit(shape: Shape) -> tuple[int, list[str]]:
    notes: list[str] = []
    queue = shape.queue_packets
    if shape.queue_bytes is not None:
        queue = max(1, math.ceil(shape.queue_bytes / MTU_FRAME))
        notes.append(f"queue_bytes {shape.queue_bytes} B applied as {queue} packets of {MTU_FRAME} B "
                     "(netem limits packets)")
    if queue is None:
        return DEFAULT_LIMIT, notes
    in_flight = 0
    if shape.rate_bps and shape.delay_s + shape.jitter_s > 0:
        in_flight = math.ceil((shape.delay_s + shape.jitter_s) * shape.rate_bps / 8 / MTU_FRAME)
        notes.append(f"netem limit = queue {queue} + {in_flight} packets on the delay line")
    return queue + in_flight, notes


def netem_args(shape: Shape, *, with_rate: bool, seed: int | None = None) -> tuple[list[str], list[str]]:
    limit, notes = netem_limit(shape)
    args = ["limit", str(limit)]
    if shape.delay_s or shape.jitter_s:
        args += ["delay", _us(shape.delay_s)]
        if shape.jitter_s:
            args += [_us(shape.jitter_s)]
    if shape.loss is not None:
        loss = shape.loss
        if loss.model == "random":
            args += ["loss", "random", _pct(loss.p)]
        else:
            # netem gemodel: p r 1-h 1-k (1-h = loss in Bad, 1-k = loss in Good)
            args += ["loss", "gemodel", _pct(loss.p), _pct(loss.r if loss.r is not None else 100 - loss.p),
                     _pct(loss.bad_loss if loss.bad_loss is not None else 100),
                     _pct(loss.good_loss if loss.good_loss is not None else 0)]
    rate = shape.rate_bps if with_rate else None
    if rate is None and shape.jitter_s and not shape.reorder:
        rate = ORDER_KEEPING_RATE
        notes.append("jitter without reordering: netem rate 100Gbit keeps packet order")
    if rate:
        args += ["rate", f"{rate}bit"]
    if seed is not None:
        args += ["seed", str(seed)]
    return args, notes


def qdisc_plan(dev: str, shape: Shape, *, shaper: str = "netem", verb: str = "add",
               seed: int | None = None) -> QdiscPlan:
    """Lines for `tc -batch`. verb is `add` for a fresh interface or `change` to retune in place.
    `seed` seeds netem's PRNG (netem re-seeds on every change: see netem_seed)."""
    if shaper not in SHAPERS:
        raise ValueError(f"unknown shaper {shaper!r}; known: {', '.join(SHAPERS)}")
    if shaper == "netem" or not shape.rate_bps:
        args, notes = netem_args(shape, with_rate=True, seed=seed)
        return QdiscPlan([f"qdisc {verb} dev {dev} root handle 1: netem " + " ".join(args)], notes)
    args, notes = netem_args(shape, with_rate=False, seed=seed)
    rate = shape.rate_bps
    # Burst of one MTU frame at the rate keeps htb from sending line-rate bursts (truer timing).
    burst = max(MTU_FRAME, math.ceil(rate / 8 / 1000))  # >= 1 ms worth of bytes, htb's own minimum
    lines = []
    if verb == "add":
        lines.append(f"qdisc add dev {dev} root handle 1: htb default 1 r2q 1")
    lines.append(f"class {verb} dev {dev} parent 1: classid 1:1 htb rate {rate}bit ceil {rate}bit "
                 f"burst {burst} cburst {burst}")
    lines.append(f"qdisc {verb} dev {dev} parent 1:1 handle 10: netem " + " ".join(args))
    return QdiscPlan(lines, notes)
