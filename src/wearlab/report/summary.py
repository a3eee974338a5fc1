"""Per-cell statistics of runs.csv: medians and IQR of the workload's summarised metrics, and the
ratios it declares (HTTPS / HTTP for http-get).

Reads only runs.csv and the workload's declaration, so a summary can be recomputed from any
results directory, including one of an interrupted run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from wearlab.model.columns import Ratio


@dataclass
class Cell:
    params: dict[str, str]
    ok: int
    failed: int
    stats: dict[str, tuple[float, float, float]]  # metric -> (q1, median, q3)


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def summarize(rows: list[dict[str, Any]], param_cols: list[str], metrics: list[str]) -> list[Cell]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(str(r.get(p, "")) for p in param_cols), []).append(r)
    cells = []
    for key, rs in groups.items():
        ok = [r for r in rs if r.get("status") == "ok"]
        stats = {}
        for m in metrics:
            xs = [float(r[m]) for r in ok if r.get(m) not in (None, "")]
            if xs:
                stats[m] = quartiles(xs)
        cells.append(Cell(dict(zip(param_cols, key)), len(ok), len(rs) - len(ok), stats))
    return cells


def ratios(cells: list[Cell], declared: tuple[Ratio, ...]) -> list[dict[str, Any]]:
    """For every cell on a ratio's numerator side, its medians over those of the cell that
    differs only in the ratio's parameter (and the parameters it ignores)."""
    out = []
    for r in declared:
        def base(c: Cell) -> tuple:
            return tuple((k, v) for k, v in c.params.items() if k != r.param and k not in r.ignoring)

        denominators = {base(c): c for c in cells if c.params.get(r.param) == r.denominator}
        for c in cells:
            if c.params.get(r.param) != r.numerator or base(c) not in denominators:
                continue
            d = denominators[base(c)]
            entry: dict[str, Any] = {"ratio": f"{r.param}: {r.numerator} / {r.denominator}", "params": c.params}
            for m in r.metrics:
                if m in c.stats and m in d.stats and d.stats[m][1] > 0:
                    entry[m] = c.stats[m][1] / d.stats[m][1]
            out.append(entry)
    return out


def to_document(cells: list[Cell], ratio_rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cells": [{"params": c.params, "ok": c.ok, "failed": c.failed,
                   "metrics": {m: {"q1": q[0], "median": q[1], "q3": q[2]} for m, q in c.stats.items()}}
                  for c in cells],
        "ratios": ratio_rows,
    }
