"""Which machine ran which runs of a results directory, and whether its fidelity probe
(measure.fidelity) trusted it - what `wearlab check` and `wearlab report` show beside the verdicts.

A merged directory (`wearlab merge`) names every shard in metadata.json's `shards`, each with its
probe (`fidelity`), its `trust` and the runs it contributed (`runs_ok`); a directory straight from
one machine has its probe, if any, as `fidelity` and every run is that machine's. A noisy machine's
runs are kept and their verdicts are not re-judged: its timings (not its byte counts or seeds) are
suspect, so the claims that pooled them say so. A shard not probed (a wearlab before the probe, or a
workload without a client and a server) is named in a merged directory; one machine's directory
without a probe is not warned about (nothing says its node was busy, and every older result would
warn).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wearlab.measure import fidelity


@dataclass(frozen=True)
class Machine:
    """One machine's share of a results directory."""

    label: str                       # a shard's I-of-N (merge's name for it), or the one machine's host
    trust: str                       # trusted | noisy | not probed (fidelity.trust)
    runs: frozenset[int] | None      # the runs it contributed (ok); None: every run of the directory
    probe: Mapping[str, Any] | None  # its metadata's `fidelity` (None: a wearlab before the probe)
    sharded: bool                    # one shard of a merge

    def describe(self) -> str:
        return fidelity.describe({"fidelity": self.probe} if self.probe is not None else {})


def shard_label(shard: Any, fallback: str) -> str:
    """A shard's name in merged metadata and on the terminal: `I-of-N` (metadata.json's `shard`)."""
    return f"{shard['index']}-of-{shard['count']}" if isinstance(shard, Mapping) and "index" in shard else fallback


def read_metadata(d: Path) -> dict[str, Any]:
    """A results directory's metadata.json ({} when absent or unreadable: the check still scores)."""
    try:
        doc = json.loads((d / "metadata.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def merged(meta: Mapping[str, Any]) -> bool:
    return isinstance(meta.get("merge"), Mapping) and isinstance(meta.get("shards"), list)


def machines(meta: Mapping[str, Any]) -> list[Machine]:
    if merged(meta):
        out = []
        for s in meta["shards"]:
            if not isinstance(s, Mapping):
                continue
            probe = s.get("fidelity") if isinstance(s.get("fidelity"), Mapping) else None
            runs = frozenset(int(n) for n in s.get("runs_ok") or [] if isinstance(n, int) or str(n).isdigit())
            out.append(Machine(shard_label(s.get("shard"), Path(str(s.get("dir") or "?")).name),
                               fidelity.trust({"fidelity": probe}), runs, probe, True))
        return out
    probe = meta.get("fidelity") if isinstance(meta.get("fidelity"), Mapping) else None
    host = (meta.get("machine") or {}).get("hostname") if isinstance(meta.get("machine"), Mapping) else None
    return [Machine(shard_label(meta.get("shard"), str(host or "this machine")), fidelity.trust(meta), None, probe,
                    False)]


def noisy(meta: Mapping[str, Any]) -> list[Machine]:
    return [m for m in machines(meta) if m.trust == "noisy"]


def unprobed(meta: Mapping[str, Any]) -> list[Machine]:
    """Shards of a merge that carry no verdict (see the module's docstring for one machine)."""
    return [m for m in machines(meta) if m.trust == "not probed" and m.sharded]


def noisy_runs(meta: Mapping[str, Any], runs: Iterable[int]) -> dict[str, int]:
    """Of `runs` (run numbers), how many each noisy machine ran: {label: count}, only those > 0."""
    wanted = set(runs)
    out = {}
    for m in noisy(meta):
        n = len(wanted) if m.runs is None else len(wanted & m.runs)
        if n:
            out[m.label] = n
    return out


def warnings(meta: Mapping[str, Any]) -> list[str]:
    """What `wearlab check` prints before its verdicts (empty: every machine trusted)."""
    out = []
    bad = noisy(meta)
    if bad:
        what = "noisy shards" if bad[0].sharded else "noisy machine"
        out.append(f"{what}: {', '.join(m.label for m in bad)} - the fidelity probe's median RTT was outside its "
                   f"rule ({fidelity.RULE}): " + "; ".join(f"{m.label} {m.describe()}" for m in bad)
                   + ". The verdicts of claims with runs from them are unchanged but their timings are suspect: "
                   "run those shards again on a quieter node and merge again, or read their runs apart.")
    quiet = unprobed(meta)
    if quiet:
        out.append(f"shards not probed: {', '.join(m.label for m in quiet)} - "
                   + "; ".join(f"{m.label} {m.describe()}" for m in quiet)
                   + ": nothing says whether their node was quiet.")
    return out


def summary(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The fidelity part of `wearlab check --json` for one results directory."""
    return {"rule": fidelity.RULE, "noisy": [m.label for m in noisy(meta)],
            "not_probed": [m.label for m in unprobed(meta)],
            "machines": [{"label": m.label, "trust": m.trust, "sharded": m.sharded,
                          "runs": sorted(m.runs) if m.runs is not None else "all", "probe": m.probe}
                         for m in machines(meta)]}
