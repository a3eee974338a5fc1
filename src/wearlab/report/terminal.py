"""What the report-side commands print on the terminal: the catalog (`wearlab kinds`, `wearlab
profiles`), plots (`wearlab plot`), the HTML report's files (`wearlab report`), a running
experiment (`wearlab top`), its metrics (`wearlab exporter`) and a comparison of two results
(`wearlab compare`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rich.console import Console
from rich.live import Live
from rich.table import Table

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.declarations import Catalog
from wearlab.model.profiles import PROFILES
from wearlab.model.quantities import UNITS
from wearlab.model.quantities import format_duration, format_rate

WHERE = "<command line>"


def profiles(console: Console) -> int:
    t = Table(title="link profiles (forward = between[0] -> between[1])", show_lines=True)
    for col in ("profile", "medium", "forward", "reverse", "what and where from"):
        t.add_column(col)
    for p in PROFILES.values():
        def shape(s) -> str:
            return (f"{format_rate(s.rate_bps) if s.rate_bps else 'no rate limit'}, "
                    f"{format_duration(s.delay_s)} one-way")
        medium = p.medium.value + (f" ({p.band.value})" if p.band else "")
        t.add_row(p.name, medium, shape(p.forward), shape(p.reverse), f"{p.description}\n{p.citation}")
    console.print(t)
    return 0


def kinds(catalog: Catalog, console: Console) -> int:
    t = Table(title="node kinds (`kind:` on a node; default per role)", show_lines=True)
    for col in ("kind", "roles", "options", "what it is"):
        t.add_column(col)
    defaults = {v: [r.value for r, k in catalog.default_kinds.items() if k == v] for v in catalog.default_kinds.values()}
    for k in catalog.node_kinds.values():
        roles = ", ".join(sorted(r.value for r in k.roles))
        if k.name in defaults:
            roles += f" (default for {', '.join(defaults[k.name])})"
        t.add_row(k.name, roles, "\n".join(f"{p.name}: {p.doc}" for p in k.options) or "–", k.doc)
    console.print(t)
    w = Table(title="workload kinds (`workload: {kind: ...}`)", show_lines=True)
    for col in ("kind", "fields", "parameters", "what it measures"):
        w.add_column(col)
    for k in catalog.workloads.values():
        fields = ", ".join(f for f in k.Fields.model_fields if f != "kind")
        w.add_row(k.name, fields, "\n".join(f"{p.name}: {p.doc}" for p in k.params), k.doc)
    console.print(w)
    if catalog.schedulers:
        m = Table(title="multipath schedulers (`multipath:` on a wearable; docs/multipath.md)", show_lines=True)
        for col in ("scheduler", "how it chooses"):
            m.add_column(col)
        for k in catalog.schedulers.values():
            m.add_row(k.name, k.doc)
        console.print(m)
    if catalog.interface_policies:
        m = Table(title="interface policies (`interface_policy:` on a wearable; docs/interface-selection.md)",
                  show_lines=True)
        for col in ("policy", "which interface carries the flow", "moves on", "starts on", "policy_transport"):
            m.add_column(col)
        for k in catalog.interface_policies.values():
            m.add_row(k.name, k.doc, k.moves_on, k.initial, ", ".join(k.transports))
        console.print(m)
    console.print(result_columns(catalog))
    console.print(units_table())
    return 0


def result_columns(catalog: Catalog) -> Table:
    """Every runs.csv column a workload or node kind declares (its `metrics`), with its unit and
    meaning: a run's row holds its workload's columns and those of the node kinds it runs."""
    t = Table(title="result columns (runs.csv; a run's row has its workload's and its node kinds' columns)")
    for col in ("of", "column", "unit", "better", "meaning"):
        t.add_column(col)
    owners = [(f"workload {k.name}", k) for k in catalog.workloads.values()] + \
             [(f"node kind {k.name}", k) for k in catalog.node_kinds.values()]
    for owner, k in owners:
        if not k.metrics:
            continue
        t.add_section()
        for i, m in enumerate(k.metrics):
            t.add_row(owner if i == 0 else "", m.name, m.unit, m.better, m.doc or "–")
    return t


def units_table() -> Table:
    """The units a result column may declare (wearlab.model.quantities), and how each is shown."""
    t = Table(title="units (wearlab.model.quantities: runs.csv, summaries, `wearlab compare`, the exporter)")
    for col in ("unit", "what", "shown as", "exported as"):
        t.add_column(col)
    for u in UNITS.values():
        shown = ", ".join(s for _, s in u.scales if s) or "a plain number"
        t.add_row(u.symbol, u.doc, shown, f"*_{u.base}" if u.base else "as it is")
    return t


def plot(dirs: list[Path], console: Console) -> int:
    from wearlab.report.plots import draw, plot_results

    problems = [Problem(str(d), None, None, "not a results directory (no metadata.json)")
                for d in dirs if not (d / "metadata.json").is_file()]
    if problems:
        raise InputError(problems)
    for d in dirs:
        drawing = draw(d)
        try:
            for png in plot_results(d, drawing):
                console.print(str(png))
        finally:
            drawing.close()
        for section, why in drawing.missing.items():
            console.print(f"{d}: no {section} plots: {why}")
    return 0


def report(dirs: list[Path], out: Path, console: Console) -> int:
    from wearlab.report.html_report import results_dirs, write_report

    for path in write_report(results_dirs(dirs), out):
        console.print(str(path))
    return 0


def top(results: Path, once: bool, console: Console) -> int:
    from wearlab.report.top_view import render
    from wearlab.report.live_record import read_live

    doc = read_live(results)
    if doc is None:
        raise EnvironmentProblem(f"no running experiment under {results} (give its results directory with --results)")
    if once:
        console.print(render(doc))
        return 0
    with Live(render(doc), console=console, refresh_per_second=4, screen=False) as live:
        while True:
            time.sleep(0.25)
            doc = read_live(results)
            if doc is None:
                break
            live.update(render(doc))
    console.print("the experiment has ended")
    return 0


def exporter(results: Path, listen: str, once: bool, console: Console) -> int:
    from prometheus_client import generate_latest

    from wearlab.report import exporter as E

    if once:
        sys.stdout.write(generate_latest(E.registry(results)).decode())
        return 0
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError([Problem(WHERE, None, "--listen", f"'{listen}' is not ADDRESS:PORT")])
    try:
        E.serve(results, host or "127.0.0.1", int(port))
    except OSError as e:
        raise EnvironmentProblem(f"cannot listen on {listen}: {e} (is another exporter running? "
                                 "choose another port with --listen)") from None
    console.print(f"serving metrics of experiments under {results} on http://{host or '127.0.0.1'}:{port}/metrics")
    while True:
        time.sleep(3600)


def compare(baseline: Path, candidate: Path, *, alpha: float | None, threshold: float | None,
            metric_thresholds: list[str], metrics: list[str], thresholds: Path | None,
            outputs: dict[str, Path | None], console: Console) -> int:
    from wearlab.report import compare as C

    th = C.load_thresholds(thresholds)
    updates: dict = {}
    if alpha is not None:
        if not 0 < alpha < 1:
            raise InputError([Problem(WHERE, None, "--alpha", f"{alpha} is not in (0, 1)")])
        updates["alpha"] = alpha
    if threshold is not None:
        if threshold < 0:
            raise InputError([Problem(WHERE, None, "--threshold", "must be >= 0")])
        updates["threshold"] = threshold
    per_metric = dict(th.metrics)
    for pair in metric_thresholds:
        name, sep, value = pair.partition("=")
        try:
            per_metric[name] = C.MetricThreshold(rel=float(value))
            assert sep and name
        except (ValueError, AssertionError):
            raise InputError([Problem(WHERE, None, "--metric-threshold", f"'{pair}' is not METRIC=REL")]) from None
    th = th.model_copy(update={**updates, "metrics": per_metric})
    base = C.load_side(baseline, "BASELINE")
    cand = C.load_side(candidate, "CANDIDATE")
    rep = C.compare(base, cand, th, metrics or None)
    t = Table(title=C.headline(rep))
    for h in C.HEADER:
        t.add_column(h)
    colour = {"regression": "red", "improvement": "green", "inconclusive": "yellow"}
    for row, r in zip(C.table_rows(rep), rep.rows, strict=True):
        t.add_row(*row[:-1], f"[{colour[r.verdict]}]{r.verdict}[/]" if r.verdict in colour else r.verdict)
    console.print(t)
    for d in rep.environment_differences:
        console.print(f"[yellow]environments differ:[/yellow] {d}")
    if rep.only_baseline or rep.only_candidate:
        console.print(f"cells only in the baseline: {', '.join(rep.only_baseline) or 'none'}; "
                      f"only in the candidate: {', '.join(rep.only_candidate) or 'none'}")
    writers = {"markdown": C.to_markdown, "junit": C.to_junit, "json": C.to_json}
    for what, path in outputs.items():
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(writers[what](rep))
    return 1 if rep.regressions else 0
