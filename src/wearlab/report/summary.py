"""Per-cell statistics of runs.csv: medians and IQR, and HTTPS/HTTP ratios.

Reads only runs.csv (plus the list of parameter columns), so a summary can be recomputed from
any results directory, including one of an interrupted run.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

# Phase durations from the capture (the network's timing); curl's own timers (time_*) add the
# client's CPU time around them and are in runs.csv.
SUMMARY_METRICS = ("wire_connect_s", "wire_tls_handshake_s", "wire_starttransfer_s", "wire_total_s",
                   "time_total", "bytes_down_total", "bytes_up_total")
TLS_PARAMS = ("tls_version", "cipher", "cert")


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


def summarize(rows: list[dict[str, Any]], param_cols: list[str]) -> list[Cell]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(str(r.get(p, "")) for p in param_cols), []).append(r)
    cells = []
    for key, rs in groups.items():
        ok = [r for r in rs if r.get("status") == "ok"]
        stats = {}
        for m in SUMMARY_METRICS:
            xs = [float(r[m]) for r in ok if r.get(m) not in (None, "")]
            if xs:
                stats[m] = quartiles(xs)
        cells.append(Cell(dict(zip(param_cols, key)), len(ok), len(rs) - len(ok), stats))
    return cells


def https_http_ratios(cells: list[Cell]) -> list[dict[str, Any]]:
    """For every HTTPS cell, median ratios to the HTTP cell that differs only in protocol/TLS."""
    def base(c: Cell) -> tuple:
        return tuple((k, v) for k, v in c.params.items() if k != "protocol" and k not in TLS_PARAMS)

    http = {base(c): c for c in cells if c.params.get("protocol") == "http"}
    out = []
    for c in cells:
        if c.params.get("protocol") != "https" or base(c) not in http:
            continue
        h = http[base(c)]
        ratio = {"params": c.params}
        for m in ("wire_total_s", "bytes_down_total", "bytes_up_total"):
            if m in c.stats and m in h.stats and h.stats[m][1] > 0:
                ratio[m] = c.stats[m][1] / h.stats[m][1]
        if all(m in c.stats and m in h.stats for m in ("bytes_down_total", "bytes_up_total")):
            ratio["bytes_total"] = ((c.stats["bytes_down_total"][1] + c.stats["bytes_up_total"][1]) /
                                    (h.stats["bytes_down_total"][1] + h.stats["bytes_up_total"][1]))
        out.append(ratio)
    return out


def to_document(cells: list[Cell], ratios: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cells": [{"params": c.params, "ok": c.ok, "failed": c.failed,
                   "metrics": {m: {"q1": q[0], "median": q[1], "q3": q[2]} for m, q in c.stats.items()}}
                  for c in cells],
        "https_http_ratios": ratios,
    }
