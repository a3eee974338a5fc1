"""`wearlab check RESULTS...`: are an experiment's claims (`expect:`, model.claims) reproduced by
its runs?

Reads each results directory's plan.json (the claims, resolved, with the cells of each of their
groups) and runs.csv (the runs that succeeded), and scores each claim (docs/claims.md):
- ours: the claim's statistic (median, mean, p95, max) of its cells' runs, pooled; a ratio or a
  difference of two groups' statistics; a trend's Spearman rho of the statistic (or the ratio) at
  each value of its key against the value;
- its 95 % interval: a seeded bootstrap over the runs, each group resampled on its own
  (report.statistics, shared with `wearlab compare`);
- the band: the paper's [low, high] widened by the tolerance (a trend: rho <= -0.8 or >= 0.8);
- the verdict: `reproduced` when the interval lies inside the band, `not reproduced` when wholly
  outside, `inconclusive` across its edge, with fewer than MIN_RUNS runs in a group, or with
  nothing to measure; an `input` is `not scored` (shown beside ours);
- the machines behind it: given the directory's metadata.json, how many of its runs came from a
  machine whose fidelity probe was noisy (report.machine_trust) - flagged beside the verdict,
  never re-judged: the probe says the timings are suspect, not what they should have been.
Writes claims.json in each directory (a list of rows: ClaimResult's fields) and prints a table;
exit 1 when a calibration or a prediction is not reproduced, else 0; bad input is exit 2
(InputError). Noisy or unprobed shards are warned about on stderr and leave the exit status alone
(check_command says why). A run's own end (run.runner) prints the same table and writes the same file.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from wearlab.errors import InputError, Problem
from wearlab.model.choices import Evidence, Verdict
from wearlab.report import machine_trust, results
from wearlab.report.statistics import SEED, finite, interval, resample, spearman, statistic
from wearlab.report.table import print_claims

WHERE = "<command line>"
MIN_RUNS = 3               # fewer runs in a group: inconclusive, whatever the interval says
SEARCH_DEPTH = 3           # results/<suite>/<experiment>/<run>


@dataclass
class ClaimResult:
    """One row of claims.json: the claim, ours beside the paper's, and the verdict. Values are in
    `unit` (a quantities.UNITS symbol, as runs.csv holds them; "" a plain number: ratios, rho)."""

    id: str
    experiment: str
    claim: str
    source: dict[str, Any]           # seed, where
    evidence: str                    # input | calibration | prediction
    why: str
    note: str                        # the claim's own: why ours may differ
    metric: str | None
    statistic: str
    kind: str                        # value | ratio | difference | trend
    unit: str
    ours: float | None
    ours_low: float | None           # 95 % bootstrap interval
    ours_high: float | None
    paper_low: float | None          # None: open (or an input shown as written: paper_text)
    paper_high: float | None
    paper_text: str
    tolerance: str
    band_low: float | None
    band_high: float | None
    difference: float | None         # ours - the paper's nearest bound (0 inside [low, high])
    difference_rel: float | None     # difference / |that bound|
    verdict: str
    runs: int                        # ok runs behind ours, all groups together
    remark: str                      # the check's: why inconclusive, runs left out
    noisy_runs: int = 0              # of `runs`, those from a machine whose fidelity probe was noisy
    noisy_from: list[str] = field(default_factory=list)   # those machines (a shard's I-of-N, or the host)


# -- finding results ---------------------------------------------------------------------------


def find_results(paths: Sequence[Path]) -> list[Path]:
    """Results directories (those with plan.json) for each path: itself, its `latest`, or - a
    suite's directory - each experiment's latest run under it."""
    out: list[Path] = []
    problems: list[Problem] = []
    for p in paths:
        if not p.exists():
            problems.append(Problem(WHERE, None, "RESULTS", f"{p} does not exist"))
        elif not p.is_dir():
            problems.append(Problem(WHERE, None, "RESULTS", f"{p} is not a directory (give a results directory)"))
        else:
            found = _walk(p, 0, problems)
            if not found and not problems:
                problems.append(Problem(WHERE, None, "RESULTS", f"{p} holds no results: no plan.json in it, in its "
                                                                "`latest`, or in the experiments under it"))
            out += [d for d in found if d not in out]
    if problems:
        raise InputError(problems)
    return out


def _walk(d: Path, depth: int, problems: list[Problem]) -> list[Path]:
    if (d / "plan.json").is_file():
        return [d]
    if (d / "runs.csv").exists():
        problems.append(Problem(WHERE, None, "RESULTS", f"{d} has runs.csv but no plan.json (written by an older "
                                                        "wearlab?): its claims are unknown"))
        return []
    if (d / "latest").is_dir():
        return _walk(d / "latest", depth + 1, problems)
    if depth >= SEARCH_DEPTH:
        return []
    children = sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
    runs = [c for c in children if (c / "plan.json").is_file()]
    if runs:   # an experiment's directory without `latest`: its newest run (UTC stamps sort)
        return [runs[-1]]
    return [r for c in children for r in _walk(c, depth + 1, problems)]


def load(d: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    try:
        plan = json.loads((d / "plan.json").read_text())
    except (OSError, ValueError) as e:
        raise InputError([Problem(WHERE, None, "RESULTS", f"{d}/plan.json is unreadable: {e}")]) from None
    if not isinstance(plan, dict) or not isinstance(plan.get("cells"), list):
        raise InputError([Problem(WHERE, None, "RESULTS", f"{d}/plan.json is not a plan (no cells)")])
    claims = plan.get("claims") or []
    if not isinstance(claims, list) or not all(isinstance(c, dict) and isinstance(c.get("id"), str)
                                               and isinstance(c.get("groups", []), list) for c in claims):
        raise InputError([Problem(WHERE, None, "RESULTS", f"{d}/plan.json's claims are not this wearlab's "
                                                          "(re-plan the experiment, or check with the wearlab that ran it)")])
    if not (d / "runs.csv").is_file():
        raise InputError([Problem(WHERE, None, "RESULTS", f"{d} has no runs.csv")])
    with (d / "runs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return plan, rows


# -- scoring -----------------------------------------------------------------------------------


def evaluate(plan: Mapping[str, Any], rows: Sequence[Mapping[str, Any]],
             meta: Mapping[str, Any] | None = None) -> list[ClaimResult]:
    """Every claim of a plan document (plan.json, or RunPlan.to_document()) scored on `rows` (runs.csv's,
    or a run's own); with the directory's metadata (`meta`), each claim also names the noisy
    machines its runs came from (its verdict stays as scored)."""
    by_cell: dict[int, list[Mapping[str, Any]]] = {}
    failed: dict[int, int] = {}
    cells = plan.get("cells") or []
    for r in rows:
        i = _cell_of(r, cells)
        if i is None:
            continue
        if str(r.get("status", "")) == "ok":
            by_cell.setdefault(i, []).append(r)
        else:
            failed[i] = failed.get(i, 0) + 1
    scored = [_score(c, str(plan.get("experiment", "")), by_cell, failed) for c in plan.get("claims") or []]
    if meta:
        for c, out in zip(plan.get("claims") or [], scored, strict=True):
            from_noisy = machine_trust.noisy_runs(meta, _runs_behind(c, by_cell))
            out.noisy_runs, out.noisy_from = sum(from_noisy.values()), sorted(from_noisy)
    return scored


def _runs_behind(c: Mapping[str, Any], by_cell: Mapping[int, Sequence[Mapping[str, Any]]]) -> set[int]:
    """The run numbers whose measurement of the claim's metric went into ours (as _score pools them)."""
    metric = c.get("metric")
    if metric is None:
        return set()
    return {int(r["run"]) for g in c.get("groups") or [] for i in g["cells"] for r in by_cell.get(i, [])
            if str(r.get("run", "")).isdigit() and finite([r], metric)}


def _cell_of(row: Mapping[str, Any], cells: Sequence[Mapping[str, Any]]) -> int | None:
    for c in cells:
        values = c.get("values") or {}
        if all(_same(row[k], v) for k, v in values.items() if k in row):
            return int(c.get("cell", 0))
    return None


def _same(text: Any, value: Any) -> bool:
    """A runs.csv field (text, or a run's own value) against a plan value (JSON)."""
    if value is None or value == "":
        return text in ("", None)
    if isinstance(value, bool) or isinstance(text, bool):
        return str(text).strip().lower() == str(value).strip().lower()
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(text), float(value), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return str(text) == str(value)


def _score(c: Mapping[str, Any], experiment: str, by_cell: dict, failed: dict) -> ClaimResult:
    contrast, trend = c.get("contrast"), c.get("trend")
    kind = "trend" if trend else contrast["kind"] if contrast else "value"
    out = ClaimResult(
        id=c["id"], experiment=experiment, claim=c.get("claim", ""), source=dict(c.get("source") or {}),
        evidence=c.get("evidence", ""), why=c.get("why", ""), note=c.get("note", ""), metric=c.get("metric"),
        statistic=c.get("statistic", "median"), kind=kind, unit=c.get("unit", ""), ours=None, ours_low=None,
        ours_high=None, paper_low=c.get("paper_low"), paper_high=c.get("paper_high"),
        paper_text=c.get("paper_text", ""), tolerance=c.get("tolerance", ""), band_low=c.get("band_low"),
        band_high=c.get("band_high"), difference=None, difference_rel=None, verdict=Verdict.INCONCLUSIVE.value,
        runs=0, remark="")
    scored = out.evidence != Evidence.INPUT.value
    if not scored:
        out.verdict = Verdict.NOT_SCORED.value
    metric = out.metric
    if metric is None:
        return out
    groups = c.get("groups") or []
    samples = [finite((r for i in g["cells"] for r in by_cell.get(i, [])), metric) for g in groups]
    out.runs = sum(len(s) for s in samples)
    left_out = sum(failed.get(i, 0) for g in groups for i in set(g["cells"]))
    remarks = [f"{left_out} failed run{'s' * (left_out != 1)} left out"] if left_out else []

    over = trend["over"] if trend else None
    empty = [_describe(g, over) for g, s in zip(groups, samples, strict=True) if not s]
    if not groups or empty:
        shown = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more groups" if len(empty) > 3 else "")
        remarks.insert(0, f"no run measured {metric} in {shown or 'its cells'}")
        out.remark = "; ".join(remarks)
        return out
    levels = _levels(groups)
    if kind == "trend" and len(levels) < 3:
        remarks.insert(0, f"a trend needs runs at 3 values of {trend['over']} at least; these runs have {len(levels)}")
        out.remark = "; ".join(remarks)
        return out

    point = _estimate([np.asarray(s, dtype=float) for s in samples], groups, levels, c)
    rng = np.random.default_rng(SEED)
    boot = _estimate(resample(samples, rng), groups, levels, c)
    if point is None or not math.isfinite(point):
        remarks.insert(0, "the denominator's statistic is 0" if kind in ("ratio", "trend") else "no estimate")
        out.remark = "; ".join(remarks)
        return out
    out.ours = point
    ci = interval(boot)
    if ci is not None:
        out.ours_low, out.ours_high = ci
    out.difference, out.difference_rel = _difference(point, out.paper_low, out.paper_high, kind)

    fewest = min(len(s) for s in samples)
    if scored:
        if fewest < MIN_RUNS:
            which = [_describe(g, over) for g, s in zip(groups, samples, strict=True) if len(s) == fewest]
            remarks.insert(0, f"{fewest} run{'s' * (fewest != 1)} in {which[0]}: at least {MIN_RUNS} per group for a verdict")
        elif ci is not None:
            out.verdict = _verdict(ci, out.band_low, out.band_high).value
    out.remark = "; ".join(remarks)
    return out


def _describe(g: Mapping[str, Any], over: str | None) -> str:
    level = g.get("level")
    where = f" at {over}={level}" if level is not None else ""
    return ("its cells" if g["role"] == "cells" else f"the {g['role']}") + where


def _levels(groups: Sequence[Mapping[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for g in groups:
        if g.get("level") not in out:
            out.append(g.get("level"))
    return out


def _estimate(samples: Sequence[np.ndarray], groups: Sequence[Mapping[str, Any]], levels: list[Any],
              c: Mapping[str, Any]) -> Any:
    """The claim's estimate from one sample per group (arrays of runs, or (BOOTSTRAP, runs)
    resamples: then one estimate per resample)."""
    stat = c.get("statistic", "median")
    values = {(g["role"], _key(g.get("level"))): statistic(stat, s) for g, s in zip(groups, samples, strict=True)}
    contrast = c.get("contrast")
    per_level = []
    for level in levels:
        k = _key(level)
        if contrast is None:
            per_level.append(values[("cells", k)])
            continue
        num, den = values[("numerator", k)], values[("denominator", k)]
        if contrast["kind"] == "ratio":
            with np.errstate(divide="ignore", invalid="ignore"):
                per_level.append(np.where(np.asarray(den) != 0, np.asarray(num) / np.where(np.asarray(den) != 0, den, 1),
                                          np.nan))
        else:
            per_level.append(np.asarray(num) - np.asarray(den))
    if c.get("trend"):
        x = [float(level) for level in levels]
        y = np.stack([np.asarray(v, dtype=float) for v in per_level], axis=-1)
        return spearman(x, y)
    value = per_level[0]
    return float(value) if np.ndim(value) == 0 else np.asarray(value, dtype=float)


def _key(level: Any) -> str:
    return json.dumps(level)


def _difference(ours: float, low: float | None, high: float | None, kind: str) -> tuple[float | None, float | None]:
    """ours - the paper's nearest bound (0 inside the paper's range), and that relative to it."""
    if kind == "trend" or (low is None and high is None):
        return None, None
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    if lo <= ours <= hi:
        return 0.0, 0.0
    bound = lo if ours < lo else hi
    diff = ours - bound
    return diff, (diff / abs(bound) if bound != 0 else None)


def _verdict(ci: tuple[float, float], band_low: float | None, band_high: float | None) -> Verdict:
    lo = -math.inf if band_low is None else band_low
    hi = math.inf if band_high is None else band_high
    if lo <= ci[0] and ci[1] <= hi:
        return Verdict.REPRODUCED
    if ci[1] < lo or ci[0] > hi:
        return Verdict.NOT_REPRODUCED
    return Verdict.INCONCLUSIVE


def failing(rows: Sequence[ClaimResult]) -> list[ClaimResult]:
    """Calibrations and predictions not reproduced: what makes `wearlab check` exit 1."""
    return [r for r in rows if r.verdict == Verdict.NOT_REPRODUCED.value and r.evidence != Evidence.INPUT.value]


def write_claims(d: Path, rows: Sequence[ClaimResult]) -> None:
    results.write_json(d / results.CLAIMS_FILE, [asdict(r) for r in rows])


# -- the command -------------------------------------------------------------------------------


def check_command(paths: Sequence[Path], *, as_json: bool, console: Console, err_console: Console | None = None) -> int:
    dirs = find_results(paths)
    loaded = [(d, *load(d), machine_trust.read_metadata(d)) for d in dirs]   # all readable before any is written
    everything: list[tuple[Path, str, list[ClaimResult]]] = []
    for d, plan, rows, meta in loaded:
        scored = evaluate(plan, rows, meta)
        write_claims(d, scored)
        everything.append((d, str(plan.get("experiment", d.name)), scored))
    # Suspect timings are a warning, on stderr (so --json stays one JSON document), before the verdicts.
    warn = err_console or console
    for d, plan, _, meta in loaded:
        for w in machine_trust.warnings(meta):
            warn.print(f"[yellow]warning: {plan.get('experiment', d.name)} ({d}): {w}[/yellow]")
    if as_json:
        console.out(json.dumps([{"results": str(d), "experiment": name, "fidelity": machine_trust.summary(meta),
                                 "claims": [asdict(r) for r in rs]}
                                for (d, name, rs), (_, _, _, meta) in zip(everything, loaded, strict=True)], indent=2),
                    highlight=False)
    else:
        for d, name, rs in everything:
            if rs:
                print_claims(console, rs, f"{name}: claims beside ours ({d})", headline(rs, name))
            else:
                console.print(f"{name}: no claims (its experiment has no expect:) ({d})")
        if len(everything) > 1:
            console.print(headline([r for _, _, rs in everything for r in rs], f"{len(everything)} results"))
    # The exit status is the verdicts' (docs/claims.md: 1 when a calibration or a prediction is not
    # reproduced) and a noisy or unprobed shard does not change it. A suspect timing is flagged, not
    # re-judged, so the status would change with nothing the claims say; and mature checkers keep
    # warnings out of the status unless asked to (gcc's warnings without -Werror, pytest's
    # warnings summary without -W error): a CI job gating on `check` must not pass or fail with a
    # cluster node's load. Who refuses suspect timings reads `fidelity` (and each claim's
    # `noisy_from`) in --json.
    return 1 if any(failing(rs) for _, _, rs in everything) else 0


def headline(rows: Sequence[ClaimResult], what: str) -> str:
    count = {v.value: sum(1 for r in rows if r.verdict == v.value) for v in Verdict}
    bad = failing(rows)
    head = f"NOT REPRODUCED: {', '.join(r.id for r in bad)}" if bad else "no claim failed"
    suspect = sum(1 for r in rows if r.noisy_runs)
    return (f"{head} - {what}: {len(rows)} claims, {count['reproduced']} reproduced, "
            f"{count['not reproduced']} not reproduced, {count['inconclusive']} inconclusive, "
            f"{count['not scored']} inputs (not scored)"
            + (f"; {suspect} with runs from a noisy node (flagged, not re-judged)" if suspect else ""))
