"""The end-of-experiment tables on the terminal (rich): the summary, from the workload's
declaration, and the experiment's claims beside ours (`wearlab check` prints the same)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from wearlab.model import quantities
from wearlab.model.columns import Metric, Ratio
from wearlab.report.summary import Cell


WIDTH = 100   # the summary's tables fit a 100-column terminal


def _width(header: str, cells: list[str]) -> int:
    """A column's width as rich draws it: its widest text plus the padding and the border."""
    return max([len(header), *map(len, cells)]) + 3


def _fmt(metric: Metric, q: tuple[float, float, float]) -> str:
    """Median [IQR], as the metric's unit prints (wearlab.model.quantities)."""
    q1, med, q3 = q
    return metric.quantity.format_spread(med, q3 - q1)


def print_summary(console: Console, title: str, cells: list[Cell], ratio_rows: list[dict], varied: list[str],
                  metrics: tuple[Metric, ...], shown: dict[str, callable], declared: tuple[Ratio, ...]) -> None:
    """`shown`: parameter name -> how its value reads (e.g. sizes as 100KB)."""
    # Only metrics some cell has (a down-only stream has no up columns).
    cols = [m for m in metrics if m.summarised and any(m.name in c.stats for c in cells)]
    keys = [[_param(shown, p, c.params.get(p, "")) for p in varied] + [f"{c.ok}/{c.ok + c.failed}"] for c in cells]
    values = {m.name: [_fmt(m, c.stats[m.name]) if m.name in c.stats else "–" for c in cells] for m in cols}
    # At most WIDTH columns: the metrics that do not fit go to another table with the same cell keys
    # (a wrapped table is unreadable on a projector).
    key_width = sum(_width(h, [k[i] for k in keys]) for i, h in enumerate([*varied, "ok/n"]))
    parts: list[list[Metric]] = [[]]
    used = key_width
    for m in cols:
        w = _width(m.label or m.name, values[m.name])
        if parts[-1] and used + w > WIDTH:
            parts.append([])
            used = key_width
        parts[-1].append(m)
        used += w
    for i, part in enumerate(parts):
        more = f" ({i + 1}/{len(parts)})" if len(parts) > 1 else ""
        t = Table(title=f"{title}: median [IQR] per cell{more}", title_justify="left")
        for p in varied:
            t.add_column(p)
        t.add_column("ok/n", justify="right")
        for m in part:
            t.add_column(m.label or m.name, justify="right")
        for j, k in enumerate(keys):
            t.add_row(*k, *[values[m.name][j] for m in part])
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


def print_claims(console: Console, rows: list, title: str, footer: str = "", width: int = 100) -> None:
    """Claims beside ours (`rows`: report.check's ClaimResults): ours with its 95 % interval, the
    paper's value with the tolerance, how far ours lies from it, the verdict and the runs behind
    it; then each verdict's reason. Fits `width` columns (less on a narrower terminal)."""
    t = Table(title=title, title_justify="left")
    t.add_column("claim (evidence)", overflow="fold", ratio=3)
    t.add_column("ours [95 % CI]", justify="right", ratio=2)
    t.add_column("paper ± tol.", justify="right", ratio=2)
    t.add_column("diff", justify="right", no_wrap=True)
    t.add_column("verdict", no_wrap=True)
    t.add_column("runs", justify="right", no_wrap=True)
    colour = {"reproduced": "green", "not reproduced": "red", "inconclusive": "yellow", "not scored": "dim"}
    for r in rows:
        ours = _value(r.ours, r.unit, r.kind)
        if r.ours_low is not None and r.ours_high is not None:
            ours += f"\n[{_value(r.ours_low, r.unit, r.kind)}, {_value(r.ours_high, r.unit, r.kind)}]"
        paper = r.paper_text + (f"\n± {r.tolerance}" if r.tolerance not in ("", "0") else "")
        verdict = f"[{colour.get(r.verdict, 'white')}]{r.verdict}[/]"
        if r.noisy_runs:
            verdict += "\n[yellow]noisy node[/]"
        t.add_row(f"{r.id}\n[dim]{r.evidence}[/]", ours, paper, _difference(r), verdict, str(r.runs))
    console.print(t, width=min(console.width, width))
    for r in rows:
        why = r.remark or (r.note if r.verdict == "not reproduced" else "")
        if r.noisy_runs:
            why = "; ".join(w for w in (noisy_note(r.noisy_runs, r.runs, r.noisy_from), why) if w)
        if why:
            console.print(f"  {r.id}: {why}", width=min(console.width, width), soft_wrap=False)
    if footer:
        console.print(footer, width=min(console.width, width), soft_wrap=False)


def _value(v: float | None, unit: str, kind: str) -> str:
    if v is None:
        return "–"
    if kind == "trend":
        return f"ρ {v:+.2f}"
    if unit in quantities.UNITS:
        text = quantities.UNITS[unit].format(v)
        return ("+" + text) if kind == "difference" and v > 0 else text
    return f"{v:.3g}"


def _difference(r) -> str:
    if r.difference is None:
        return "–"
    if r.difference == 0:
        return "0"
    if r.difference_rel is not None:
        return f"{r.difference_rel * 100:+.0f} %" if abs(r.difference_rel) >= 0.1 else f"{r.difference_rel * 100:+.1f} %"
    return _value(r.difference, r.unit, "difference")


def noisy_note(noisy: int, runs: int | None, machines: list[str]) -> str:
    """A claim's flag for runs from a machine its fidelity probe did not trust (report.machine_trust)."""
    of = f" of {runs}" if runs is not None else ""
    many = (runs if runs is not None else noisy) != 1
    # "node": a shard's (I-of-N) or the one machine's (its host name) - the probe judged the node.
    return (f"{noisy}{of} run{'s' * many} from noisy {'node' if len(machines) == 1 else 'nodes'} "
            f"{', '.join(machines)}: timings suspect, verdict not re-judged")
