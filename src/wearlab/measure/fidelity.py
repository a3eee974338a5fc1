"""A shard's fidelity probe: is this machine quiet enough to trust its timings?

A shard (`wearlab run EXP --shard I/N`) may run on any node of a cluster, beside other jobs. Once
its network is up and before its first run, it pings from the workload's client to its server
(`COUNT` echoes, `INTERVAL_S` apart, each waited for at most `WAIT_S`) and compares the median
round trip with the path's configured RTT (every link's delay on the path, both directions, as
the plan has them). The verdict goes into the shard's metadata.json as `fidelity`; `wearlab
merge` names the shards that were not trusted. The probe never fails a shard: it flags.

The rule (`judge`): trusted when configured - BELOW_MS <= median <= configured + max(ABOVE_MS,
ABOVE_FRACTION x configured).
- Below: netem never delivers early (docs/fidelity.md: RTT 0.1-0.3 ms above configured, never
  below), so a median below the physics means the shaping is not what the plan says. BELOW_MS is
  ping's own resolution (it prints 3 digits; the link physics tests allow the same 0.05 ms).
- Above: wearlab's goal is max(0.3 ms, 2 %) for what it reports, but a ping's RTT also holds the
  ping program's own system calls in two namespaces (in a UML guest ~100 us each, docs/fidelity.md)
  and the guest's timers. What a quiet node measures is the baseline: 10.1 ms for 10 ms on the
  6.1 UML guest (bench/results/link.json), and 11.0 ms for 10 ms on the 6.12 UML guest here
  (2026-11-26, load average 0.9; 8 of 10 echoes at exactly 11.0 ms: a quantum of the guest's
  timers, not noise). ABOVE_MS = 2 ms is twice the larger quiet excess, so a median past it means
  the node delayed most packets by more than its kernel does at rest - its runs' timings are not
  the path's. 5 % of a long RTT likewise. A calibration from those two measurements, not physics;
  the goal is recorded beside the verdict so that a reader sees both.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

COUNT = 10
INTERVAL_S = 0.05
WAIT_S = 2.0               # per echo (ping -W): a lost or late echo is a missing sample, not a hang
BELOW_MS = 0.05
ABOVE_MS = 2.0
ABOVE_FRACTION = 0.05
GOAL = "within max(0.3 ms, 2 %) of the emulated path's physics (docs/fidelity.md)"
RULE = (f"trusted when configured - {BELOW_MS} ms <= median <= configured + max({ABOVE_MS} ms, "
        f"{ABOVE_FRACTION:.0%} of configured)")


def judge(configured_ms: float, samples_ms: Sequence[float]) -> dict[str, Any]:
    """The verdict on a probe's samples (ms) for a path of `configured_ms` RTT."""
    doc: dict[str, Any] = {"configured_rtt_ms": round(configured_ms, 3), "samples_ms": [round(s, 3) for s in samples_ms],
                           "goal": GOAL, "rule": RULE}
    if not samples_ms:
        return {**doc, "trusted": False, "reason": "no echo came back"}
    median = statistics.median(samples_ms)
    allowed = max(ABOVE_MS, ABOVE_FRACTION * configured_ms)
    doc.update(median_ms=round(median, 3), max_ms=round(max(samples_ms), 3),
               excess_ms=round(median - configured_ms, 3), allowed_excess_ms=round(allowed, 3))
    if median < configured_ms - BELOW_MS:
        return {**doc, "trusted": False, "reason": "median below the configured RTT: the shaping is not the plan's"}
    if median - configured_ms > allowed:
        return {**doc, "trusted": False, "reason": f"median {median - configured_ms:.3f} ms above the configured RTT "
                                                   f"(at most {allowed:.3f} ms): the node was too noisy"}
    return {**doc, "trusted": True}


def probe(net: Any, client: str, server: str, path_nodes: Sequence[str], configured_s: float) -> dict[str, Any]:
    """Ping server from client in their namespaces; the verdict with what was measured. Any failure
    to probe is recorded (trusted: false), never raised."""
    where = {"probe": f"ping {COUNT} ICMP echoes {client} -> {server}", "path": list(path_nodes)}
    try:
        dst = net.addresses.address_of(server)
        argv = ["ping", "-n", "-c", str(COUNT), "-i", str(INTERVAL_S), "-W", str(int(WAIT_S)), dst]
        out = net.run(client, argv, timeout=COUNT * (INTERVAL_S + WAIT_S) + 5).stdout
    except Exception as e:   # the probe only flags: a node without ping, a timeout, ... is noted
        return {**where, "configured_rtt_ms": round(configured_s * 1000, 3), "trusted": False,
                "reason": f"probe failed: {e}"}
    samples = [float(line.split("time=")[1].split()[0]) for line in out.splitlines() if "time=" in line]
    return {**where, **judge(configured_s * 1000, samples)}


def not_probed(reason: str) -> dict[str, Any]:
    return {"probe": None, "trusted": None, "reason": reason}


def trust(meta: Mapping[str, Any]) -> str:
    """A shard's metadata -> 'trusted', 'noisy' or 'not probed' (older shards have no `fidelity`)."""
    f = meta.get("fidelity")
    if not isinstance(f, Mapping) or f.get("trusted") is None:
        return "not probed"
    return "trusted" if f.get("trusted") is True else "noisy"


def describe(meta: Mapping[str, Any]) -> str:
    """One line on a shard's fidelity, for merge and status."""
    f = meta.get("fidelity")
    verdict = trust(meta)
    if not isinstance(f, Mapping):
        return "not probed (no fidelity in its metadata: an older wearlab)"
    if "median_ms" in f:
        return (f"{verdict}: RTT median {f['median_ms']} ms, max {f['max_ms']} ms for {f['configured_rtt_ms']} ms "
                f"configured" + (f" ({f['reason']})" if f.get("reason") and verdict != "trusted" else ""))
    return f"{verdict}: {f.get('reason')}"
