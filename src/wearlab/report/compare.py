"""`wearlab compare BASELINE CANDIDATE`: did a change make things worse, with statistics.

Reads two results directories (runs.csv + metadata.json; an experiment's directory means its
`latest`). Cells are matched on the parameter columns the metadata declares; every metric the
workload declares better `lower` or `higher` is compared per cell, over the runs that succeeded:
- medians and the relative change (candidate / baseline - 1);
- Mann-Whitney U, two-sided (scipy): could both samples come from one distribution?
- a bootstrap 95 % interval of the difference of medians (seeded: the same inputs give the same
  report; report.statistics, shared with `wearlab check`).
Verdict per metric and cell: `regression` when the change goes the worse way, p < alpha AND the
change exceeds the threshold (relative, and the absolute one when set: tiny shifts of near-zero
values are no regression); `improvement` the same the better way; `inconclusive` when the samples
are too small for the test to ever reach alpha (say so rather than pass); else `same`.
Exit status: 1 with any regression, else 0; bad input is exit 2 (InputError).
"""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from scipy.stats import mannwhitneyu

from wearlab.errors import InputError, Problem
from wearlab.model import quantities
from wearlab.model.yamlsrc import load_yaml, problems_from_validation
from wearlab.report.statistics import SEED, finite, median_difference_interval, min_p

WHERE = "<command line>"
ENVIRONMENT_KEYS = ("machine", "versions", "shaper", "nodes_kinds")
COMPARE_DIGITS = 4


class MetricThreshold(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rel: float | None = Field(None, ge=0)
    abs: float | None = Field(None, ge=0)


class Thresholds(BaseModel):
    """The thresholds file: `alpha`, a default relative threshold, and per-metric ones."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.05, gt=0, lt=1)
    threshold: float = Field(0.05, ge=0)
    metrics: dict[str, MetricThreshold] = Field(default_factory=dict)
    only: list[str] = Field(default_factory=list)   # compare just these metrics


@dataclass
class Side:
    path: Path
    meta: dict[str, Any]
    rows: list[dict[str, str]]

    @property
    def experiment(self) -> str:
        return str(self.meta.get("experiment", "?"))

    @property
    def workload(self) -> str:
        w = self.meta.get("workload")
        return str(w.get("kind") if isinstance(w, dict) else w)


@dataclass
class Comparison:
    cell: str
    metric: str
    unit: str
    better: str
    n_base: int
    n_cand: int
    median_base: float
    median_cand: float
    change: float | None          # relative
    p: float | None
    ci: tuple[float, float] | None   # candidate - baseline median, 95 %
    verdict: str


@dataclass
class Report:
    baseline: str
    candidate: str
    experiment: str
    alpha: float
    rows: list[Comparison]
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)
    environment_differences: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Comparison]:
        return [r for r in self.rows if r.verdict == "regression"]


def load_side(path: Path, label: str) -> Side:
    d = path / "latest" if (path / "latest").exists() and not (path / "runs.csv").exists() else path
    if not d.is_dir():
        raise InputError([Problem(WHERE, None, label, f"{path} is not a directory")])
    if not (d / "runs.csv").exists():
        raise InputError([Problem(WHERE, None, label, f"{d} has no runs.csv (give a results directory)")])
    try:
        meta = json.loads((d / "metadata.json").read_text())
    except (OSError, ValueError) as e:
        raise InputError([Problem(WHERE, None, label, f"{d}/metadata.json is unreadable: {e}")]) from None
    if "columns" not in meta:
        raise InputError([Problem(WHERE, None, label, f"{d}/metadata.json has no `columns` (written by an older wearlab?)")])
    with (d / "runs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return Side(d, meta, rows)


def load_thresholds(path: Path | None) -> Thresholds:
    if path is None:
        return Thresholds()
    src = load_yaml(path)
    try:
        return Thresholds.model_validate(src.data or {})
    except ValidationError as e:
        raise InputError(problems_from_validation(e, src.lines, src.file, Thresholds)) from None


def _cells(side: Side, params: list[str], shown: list[str]) -> dict[str, list[dict[str, str]]]:
    """ok runs by cell; a cell is named by the parameters that vary (all of them match)."""
    out: dict[tuple, list[dict[str, str]]] = {}
    for r in side.rows:
        if r.get("status") == "ok":
            out.setdefault(tuple(r.get(p, "") for p in params), []).append(r)
    named = {}
    for key, rows in out.items():
        cell = dict(zip(params, key, strict=True))
        name = " ".join(f"{p}={cell[p]}" for p in shown if cell[p] != "") or "(one cell)"
        if name in named:   # differs only in a parameter that does not vary: name it in full
            name = " ".join(f"{p}={v}" for p, v in cell.items() if v != "")
        named[name] = rows
    return named


def compare(base: Side, cand: Side, th: Thresholds, metric_filter: list[str] | None = None) -> Report:
    if (base.experiment, base.workload) != (cand.experiment, cand.workload):
        raise InputError([Problem(WHERE, None, None,
                                  f"different experiments: baseline {base.path} is {base.experiment!r} (workload "
                                  f"{base.workload}), candidate {cand.path} is {cand.experiment!r} (workload "
                                  f"{cand.workload}); compare runs of one experiment")])
    params = base.meta["columns"]["params"]
    if params != cand.meta["columns"]["params"]:
        raise InputError([Problem(WHERE, None, None, f"the two runs vary different parameters: {params} vs "
                                                     f"{cand.meta['columns']['params']}")])
    metrics = base.meta["columns"]["metrics"]
    # By default the metrics the workload summarises (fewer tests, fewer chance findings); all
    # with a direction when the metadata predates that flag.
    default = [m for m, d in metrics.items() if d.get("summarised", True)]
    wanted = [m for m in (metric_filter or th.only or default)]
    unknown = [m for m in wanted if m not in metrics]
    if unknown:
        raise InputError([Problem(WHERE, None, "--metric", f"unknown metric {', '.join(unknown)} "
                                                           f"(metrics: {', '.join(metrics)})")])
    rows_all = [r for side in (base, cand) for r in side.rows]
    shown = [p for p in params if len({r.get(p, "") for r in rows_all}) > 1]
    cb, cc = _cells(base, params, shown), _cells(cand, params, shown)
    common = [c for c in cb if c in cc]
    if not common:
        raise InputError([Problem(WHERE, None, None, f"no cell in common: baseline has {', '.join(cb) or 'no ok run'}; "
                                                     f"candidate has {', '.join(cc) or 'no ok run'}")])
    rng = np.random.default_rng(SEED)
    rows = []
    for cell in common:
        for m in wanted:
            decl = metrics[m]
            better = decl.get("better", "none")
            if better not in ("lower", "higher"):
                continue
            a, b = finite(cb[cell], m), finite(cc[cell], m)
            if not a or not b:
                continue
            ma, mb = float(np.median(a)), float(np.median(b))
            change = (mb / ma - 1) if ma != 0 else None
            p = ci = None
            if len(a) >= 2 and len(b) >= 2:
                p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue) if set(a) != set(b) or len(set(a)) > 1 else 1.0
                ci = median_difference_interval(a, b, rng)
            rows.append(Comparison(cell, m, decl.get("unit", ""), better, len(a), len(b), ma, mb, change, p, ci,
                                   _verdict(m, a, b, ma, mb, change, p, better, th)))
    return Report(str(base.path), str(cand.path), base.experiment, th.alpha, rows,
                  [c for c in cb if c not in cc], [c for c in cc if c not in cb], _env_differences(base, cand))


def _verdict(metric: str, a, b, ma: float, mb: float, change: float | None, p: float | None, better: str,
             th: Thresholds) -> str:
    if len(a) < 2 or len(b) < 2 or min_p(len(a), len(b)) >= th.alpha:
        return "inconclusive"
    mt = th.metrics.get(metric, MetricThreshold())
    rel = mt.rel if mt.rel is not None else th.threshold
    worse = (mb > ma) if better == "lower" else (mb < ma)
    big = (change is None or abs(change) > rel) and (mt.abs is None or abs(mb - ma) > mt.abs)
    if p is not None and p < th.alpha and big and mb != ma:
        return "regression" if worse else "improvement"
    return "same"


def _env_differences(base: Side, cand: Side) -> list[str]:
    out = []
    for key in ("machine", "versions", "shaper", "seed", "repetitions"):
        a, b = base.meta.get(key), cand.meta.get(key)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                for k in sorted(set(a) | set(b)):
                    if a.get(k) != b.get(k) and k not in ("loadavg", "hostname"):
                        out.append(f"{key}.{k}: {a.get(k)!r} vs {b.get(k)!r}")
            else:
                out.append(f"{key}: {a!r} vs {b!r}")
    kinds = lambda m: {n: [f.get("kind") for f in fs] for n, fs in (m.get("nodes") or {}).items()}  # noqa: E731
    if kinds(base.meta) != kinds(cand.meta):
        out.append(f"node kinds: {kinds(base.meta)} vs {kinds(cand.meta)} (the change under test?)")
    return out


# -- output ----------------------------------------------------------------------------------------


def _fmt(v: float | None, unit: str = "") -> str:
    """As the unit prints (wearlab.model.quantities), with a digit more than the summary table:
    a comparison is about small differences. A unit this wearlab does not know (results of
    another version) prints as a plain number."""
    if v is None:
        return "-"
    if unit in quantities.UNITS:
        return quantities.UNITS[unit].format(v, digits=COMPARE_DIGITS)
    return f"{v:.6g}{(' ' + unit) if unit else ''}"


def headline(rep: Report) -> str:
    n = len(rep.regressions)
    improved = sum(1 for r in rep.rows if r.verdict == "improvement")
    unsure = sum(1 for r in rep.rows if r.verdict == "inconclusive")
    verdict = f"REGRESSION in {n} of {len(rep.rows)} comparisons" if n else f"no regression in {len(rep.rows)} comparisons"
    return (f"{verdict} ({improved} improved, {unsure} inconclusive; alpha {rep.alpha:g}) - "
            f"{rep.experiment}: {rep.baseline} -> {rep.candidate}")


def table_rows(rep: Report) -> list[list[str]]:
    out = []
    for r in rep.rows:
        out.append([r.cell, r.metric, f"{_fmt(r.median_base, r.unit)} (n={r.n_base})",
                    f"{_fmt(r.median_cand, r.unit)} (n={r.n_cand})",
                    "-" if r.change is None else f"{r.change * 100:+.1f} %",
                    "-" if r.p is None else f"{r.p:.3g}",
                    "-" if r.ci is None else f"[{_fmt(r.ci[0], r.unit)}, {_fmt(r.ci[1], r.unit)}]", r.verdict])
    return out


HEADER = ["cell", "metric", "baseline median", "candidate median", "change", "p (Mann-Whitney)",
          "95 % CI of the difference", "verdict"]


def to_markdown(rep: Report) -> str:
    lines = [f"**{headline(rep)}**", "", "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table_rows(rep)]
    if rep.only_baseline or rep.only_candidate:
        lines += ["", f"Cells only in the baseline: {', '.join(rep.only_baseline) or 'none'}; only in the candidate: "
                      f"{', '.join(rep.only_candidate) or 'none'}."]
    if rep.environment_differences:
        lines += ["", "Environments differ:", *[f"- {d}" for d in rep.environment_differences]]
    return "\n".join(lines) + "\n"


def to_junit(rep: Report) -> str:
    suite = ET.Element("testsuite", name=f"wearlab compare {rep.experiment}", tests=str(len(rep.rows)),
                       failures=str(len(rep.regressions)),
                       skipped=str(sum(1 for r in rep.rows if r.verdict == "inconclusive")))
    for r, row in zip(rep.rows, table_rows(rep), strict=True):
        case = ET.SubElement(suite, "testcase", classname=r.cell, name=r.metric)
        text = f"baseline {row[2]}, candidate {row[3]}, change {row[4]}, p {row[5]}, CI {row[6]}"
        if r.verdict == "regression":
            ET.SubElement(case, "failure", message=f"{r.metric} regressed {row[4]} (p {row[5]})").text = text
        elif r.verdict == "inconclusive":
            ET.SubElement(case, "skipped", message="too few runs for the test to reach alpha").text = text
        else:
            ET.SubElement(case, "system-out").text = f"{r.verdict}: {text}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def to_json(rep: Report) -> str:
    return json.dumps({"headline": headline(rep), **asdict(rep)}, indent=2) + "\n"
