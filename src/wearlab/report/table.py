"""The end-of-experiment table on the terminal (rich), from the workload's declaration."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from wearlab.report.summary import Cell
from wearlab.workloads.base import Metric, Ratio


def _fmt(metric: Metric, q: tuple[float, float, float]) -> str:
    q1, med, q3 = q
    if metric.unit == "s":
        return f"{med * 1000:.1f} ms [{(q3 - q1) * 1000:.1f}]" if med < 10 else f"{med:.2f} s [{q3 - q1:.2f}]"
    if metric.unit == "bit/s":
        return f"{med / 1e6:.3f} Mbit/s [{(q3 - q1) / 1e6:.3f}]"
    return f"{med:,.0f}"


def print_summary(console: Console, title: str, cells: list[Cell], ratio_rows: list[dict], varied: list[str],
                  metrics: tuple[Metric, ...], shown: dict[str, callable], declared: tuple[Ratio, ...]) -> None:
    """`shown`: parameter name -> how its value reads (e.g. sizes as 100KB)."""
    cols = [m for m in metrics if m.summarised]
    t = Table(title=f"{title}: median [IQR] per cell", title_justify="left")
    for p in varied:
        t.add_column(p)
    t.add_column("ok/n", justify="right")
    for m in cols:
        t.add_column(m.label or m.name, justify="right")
    for c in cells:
        row = [_param(shown, p, c.params.get(p, "")) for p in varied] + [f"{c.ok}/{c.ok + c.failed}"]
        row += [_fmt(m, c.stats[m.name]) if m.name in c.stats else "–" for m in cols]
        t.add_row(*row)
    console.print(t)
    for r in declared:
        rows = [x for x in ratio_rows if x["ratio"] == f"{r.param}: {r.numerator} / {r.denominator}"]
        if not rows:
            continue
        rt = Table(title=r.title or f"{r.numerator} / {r.denominator} (ratio of medians)", title_justify="left")
        keys = [p for p in varied if p != r.param and p not in r.ignoring]
        for p in keys:
            rt.add_column(p)
        label = {m.name: m.label or m.name for m in metrics}
        for m in r.metrics:
            rt.add_column(label.get(m, m), justify="right")
        for x in rows:
            rt.add_row(*[_param(shown, p, x["params"].get(p, "")) for p in keys],
                       *[f"{x[m]:.3f}" if m in x else "–" for m in r.metrics])
        console.print(rt)


def _param(shown: dict, name: str, value) -> str:
    if value in ("", None):
        return "–"
    try:
        return shown[name](value) if name in shown else str(value)
    except (TypeError, ValueError):
        return str(value)
