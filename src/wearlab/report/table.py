"""The end-of-experiment table on the terminal (rich), from the workload's declaration."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from wearlab.report.summary import Cell
from wearlab.model.columns import Metric, Ratio


def _fmt(metric: Metric, q: tuple[float, float, float]) -> str:
    """Median [IQR], as the metric's unit prints (wearlab.model.quantities)."""
    q1, med, q3 = q
    return metric.quantity.format_spread(med, q3 - q1)


def print_summary(console: Console, title: str, cells: list[Cell], ratio_rows: list[dict], varied: list[str],
                  metrics: tuple[Metric, ...], shown: dict[str, callable], declared: tuple[Ratio, ...]) -> None:
    """`shown`: parameter name -> how its value reads (e.g. sizes as 100KB)."""
    # Only metrics some cell has (a down-only stream has no up columns).
    cols = [m for m in metrics if m.summarised and any(m.name in c.stats for c in cells)]
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
        label = {m.name: m.label or m.name for m in metrics}
        if not rows:
            continue
        rt = Table(title=r.title or f"{r.numerator} / {r.denominator} (ratio of medians)", title_justify="left")
        keys = [p for p in varied if p != r.param and p not in r.ignoring]
        for p in keys:
            rt.add_column(p)
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


def print_reference(console: Console, reference, cells: list[Cell], metrics: tuple[Metric, ...], shown: dict,
                    fixed: dict | None = None) -> None:
    """The published figures beside ours, cell by cell. `fixed`: settings every cell has (not
    columns of runs.csv, e.g. a node setting set for the whole experiment)."""
    by_name = {m.name: m for m in metrics}
    t = Table(title=f"beside the paper: {reference.source}", title_justify="left")
    t.add_column("cell")
    t.add_column("metric")
    t.add_column("wearlab median [IQR]", justify="right")
    t.add_column("paper", justify="right")
    for ref in reference.cells:
        match = [c for c in cells if all(str({**(fixed or {}), **c.params}.get(k)) == str(v)
                                         for k, v in ref.match.items())]
        label = ", ".join(f"{k}={_param(shown, k, v)}" for k, v in ref.match.items())
        for metric, paper in ref.values.items():
            ours = (_fmt(by_name[metric], match[0].stats[metric])
                    if match and metric in match[0].stats and metric in by_name else "–")
            t.add_row(label, by_name[metric].label if metric in by_name else metric, ours, paper)
    if reference.cells:
        console.print(t)
    else:
        console.print(f"beside the paper: {reference.source}")
    for note in reference.notes:
        console.print(f"paper: {note}")
