"""Plots of a results directory (matplotlib, Agg), drawn from its files alone: runs.csv, the
series, plan.json, metadata.json and claims.json. Runners and plotters apart (Flent): `wearlab
plot DIR` redraws any results directory as PNGs in DIR/plots, `wearlab report` puts the same
figures in its HTML pages, and `wearlab run` draws once the runs are done (on the host, also for
the uml runtime, where the guest's CPU is the expensive one).

What gets drawn, per workload (`draw` says why where a workload gets none):
- http-get: the phase waterfall (each run's TCP handshake, TLS handshake, wait for the first
  byte and transfer on the wire) and the phases stacked by size and protocol, the bytes per phase,
  and the declared ratios (HTTPS / HTTP ...) against size with the paper's points from the claims;
- page-load: each cell's waterfall (series/objects.csv of its median run): a row per object, its
  wait for the first byte and its transfer, coloured by the connection that carried it;
- stream and messages: one-way delay over time and its CDF, goodput over time, where the delay
  sat (d1-d4: medians per cell and stacked over time) and the virtual queue;
- a wearable's handover (series/handover.csv): each run's phases P1-P3 and delivery gap on one
  time axis, the watch's events marked;
- a wearable's interface policy (series/interface.csv, multipath.csv): per cell one run's active
  interface over time (shaded), what each path carried, and each switch with its reason;
- nodes with a device (series/energy.csv): energy per phase and node; with seed 003's app
  workloads (`app:`) each app's QoE against the watch's energy (Fig. 12's axes);
and on every time axis each link change of series/timeline.csv and the BT radio's states of
series/radio.csv. Every run, or every cell where runs are pooled, has its own colour; the paper's
values (the claims' `paper`) are drawn in black on the same axes.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wearlab.model.columns import Ratio
from wearlab.model.quantities import UNITS, plain_number, unit
from wearlab.report import claim_rows
from wearlab.report.claim_rows import Claim
from wearlab.report.summary import ratios as summary_ratios
from wearlab.report.summary import summarize

CELL_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                "tab:gray", "tab:olive", "tab:cyan")
PAPER = "black"                 # the paper's values, on every figure
MAX_PANELS = 8                  # cells drawn as panels of their own; more share one axes
MAX_WATERFALL_ROWS = 16         # runs per waterfall panel drawn one by one; more: one row per cell

# http-get phases on the wire: (name, start boundary, end boundary, colour); boundaries are
# seconds from the SYN's departure (runs.csv), "tls_end" = connect + the TLS handshake.
HTTP_PHASES = (
    ("TCP handshake", None, "wire_connect_s", "#4c72b0"),
    ("TLS handshake (HTTP: request)", "wire_connect_s", "wire_pretransfer_s", "#dd8452"),
    ("wait for the first byte", "wire_pretransfer_s", "wire_starttransfer_s", "#55a868"),
    ("transfer", "wire_starttransfer_s", "wire_total_s", "#8172b3"),
)
BYTE_PHASES = (("TCP handshake", "tcp_handshake", "#4c72b0"), ("TLS handshake", "tls_handshake", "#dd8452"),
               ("data", "data", "#8172b3"), ("teardown", "teardown", "#937860"))
ENERGY_STATES = {"connect": "#4c72b0", "handshake": "#dd8452", "data": "#8172b3", "data_encrypted": "#c44e52",
                 "tail": "#937860"}
RADIO_SHADE = {"sniff": ("0.45", "BT radio asleep (sniff): link held"),
               "waking": ("tab:orange", "BT radio waking: link held")}
DELAY_PARTS = {"d1_s": ("d1 server → phone", "#4c72b0"), "d2_s": ("d2 phone TCP receive buffer", "#dd8452"),
               "d3_s": ("d3 proxy buffer", "#55a868"), "d23_s": ("d2+d3 phone", "#dd8452"),
               "d4_s": ("d4 phone → watch", "#8172b3")}
# What an artist is (its gid): the runs' data, the paper's values, a link change, a radio state.
# tests/test_report_html.py reads them: every axes must hold data, not only marks.
DATA_GID, PAPER_GID, CHANGE_GID, RADIO_GID = "data", "paper", "link-change", "radio"
SECTIONS = {"http-get": "HTTP fetch", "page-load": "page load", "streams": "streams", "handover": "handover",
            "interface": "interface selection", "energy": "energy"}
# The watch's interfaces under an interface policy: each one's colour (its band and its path's line).
INTERFACE_COLOURS = {"bt": "tab:blue", "wifi": "tab:orange"}
INTERFACE_NAMES = {"bt": "BT", "wifi": "WiFi"}
SWITCH_GID = "interface-switch"   # a switch's mark (its bands: interface-bt, interface-wifi)


@dataclass
class Figure:
    name: str             # file stem in plots/
    section: str          # a key of SECTIONS
    title: str
    caption: str          # how to read it, in one or two sentences
    fig: Any              # matplotlib.figure.Figure

    def png(self, dpi: int = 100) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=dpi)
        return buf.getvalue()


@dataclass
class Drawing:
    """What `draw` made of one results directory: its figures, and per section without any, why."""

    results: Path
    workload: str
    figures: list[Figure] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)    # section -> why it has no figure

    def close(self) -> None:
        import matplotlib.pyplot as plt

        for f in self.figures:
            plt.close(f.fig)


# -- reading ---------------------------------------------------------------------------------

def _read(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


_f = claim_rows.number   # a cell of runs.csv or a series file as a finite number, else None


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


class _Results:
    """A results directory's files, read once."""

    def __init__(self, results: Path, claims: list[Claim] | None):
        self.dir = results
        self.meta = json.loads((results / "metadata.json").read_text())
        plan_file = results / "plan.json"
        self.plan = json.loads(plan_file.read_text()) if plan_file.is_file() else {}
        self.workload = str(self.meta.get("workload") or self.plan.get("workload") or "")
        self.experiment = str(self.meta.get("experiment") or self.plan.get("experiment") or results.name)
        cols = self.meta.get("columns", {})
        self.params: list[str] = list(cols.get("params") or self.plan.get("columns", {}).get("params") or [])
        self.units = {m: d.get("unit", "") for m, d in (cols.get("metrics") or {}).items() if isinstance(d, dict)}
        self.runs = _read(results / "runs.csv")
        self.ok = [r for r in self.runs if r.get("status") == "ok"]
        self.varied = [p for p in self.params if len({r.get(p, "") for r in self.runs} - {""}) > 1]
        self.claims = claims if claims is not None else claim_rows.load(results)
        self._nodes_of: dict[tuple[str, ...], dict[str, Any]] = {}
        self.series = results / "series"
        timeline = _read(self.series / "timeline.csv")
        self.changes: dict[str, list[tuple[float, str]]] = defaultdict(list)     # run -> (t, text)
        for r in timeline:
            t = _f(r.get("t_s"))
            if t is not None and r.get("source") != "reset":
                self.changes[r.get("run", "")].append((t, f"{r.get('link', '')}: {r.get('change', '')}".strip()))
        self.radio: dict[str, list[tuple[float, str]]] = defaultdict(list)       # run -> (t, state)
        for r in _read(self.series / "radio.csv"):
            t = _f(r.get("t_s"))
            if t is not None:
                self.radio[r.get("run", "")].append((t, r.get("state", "")))

    def resolved(self, row: dict[str, str]) -> dict[str, Any]:
        """A row (or a cell's parameters) with the node settings (`node.option`) of its plan cell:
        those fixed for the experiment are in the plan, not in runs.csv."""
        key = tuple(str(row.get(p, "")) for p in self.params)
        if key not in self._nodes_of:
            self._nodes_of[key] = self._cell_nodes(row)
        return {**self._nodes_of[key], **row}

    def _cell_nodes(self, row: dict[str, Any]) -> dict[str, Any]:
        for cell in self.plan.get("cells") or []:
            values = cell.get("values") or {}
            if all(k not in row or claim_rows.same_value(v, row[k]) or (v in ("", None) and row[k] in ("", None))
                   for k, v in values.items()):
                return {f"{n}.{k}": v for n, opts in (cell.get("nodes") or {}).items() if isinstance(opts, dict)
                        for k, v in opts.items()}
        return {}

    def cell(self, row: dict[str, str], without: tuple[str, ...] = ()) -> str:
        return ", ".join(_shown(k, row.get(k, "")) for k in self.varied if k not in without) or "all runs"

    def run_label(self, row: dict[str, str]) -> str:
        return f"rep {row.get('repetition', '?')}"

    def runs_by_cell(self, rows: list[dict[str, str]] | None = None) -> dict[str, list[dict[str, str]]]:
        out: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in self.ok if rows is None else rows:
            out[self.cell(r)].append(r)
        return out

    def claims_on(self, metrics: set[str]) -> list[Claim]:
        """The claims on one of these metrics' value (not a ratio, difference or trend) that give
        the paper's number."""
        return [c for c in self.claims if c.metric in metrics and c.kind == "value"
                and (c.paper_low is not None or c.paper_high is not None)]


def _shown(param: str, value: str) -> str:
    """A cell's parameter as a person reads it: size=100000 -> 100 kB."""
    v = _f(value)
    short = param.split(".")[-1]
    if v is not None and param in ("size", "bytes", "message_size"):
        return _bytes_text(v)
    if v is not None and param in ("rate", "background_rate"):
        return unit("bit/s").format(v)
    if v is not None:
        return f"{short}={plain_number(v)}"
    if value in ("True", "False"):
        return f"{short}" if value == "True" else f"no {short}"
    if param in ("protocol", "path", "pattern", "reconnect") or param.endswith(".interface_policy"):
        return value
    return f"{short}={value}"


def _bytes_text(v: float) -> str:
    """1000 -> '1 kB', 1500000 -> '1.5 MB' (a size as a person reads it, exact)."""
    for factor, shown in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if v >= factor:
            return f"{plain_number(round(v / factor, 3))} {shown}"
    return f"{plain_number(v)} B"


def _time_scale(max_s: float) -> tuple[float, str]:
    """(factor to multiply seconds by, unit) so the axis reads in whole-ish numbers."""
    if max_s < 2e-3:
        return 1e6, "µs"
    if max_s < 2.0:
        return 1e3, "ms"
    return 1.0, "s"


def _scale(unit_symbol: str, max_v: float) -> tuple[float, str]:
    """(divisor, shown unit) of a quantity for an axis."""
    u = UNITS.get(unit_symbol)
    if u is None:
        return 1.0, unit_symbol
    chosen = u.scales[0]
    for factor, shown in u.scales:
        if max_v >= factor:
            chosen = (factor, shown)
    return chosen


# -- marks shared by the figures ---------------------------------------------------------------

def _mark_paper_band(ax, lo: float | None, hi: float | None, label: str, *, horizontal: bool = True,
                     scale: float = 1.0, colour: str = PAPER) -> None:
    """The paper's value or range across an axes (horizontal: a y range), black unless it belongs
    to one of several cells drawn on the axes (then the cell's colour)."""
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    if lo is None:
        return
    span = ax.axhspan if horizontal else ax.axvspan
    line = ax.axhline if horizontal else ax.axvline
    if hi > lo:
        span(lo * scale, hi * scale, color=colour, alpha=0.10, lw=0, gid=PAPER_GID)
    line(lo * scale, color=colour, lw=1.2, ls=":", label=label, gid=PAPER_GID)
    if hi > lo:
        line(hi * scale, color=colour, lw=1.2, ls=":", gid=PAPER_GID)


def _mark_paper_point(ax, x: float, lo: float | None, hi: float | None, label: str | None, scale: float = 1.0,
                      horizontal_bars: bool = False) -> None:
    """The paper's value (a diamond) and range (a bar) at one x (or y for horizontal bars)."""
    lo = hi if lo is None else lo
    hi = lo if hi is None else hi
    if lo is None:
        return
    mid, err = (lo + hi) / 2 * scale, (hi - lo) / 2 * scale
    if horizontal_bars:
        c = ax.errorbar([mid], [x], xerr=[err], fmt="D", color=PAPER, ms=6, capsize=4, zorder=5, label=label)
    else:
        c = ax.errorbar([x], [mid], yerr=[err], fmt="D", color=PAPER, ms=6, capsize=4, zorder=5, label=label)
    for artist in c.get_children():
        artist.set_gid(PAPER_GID)


def _mark_timeline(ax, res: _Results, runs: list[str], *, t_max: float | None = None, radio: bool = True) -> None:
    """The link changes (dashed lines, their change written at the top) and the BT radio's states
    (shaded) of these runs, on an axes whose x is seconds since the run began."""
    seen: set[tuple[float, str]] = set()
    labelled = False
    for run in runs:
        for t, text in res.changes.get(run, []):
            key = (round(t, 1), text)
            if key in seen:
                continue
            seen.add(key)
            ax.axvline(t, color="tab:red", ls="--", lw=1, label=None if labelled else "link change", gid=CHANGE_GID)
            _note(ax, t, text, "tab:red")
            labelled = True
    shaded: set[str] = set()
    for run in runs if radio else []:
        events = sorted(res.radio.get(run, []))
        for i, (t, state) in enumerate(events):
            if state not in RADIO_SHADE:
                continue
            end = events[i + 1][0] if i + 1 < len(events) else (t_max if t_max is not None else t)
            start = max(0.0, t)
            if end <= start:
                continue
            colour, label = RADIO_SHADE[state]
            ax.axvspan(start, end, color=colour, alpha=0.18 if len(runs) == 1 else 0.10, lw=0,
                       label=None if state in shaded else label, gid=f"{RADIO_GID}-{state}")
            shaded.add(state)


def _note(ax, t: float, text: str, colour: str) -> None:
    """A short label beside a vertical mark, inside the axes (clipped, outside the layout)."""
    text = text if len(text) <= 34 else text[:33] + "…"
    note = ax.text(t, 0.97, " " + text, rotation=90, va="top", ha="left", fontsize=6, color=colour,
                   transform=ax.get_xaxis_transform(), clip_on=True)
    note.set_in_layout(False)


def _legend(ax, **kw) -> None:
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        kw.setdefault("fontsize", 7)
        ax.legend(**kw)


# -- http-get ------------------------------------------------------------------------------------

def _http_phase_spans(r: dict[str, str]) -> list[tuple[float, float]] | None:
    bounds = {k: _f(r.get(k)) for k in ("wire_connect_s", "wire_pretransfer_s", "wire_starttransfer_s", "wire_total_s")}
    if any(v is None for v in bounds.values()):
        return None
    out, start = [], 0.0
    for _, _, end_col, _ in HTTP_PHASES:
        end = max(start, bounds[end_col])
        out.append((start, end - start))
        start = end
    return out


def _size_groups(res: _Results) -> dict[str, list[dict[str, str]]]:
    """ok runs per size (ascending), or one group when the experiment has no size."""
    if "size" not in res.params:
        return {"": res.ok}
    groups: dict[float, list[dict[str, str]]] = defaultdict(list)
    for r in res.ok:
        groups[_f(r.get("size")) or 0.0].append(r)
    return {_shown("size", str(k)): groups[k] for k in sorted(groups)}


def _http_waterfall(res: _Results, plt) -> Figure | None:
    groups = {k: [r for r in rs if _http_phase_spans(r)] for k, rs in _size_groups(res).items()}
    groups = {k: rs for k, rs in groups.items() if rs}
    if not groups:
        return None
    per_run = all(len(rs) <= MAX_WATERFALL_ROWS for rs in groups.values())
    n_rows = max(len(rs) if per_run else len(res.runs_by_cell(rs)) for rs in groups.values())
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 1.0 + len(groups) * (0.8 + 0.28 * n_rows)), squeeze=False,
                             layout="constrained")
    for ax, (size, rs) in zip(axes[:, 0], groups.items()):
        rows: list[tuple[str, list[tuple[float, float]], str]] = []
        cell_names = list(res.runs_by_cell(rs))
        colours = {c: CELL_COLOURS[i % len(CELL_COLOURS)] for i, c in enumerate(cell_names)}
        if per_run:
            for r in sorted(rs, key=lambda r: (cell_names.index(res.cell(r)), int(_f(r.get("repetition")) or 0))):
                cell = res.cell(r, without=("size",))
                rows.append((f"{cell} · {res.run_label(r)}", _http_phase_spans(r), colours[res.cell(r)]))
        else:
            for cell, crs in res.runs_by_cell(rs).items():
                spans = [_http_phase_spans(r) for r in crs]
                med = [(_median([s[i][0] for s in spans]), _median([s[i][1] for s in spans]))
                       for i in range(len(HTTP_PHASES))]
                rows.append((f"{res.cell(crs[0], without=('size',))} (median of {len(crs)})", med, colours[cell]))
        t_max = max(s[-1][0] + s[-1][1] for _, s, _ in rows)
        k, unit = _time_scale(t_max)
        for y, (_, spans, _) in enumerate(rows):
            for (name, _, _, colour), (start, width) in zip(HTTP_PHASES, spans):
                ax.broken_barh([(start * k, width * k)], (y - 0.38, 0.76), color=colour,
                               label=name if y == 0 else None, gid=DATA_GID)
        ax.set_yticks(range(len(rows)), [label for label, _, _ in rows], fontsize=7)
        for tick, (_, _, colour) in zip(ax.get_yticklabels(), rows):
            tick.set_color(colour)
        ax.invert_yaxis()
        ax.set_xlim(0, t_max * k * 1.02)
        ax.set_xlabel(f"time since the SYN left ({unit})")
        ax.set_title(f"{size}" if size else "all sizes", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)
    fig.suptitle(f"{res.experiment}: phase waterfall on the wire" + ("" if per_run else " (median per cell)"))
    return Figure("http_waterfall", "http-get", "phase waterfall",
                  "Each row is one run (or a cell's medians): the TCP handshake, the TLS handshake up to the "
                  "request, the wait for the first byte and the transfer, timed on the client's capture. "
                  "Row labels are coloured by cell.", fig)


def _cells_in(rs: list[dict[str, str]], res: _Results) -> dict[str, list[dict[str, str]]]:
    out: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rs:
        out[res.cell(r, without=("size",))].append(r)
    return out


def _claim_cell(c: Claim, rows: list[dict[str, str]], res: _Results) -> bool:
    """Whether these runs (one cell's) are the claim's: its cells' values against theirs, node
    settings fixed for the experiment (not columns of runs.csv) against the plan's cell."""
    return bool(rows) and all(claim_rows.cell_matches(c.cells, res.resolved(r)) for r in rows)


# Claims on one phase of a stack mark the paper's value from that phase's bottom; on the whole
# (the total), from 0.
TIME_PHASE_OF = {"wire_connect_s": 0, "wire_tls_handshake_s": 1, "tls_handshake_s": 1, "wire_total_s": None}
BYTES_PHASE_OF = {"bytes_down_tcp_handshake": 0, "bytes_down_tls_handshake": 1, "bytes_down_data": 2,
                  "bytes_down_teardown": 3, "bytes_down_total": None}


def _stacked_by_size(res: _Results, plt, *, value, phases, unit_of, phase_of: dict[str, int | None],
                     ylabel: str):
    """One panel per size, a stacked bar per cell of the phases' medians (value(row) -> a list
    per phase, in base units), the paper's values from the claims on `phase_of`'s metrics."""
    groups = {k: [r for r in rs if value(r) is not None] for k, rs in _size_groups(res).items()}
    groups = {k: rs for k, rs in groups.items() if rs}
    if not groups:
        return None
    claims = res.claims_on(set(phase_of))
    fig, axes = plt.subplots(1, len(groups), figsize=(max(6.0, 2.6 * len(groups) + 1.5), 4.8), squeeze=False,
                             layout="constrained")
    labelled = False
    for ax, (size, rs) in zip(axes[0], groups.items()):
        cells = _cells_in(rs, res)
        labels = list(cells)
        meds = [[_median([value(r)[i] for r in crs]) for i in range(len(phases))] for crs in cells.values()]
        k, unit = unit_of(max(sum(m) for m in meds) or 1.0)
        bottoms = [[sum(m[:i]) for i in range(len(phases))] for m in meds]
        for i, (name, colour) in enumerate(phases):
            ax.bar(range(len(labels)), [m[i] * k for m in meds], bottom=[b[i] * k for b in bottoms], color=colour,
                   label=name, width=0.7, gid=DATA_GID)
        for x, crs in enumerate(cells.values()):
            for c in claims:
                if _claim_cell(c, crs, res):
                    i = phase_of[c.metric]
                    base = 0.0 if i is None else bottoms[x][i]
                    _mark_paper_point(ax, x + 0.42, None if c.paper_low is None else base + c.paper_low,
                                      None if c.paper_high is None else base + c.paper_high,
                                      None if labelled else "paper (claims), from the phase's start", scale=k)
                    labelled = True
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(f"{ylabel} ({unit})")
        ax.set_title(size or "all sizes", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    handles, names = [], []
    for ax in axes[0]:
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, loc="outside lower center", ncol=min(5, len(names)), fontsize=8)
    return fig


def _http_phases(res: _Results, plt) -> Figure | None:
    def value(r):
        spans = _http_phase_spans(r)
        return None if spans is None else [w for _, w in spans]

    fig = _stacked_by_size(res, plt, value=value, phases=[(n, c) for n, _, _, c in HTTP_PHASES],
                           unit_of=lambda m: (_time_scale(m)[0], _time_scale(m)[1]), phase_of=TIME_PHASE_OF,
                           ylabel="median time")
    if fig is None:
        return None
    fig.suptitle(f"{res.experiment}: phases by size and protocol (medians)")
    return Figure("http_phases", "http-get", "phases by size and protocol",
                  "Median time of each phase per cell, one panel per size; black diamonds are the paper's values "
                  "where a claim names the cell (a phase's value drawn from where that phase starts).", fig)


def _http_bytes(res: _Results, plt) -> Figure | None:
    cols = [f"bytes_down_{key}" for _, key, _ in BYTE_PHASES]

    def value(r):
        vals = [_f(r.get(c)) for c in cols]
        return None if all(v is None for v in vals) else [v or 0.0 for v in vals]

    def unit_of(m):
        div, unit = _scale("B", m)
        return 1 / div, unit

    fig = _stacked_by_size(res, plt, value=value, phases=[(n, c) for n, _, c in BYTE_PHASES], unit_of=unit_of,
                           phase_of=BYTES_PHASE_OF, ylabel="bytes downloaded, median")
    if fig is None:
        return None
    fig.suptitle(f"{res.experiment}: bytes downloaded per phase (seed 000 Table III)")
    return Figure("http_bytes", "http-get", "bytes per phase",
                  "Median bytes the client received per phase (frames on the wire), one panel per size; the paper's "
                  "per-phase values drawn from where that phase starts.", fig)


def _declared_ratios(res: _Results) -> list[Ratio]:
    out = []
    for r in res.plan.get("ratios") or []:
        try:
            out.append(Ratio(param=r["param"], numerator=str(r["numerator"]), denominator=str(r["denominator"]),
                             metrics=tuple(r.get("metrics") or ()), ignoring=tuple(r.get("ignoring") or ()),
                             title=r.get("title", "")))
        except (KeyError, TypeError):
            continue
    return out


def _ratios(res: _Results) -> list[Ratio]:
    """The ratios the workload declares, each with the metrics of the claims that take the same
    ratio, and the claims' ratios it does not declare."""
    out = _declared_ratios(res)
    for c in res.claims:
        k = c.contrast or {}
        if k.get("kind") != "ratio" or not c.metric:
            continue
        key = (str(k.get("over")), str(k.get("numerator")), str(k.get("denominator")))
        i = next((i for i, r in enumerate(out) if (r.param, r.numerator, r.denominator) == key), None)
        if i is None:
            same_param = next((r for r in out if r.param == key[0]), None)
            ignoring = same_param.ignoring if same_param else tuple(
                p for p in res.params if any(r.get(p, "") == "" for r in res.ok) and p != key[0])
            out.append(Ratio(param=key[0], numerator=key[1], denominator=key[2], metrics=(c.metric,),
                             ignoring=ignoring))
        elif c.metric not in out[i].metrics:
            r = out[i]
            out[i] = Ratio(r.param, r.numerator, r.denominator, (*r.metrics, c.metric), r.ignoring, r.title)
    return out


def _ratio_figure(res: _Results, plt) -> Figure | None:
    """Declared ratios (HTTPS / HTTP, without / with the keepalive ...) against size, or per group
    of cells where size does not vary, with the paper's points from the claims of the same ratio."""
    ratios = _ratios(res)
    metrics = sorted({m for r in ratios for m in r.metrics})
    if not metrics or not res.ok:
        return None
    by_size = "size" in res.varied
    cells = summarize(res.ok, res.params, metrics)
    # (ratio, metric, {group: [(x, value, params)]})
    panels: list[tuple[Ratio, str, dict[str, list[tuple[float, float, dict[str, str]]]]]] = []
    for ratio in ratios:
        rows = summary_ratios(cells, (ratio,))
        for m in ratio.metrics:
            lines: dict[str, list[tuple[float, float, dict[str, str]]]] = defaultdict(list)
            for row in rows:
                if m not in row:
                    continue
                p = row["params"]
                skip = (ratio.param, *ratio.ignoring, *(("size",) if by_size else ()))
                others = [k for k in res.varied if k not in skip]
                group = ", ".join(_shown(k, p.get(k, "")) for k in others) or "all"
                lines[group].append((_f(p.get("size")) or 0.0, row[m], p))
            if lines:
                panels.append((ratio, m, lines))
    if not panels:
        return None
    across = min(3, len(panels))
    down = math.ceil(len(panels) / across)
    fig, axes = plt.subplots(down, across, figsize=(max(6.0, 4.4 * across), 0.6 + 4.2 * down), squeeze=False,
                             layout="constrained")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax, (ratio, m, lines) in zip(axes.flat, panels):
        groups = sorted(lines)
        positions: list[tuple[float, dict[str, str]]] = []      # where each of ours sits, for the paper's
        for i, group in enumerate(groups):
            pts = sorted(lines[group], key=lambda p: p[0])
            colour = CELL_COLOURS[i % len(CELL_COLOURS)]
            if by_size:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colour,
                        label="ours" if group == "all" else f"ours: {group}",
                        gid=DATA_GID)
                positions += [(p[0], p[2]) for p in pts]
            else:
                ax.bar([i], [pts[0][1]], color=colour, width=0.6, label=f"ours: {group}", gid=DATA_GID)
                positions.append((float(i), pts[0][2]))
        labelled = False
        for c in res.claims:
            if c.kind != "ratio" or c.metric != m or (c.paper_low is None and c.paper_high is None):
                continue
            spec = c.contrast or {}
            if str(spec.get("over")) != ratio.param or str(spec.get("numerator")) != ratio.numerator \
                    or str(spec.get("denominator")) != ratio.denominator:
                continue
            cells_wanted = {k: v for k, v in c.cells.items() if k != ratio.param}
            xs = sorted({x for x, p in positions if claim_rows.cell_matches(cells_wanted, res.resolved(p))})
            label = None if labelled else "paper (claims)"
            if by_size and "size" not in cells_wanted:
                _mark_paper_band(ax, c.paper_low, c.paper_high, label)
            for x in xs:
                _mark_paper_point(ax, x + (0 if by_size else 0.38), c.paper_low, c.paper_high, label)
                label = None
            labelled = True
        ax.axhline(1.0, color="0.5", lw=0.8)
        if by_size:
            ax.set_xscale("log")
            sizes = sorted({x for x, _ in positions})
            ax.set_xticks(sizes, [_bytes_text(x) for x in sizes], fontsize=7)
            ax.minorticks_off()
            ax.set_xlabel("object size (log)")
        else:
            ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right", fontsize=7)
        u = res.units.get(m, "")
        ax.set_ylabel(f"{ratio.numerator} / {ratio.denominator} (ratio of medians)")
        ax.set_title(f"{m}{f' ({u})' if u else ''}: {_shown(ratio.param, ratio.numerator)} / "
                     f"{_shown(ratio.param, ratio.denominator)}", fontsize=9)
        ax.grid(alpha=0.3)
        _legend(ax)
    fig.suptitle(f"{res.experiment}: ratios {'against size' if by_size else 'per cell'}, ours and the paper's")
    section = res.workload if res.workload in ("http-get", "page-load") else "streams"
    return Figure("ratios", section,
                  "ratios against size" if by_size else "ratios",
                  "Ratios of medians between cells that differ only in the ratio's parameter, coloured per group "
                  "of the other parameters; the paper's values (claims) in black.", fig)


# -- page-load -----------------------------------------------------------------------------------

PAGE_WAIT_ALPHA = 0.35     # an object's wait for its first byte: its connection's colour, pale


@dataclass(frozen=True)
class PageBar:
    """One object of one load, as its waterfall row shows it (seconds from the root's request)."""

    label: str             # origin and path
    start: float           # requested
    first_byte: float
    end: float             # its last byte
    connection: str        # origin and libcurl's connection id: what the colour says


def _page_bars(rows: list[dict[str, str]]) -> list[PageBar]:
    out = []
    for r in sorted(rows, key=lambda r: _f(r.get("index")) or 0.0):
        start, ttfb, end = (_f(r.get(k)) for k in ("start_s", "ttfb_s", "end_s"))
        if start is None or ttfb is None or end is None:
            continue
        origin = r.get("origin", "")
        out.append(PageBar(f"{origin} {r.get('path', '')}", start, max(start, ttfb), max(start, ttfb, end),
                           f"{origin} #{r.get('conn_id', '?')}"))
    return out


def _page_waterfall(res: _Results, plt) -> Figure | None:
    """Per cell, the load whose page load time is the cell's median (a load, not a mix of loads:
    its objects' times belong together), one row per object."""
    objects: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in _read(res.series / "objects.csv"):
        objects[r.get("run", "")].append(r)
    chosen: list[tuple[str, dict[str, str], list[PageBar]]] = []
    for cell, rs in res.runs_by_cell().items():
        loaded = sorted((r for r in rs if _f(r.get("page_load_s")) is not None and objects.get(r.get("run", ""))),
                        key=lambda r: (_f(r.get("page_load_s")), int(_f(r.get("repetition")) or 0)))
        if loaded:
            run = loaded[(len(loaded) - 1) // 2]   # the lower median: a real load
            bars = _page_bars(objects[run.get("run", "")])
            if bars:
                chosen.append((cell, run, bars))
    if not chosen:
        return None
    chosen = chosen[:MAX_PANELS]
    n_rows = max(len(b) for _, _, b in chosen)
    fig, axes = plt.subplots(len(chosen), 1, figsize=(10, 1.2 + len(chosen) * (0.7 + 0.24 * n_rows)), squeeze=False,
                             layout="constrained")
    t_max = max(b.end for _, _, bars in chosen for b in bars)
    k, unit = _time_scale(t_max)
    for ax, (cell, run, bars) in zip(axes[:, 0], chosen):
        conns = list(dict.fromkeys(b.connection for b in bars))
        colours = {c: CELL_COLOURS[i % len(CELL_COLOURS)] for i, c in enumerate(conns)}
        labelled: set[str] = set()
        for y, b in enumerate(bars):
            colour = colours[b.connection]
            ax.barh(y, (b.first_byte - b.start) * k, left=b.start * k, height=0.76, color=colour,
                    alpha=PAGE_WAIT_ALPHA, gid=DATA_GID, label="_wait")
            ax.barh(y, (b.end - b.first_byte) * k, left=b.first_byte * k, height=0.76, color=colour, gid=DATA_GID,
                    label=None if b.connection in labelled else f"connection {b.connection}")
            labelled.add(b.connection)
        ax.set_yticks(range(len(bars)), [b.label for b in bars], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, t_max * k * 1.02)
        ax.set_xlabel(f"time since the root's request ({unit})")
        ax.set_title(f"{cell} · {res.run_label(run)} (median load: {_f(run.get('page_load_s')) * k:.0f} {unit})"
                     if k != 1 else f"{cell} · {res.run_label(run)}", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
        _legend(ax, loc="upper left", bbox_to_anchor=(1.005, 1.0), ncol=2 if len(conns) > 12 else 1)
    fig.suptitle(f"{res.experiment}: page load waterfall")
    return Figure("page_waterfall", "page-load", "page load waterfall",
                  "Per cell, its median load: one row per object in page order, from its request to its first "
                  "byte (pale) and on to its last byte (solid), coloured by the connection that carried it "
                  "(origin and libcurl's connection id).", fig)


# -- streams -------------------------------------------------------------------------------------

def _panels(n: int, plt, width: float = 10.0, height: float = 2.6):
    """n panels one above the other on one time axis (lower ones where there are many)."""
    height = height if n <= 4 else max(1.7, height * 0.75)
    fig, axes = plt.subplots(n, 1, figsize=(width, 1.2 + height * n), squeeze=False, sharex=True, layout="constrained")
    return fig, list(axes[:, 0])


def _plain_log(axis) -> None:
    """A log axis labelled 0.03, 0.1, 1, 10 rather than 3x10^-2."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _owd_over_time(res: _Results, owd: list[dict[str, str]], plt) -> Figure | None:
    by_cell: dict[str, dict[tuple[str, str, str], list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in owd:
        t, d = _f(r.get("t_send_s")), _f(r.get("owd_s"))
        if t is None or d is None or d <= 0:
            continue
        by_cell[res.cell(r)][(r.get("run", ""), r.get("repetition", ""), r.get("stream", "main"))].append((t, d))
    if not by_cell:
        return None
    claims = res.claims_on({"down_owd_median_s", "down_owd_p95_s", "down_owd_max_s", "up_owd_median_s",
                            "up_owd_p95_s", "up_owd_max_s", "msg_owd_median_s", "msg_owd_p95_s", "msg_owd_max_s"})
    together = len(by_cell) > MAX_PANELS
    fig, axes = _panels(1 if together else len(by_cell), plt)
    t_max = max(p[0] for runs in by_cell.values() for pts in runs.values() for p in pts)
    streams = {k[2] for runs in by_cell.values() for k in runs}
    for i, (cell, runs) in enumerate(by_cell.items()):
        ax = axes[0] if together else axes[i]
        for j, ((run, rep, stream), pts) in enumerate(sorted(runs.items())):
            pts.sort()
            colour = CELL_COLOURS[(i if together else j) % len(CELL_COLOURS)]
            label = cell if together else f"rep {rep}"
            if len(streams) > 1:
                label += f" {stream}"
            big = stream != "main" and len(streams) > 1
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o" if big else ".", ms=3 if big else 1.5,
                    color=colour, label=label if not together or j == 0 else None, gid=DATA_GID)
        if not together:
            _mark_timeline(ax, res, sorted({k[0] for k in runs}), t_max=t_max)
            cell_rows = [r for r in res.ok if res.cell(r) == cell]
            for c in claims:
                if _claim_cell(c, cell_rows, res):
                    _mark_paper_band(ax, c.paper_low, c.paper_high, f"paper: {c.metric}")
            ax.set_title(cell, fontsize=9, loc="left")
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
        ax.set_ylabel("one-way delay (s, log)")
        ax.grid(alpha=0.3)
        _legend(ax, markerscale=4, loc="upper left")
    if together:
        _mark_timeline(axes[0], res, sorted({k[0] for runs in by_cell.values() for k in runs}), t_max=t_max,
                       radio=False)
    axes[-1].set_xlabel("message sent at (s since the run began)")
    fig.suptitle(f"{res.experiment}: one-way delay over time")
    return Figure("owd_over_time", "streams", "one-way delay over time",
                  "Every message's one-way delay, one panel per cell and a colour per run; dashed red lines are "
                  "link changes, grey bands the BT radio asleep (orange: waking), dotted black the paper's values.",
                  fig)


def _owd_cdf(res: _Results, owd: list[dict[str, str]], plt) -> Figure | None:
    by_cell: dict[str, list[float]] = defaultdict(list)
    for r in owd:
        d = _f(r.get("owd_s"))
        if d is not None and d > 0:
            by_cell[res.cell(r) + ("" if r.get("stream", "main") == "main" else f" {r.get('stream')}")].append(d)
    if not by_cell:
        return None
    fig, ax = plt.subplots(figsize=(8, 5), layout="constrained")
    for i, (cell, ys) in enumerate(by_cell.items()):
        ys.sort()
        ax.plot(ys, [(k + 1) / len(ys) for k in range(len(ys))], color=CELL_COLOURS[i % len(CELL_COLOURS)],
                gid=DATA_GID,
                label=f"{cell} ({len(ys)} messages)")
    claims = res.claims_on({"down_owd_median_s", "down_owd_p95_s", "down_owd_max_s"})
    runs_of = res.runs_by_cell()
    for i, cell in enumerate(by_cell):
        for c in claims:
            if _claim_cell(c, runs_of.get(cell, []), res):
                _mark_paper_band(ax, c.paper_low, c.paper_high, f"paper: {c.metric} ({cell})", horizontal=False,
                                 colour=CELL_COLOURS[i % len(CELL_COLOURS)])
    ax.set(xlabel="one-way delay (s, log)", ylabel="share of messages", title=f"{res.experiment}: one-way delay, CDF")
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    _legend(ax, loc="lower right")
    return Figure("owd_cdf", "streams", "one-way delay CDF",
                  "The share of messages delivered within a delay, all runs of a cell pooled.", fig)


def _goodput(res: _Results, plt) -> Figure | None:
    gp: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    runs: set[str] = set()
    for r in _read(res.series / "goodput.csv"):
        t, g = _f(r.get("t_s")), _f(r.get("goodput_bps"))
        if r.get("stream", "main") == "main" and t is not None and g is not None:
            gp[res.cell(r)][t].append(g)
            runs.add(r.get("run", ""))
    if not gp:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    peak = max(v for bins in gp.values() for vs in bins.values() for v in vs)
    div, unit = _scale("bit/s", peak)
    for i, (cell, bins) in enumerate(gp.items()):
        ts = sorted(bins)
        ax.plot(ts, [sum(bins[t]) / len(bins[t]) / div for t in ts], lw=0.9, gid=DATA_GID,
                color=CELL_COLOURS[i % len(CELL_COLOURS)], label=cell)
    _mark_timeline(ax, res, sorted(runs), t_max=max(t for b in gp.values() for t in b), radio=len(gp) == 1)
    ax.set_ylim(bottom=0)
    ax.set(xlabel="time (s since the run began)", ylabel=f"goodput ({unit}, 200 ms bins)",
           title=f"{res.experiment}: goodput over time (mean over repetitions)")
    ax.grid(alpha=0.3)
    _legend(ax)
    return Figure("goodput_over_time", "streams", "goodput over time",
                  "Delivered application bytes per 200 ms, averaged over a cell's runs; red dashes are link changes.",
                  fig)


def _delay_split_bars(res: _Results, plt) -> Figure | None:
    cols = [c for c in ("d1_median_s", "d2_median_s", "d3_median_s", "d23_median_s", "d4_median_s")
            if any(_f(r.get(c)) is not None for r in res.ok)]
    if not cols:
        return None
    parts = [c for c in ("d1_median_s", "d2_median_s", "d3_median_s", "d4_median_s") if c in cols]
    if "d2_median_s" not in cols and "d23_median_s" in cols:
        parts = [c for c in ("d1_median_s", "d23_median_s", "d4_median_s") if c in cols]
    cells = res.runs_by_cell()
    labels = list(cells)
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.45 * len(labels)), layout="constrained")
    meds = {c: [_median([v for r in cells[lab] if (v := _f(r.get(c))) is not None]) for lab in labels] for c in parts}
    k, unit = _time_scale(max(sum(meds[c][i] for c in parts) for i in range(len(labels))) or 1.0)
    left = [0.0] * len(labels)
    for part in parts:
        name, colour = DELAY_PARTS[part.replace("_median", "")]
        vals = [v * k for v in meds[part]]
        ax.barh(range(len(labels)), vals, left=left, color=colour, label=name, gid=DATA_GID)
        left = [a + v for a, v in zip(left, vals)]
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel=f"median delay ({unit})", title=f"{res.experiment}: where the server → watch delay sat "
                                                  "(seed 003 Fig. 10)")
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, loc="lower right")
    return Figure("delay_split", "streams", "where the delay sat (medians)",
                  "d1 server → phone, d2 the phone's TCP receive buffer, d3 the proxy's buffer, d4 phone → watch: "
                  "each run's median, then the cell's median.", fig)


def _delay_split_over_time(res: _Results, plt) -> Figure | None:
    rows = _read(res.series / "delay_split.csv")
    if not rows:
        return None
    first_run: dict[str, str] = {}
    for r in rows:
        cell, run = res.cell(r), r.get("run", "")
        if cell not in first_run or int(_f(run) or 0) < int(_f(first_run[cell]) or 0):
            first_run[cell] = run
    cells = list(first_run)[:MAX_PANELS]
    have = {c for c in DELAY_PARTS if any(_f(r.get(c)) is not None for r in rows)}
    parts = [c for c in ("d1_s", "d2_s", "d3_s", "d4_s") if c in have]
    if "d2_s" not in have and "d23_s" in have:
        parts = [c for c in ("d1_s", "d23_s", "d4_s") if c in have]
    if not parts:
        return None
    fig, axes = _panels(len(cells), plt)
    for ax, cell in zip(axes, cells):
        pts = [r for r in rows if r.get("run") == first_run[cell] and _f(r.get("t_send_s")) is not None]
        t_end = max(_f(r["t_send_s"]) for r in pts)
        width = max(0.2, t_end / 150)
        bins: dict[int, list[dict[str, str]]] = defaultdict(list)
        for r in pts:
            bins[int(_f(r["t_send_s"]) // width)].append(r)
        ts = sorted(bins)
        ys = [[_median([v for r in bins[b] if (v := _f(r.get(p))) is not None]) for b in ts] for p in parts]
        ax.stackplot([b * width for b in ts], ys, colors=[DELAY_PARTS[p][1] for p in parts], gid=DATA_GID,
                     labels=[DELAY_PARTS[p][0] for p in parts], alpha=0.9)
        _mark_timeline(ax, res, [first_run[cell]], t_max=t_end)
        ax.set_ylabel("delay (s)")
        ax.set_title(f"{cell} (run {first_run[cell]})", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        _legend(ax, loc="upper left")
    axes[-1].set_xlabel(f"message sent at (s since the run began; medians per {width:.1f} s)")
    fig.suptitle(f"{res.experiment}: d1-d4 over time (one run per cell)")
    return Figure("delay_split_over_time", "streams", "d1-d4 over time",
                  "Where each server → watch message's delay sat, stacked, over one run of each cell.", fig)


def _virtual_queue(res: _Results, plt) -> Figure | None:
    vq: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    runs: set[str] = set()
    for r in _read(res.series / "vq.csv"):
        t, q, ub = _f(r.get("t_s")), _f(r.get("vq_bytes")), _f(r.get("q_ub_bytes"))
        if t is not None and q is not None:
            vq[res.cell(r)].append((t, q, ub or 0.0))
            runs.add(r.get("run", ""))
    if not vq:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.8), layout="constrained")
    for i, (cell, pts) in enumerate(vq.items()):
        pts.sort()
        c = CELL_COLOURS[i % len(CELL_COLOURS)]
        ax.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], lw=0.8, color=c, label=f"{cell}: queue", gid=DATA_GID)
        ax.plot([p[0] for p in pts], [p[2] / 1e3 for p in pts], "--", lw=0.6, color=c, label=f"{cell}: Q_UB")
    _mark_timeline(ax, res, sorted(runs), radio=len(vq) == 1)
    ax.set(xlabel="time (s since the run began)", ylabel="virtual queue (kB)",
           title=f"{res.experiment}: virtual queue of the mitigation (throttles above Q_UB)")
    ax.grid(alpha=0.3)
    _legend(ax)
    return Figure("virtual_queue", "streams", "virtual queue",
                  "The relay's virtual-queue estimate and its upper threshold Q_UB (seed 003 section 4).", fig)


# -- handover ------------------------------------------------------------------------------------

# A handover's phases between the watch's events (series/handover.csv; nodes/wearable.py), and
# where runs.csv holds each one's duration. A reactive handover goes P1 -> P2 -> P3; with WiFi
# always on there is no P2; a proactive one readies WiFi before BT fades.
HANDOVER_SPANS = (
    ("WiFi readied (proactive)", ("predicted",), ("WiFi subflow",), "#64b5cd", None),
    ("P1 BT unusable", ("P1 start",), ("BT disconnected",), "#4c72b0", "handover_p1_s"),
    ("P2 no link", ("BT disconnected",), ("WiFi on",), "#dd8452", "handover_p2_s"),
    ("P3 WiFi connecting", ("WiFi on", "BT disconnected"), ("WiFi connected",), "#55a868", "handover_p3_s"),
)
GAP_COLOUR = "#c44e52"
MAIN_EVENTS = ("walk", "predicted", "WiFi subflow", "P1 start", "BT disconnected", "WiFi on", "WiFi connected")


def _longest_gap(owd: list[dict[str, str]]) -> dict[str, tuple[float, float]]:
    """run -> (start, end) of its longest time without a delivery (send time + one-way delay)."""
    delivered: dict[str, list[float]] = defaultdict(list)
    for r in owd:
        t, d = _f(r.get("t_send_s")), _f(r.get("owd_s"))
        if t is not None and d is not None and r.get("stream", "main") == "main":
            delivered[r.get("run", "")].append(t + d)
    out = {}
    for run, ts in delivered.items():
        ts.sort()
        if len(ts) > 1:
            i = max(range(len(ts) - 1), key=lambda k: ts[k + 1] - ts[k])
            out[run] = (ts[i], ts[i + 1])
    return out


def _handover(res: _Results, owd: list[dict[str, str]], plt) -> Figure | None:
    events: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for e in _read(res.series / "handover.csv"):
        t = _f(e.get("t_s"))
        if t is not None:
            events[e.get("run", "")].append((t, e.get("event", "")))
    rows = [r for r in res.ok if events.get(r.get("run", ""))]
    if not rows:
        return None
    rows.sort(key=lambda r: (list(res.runs_by_cell()).index(res.cell(r)), int(_f(r.get("repetition")) or 0)))
    gaps = _longest_gap(owd)
    cell_names = list(dict.fromkeys(res.cell(r) for r in rows))
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(11, 3.2 + 0.42 * len(rows) + 0.3 * len(cell_names)),
                                 height_ratios=[max(2.0, 0.42 * len(rows)), 1.4 + 0.3 * len(cell_names)],
                                 layout="constrained")
    labelled: set[str] = set()
    t_max = 1.0
    for y, r in enumerate(rows):
        evs = sorted(events[r.get("run", "")])
        first = {}
        for t, ev in evs:
            first.setdefault(ev, t)
        for name, starts, ends, colour, _ in HANDOVER_SPANS:
            a = next((first[e] for e in starts if e in first), None)
            b = next((first[e] for e in ends if e in first), None)
            if a is None or b is None or b <= a:
                continue
            ax.broken_barh([(a, b - a)], (y - 0.32, 0.5), color=colour, gid=DATA_GID,
                           label=None if name in labelled else name)
            labelled.add(name)
            t_max = max(t_max, b)
        if r.get("run", "") in gaps:
            a, b = gaps[r["run"]]
            ax.broken_barh([(a, b - a)], (y + 0.2, 0.16), color=GAP_COLOUR, gid=DATA_GID,
                           label=None if "gap" in labelled else "longest time without a delivery")
            labelled.add("gap")
            t_max = max(t_max, b)
        for t, ev in evs:
            if ev in MAIN_EVENTS:
                ax.plot([t], [y - 0.42], "v", color="k", ms=4, gid=DATA_GID,
                        label=None if "event" in labelled else "the watch's handover events")
                labelled.add("event")
        for t, _ in res.changes.get(r.get("run", ""), []):
            ax.plot([t], [y + 0.42], "^", color="tab:red", ms=4, gid=CHANGE_GID,
                    label=None if "change" in labelled else "link change")
            labelled.add("change")
    ax.set_yticks(range(len(rows)), [f"{res.cell(r)} · {res.run_label(r)}" for r in rows], fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), rows):
        tick.set_color(CELL_COLOURS[cell_names.index(res.cell(r)) % len(CELL_COLOURS)])
    ax.invert_yaxis()
    ax.set_xlim(0, t_max * 1.05)
    ax.set_xlabel("time (s since the run began)")
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    ax.set_title("phases per run", fontsize=9, loc="left")

    # The phases' durations per cell (runs.csv), the paper's where a claim names them.
    metrics = [(name.split(" ")[0], col) for name, _, _, _, col in HANDOVER_SPANS if col] + \
              [("longest gap", "down_gap_max_s")]
    metrics = [(n, c) for n, c in metrics if any(_f(r.get(c)) is not None for r in rows)]
    width = 0.8 / max(1, len(cell_names))
    for i, cell in enumerate(cell_names):
        crs = [r for r in rows if res.cell(r) == cell]
        vals = [_median([v for r in crs if (v := _f(r.get(c))) is not None]) for _, c in metrics]
        bx.bar([k + i * width for k in range(len(metrics))], vals, width=width * 0.95,
               color=CELL_COLOURS[i % len(CELL_COLOURS)], label=cell, gid=DATA_GID)
    labelled_paper = False
    for c in res.claims_on({col for _, col in metrics}):
        k = [col for _, col in metrics].index(c.metric)
        for i, cell in enumerate(cell_names):
            if _claim_cell(c, [r for r in rows if res.cell(r) == cell], res):
                _mark_paper_point(bx, k + i * width, c.paper_low, c.paper_high,
                                  None if labelled_paper else "paper (claims)")
                labelled_paper = True
    bx.set_xticks([k + width * (len(cell_names) - 1) / 2 for k in range(len(metrics))], [n for n, _ in metrics])
    bx.set_ylabel("median duration (s)")
    bx.grid(axis="y", alpha=0.3)
    bx.set_title("durations per cell", fontsize=9, loc="left")
    _legend(bx, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.suptitle(f"{res.experiment}: handover phases (seed 003 section 6)")
    return Figure("handover_phases", "handover", "handover phase timeline",
                  "Top: each run's handover phases between the watch's events (triangles), its longest time without "
                  "a delivery (red) and link changes (red triangles). Bottom: the phases' median durations per cell "
                  "beside the paper's (black).", fig)


def _handover_delivery(res: _Results, plt) -> Figure | None:
    """Goodput of one run per cell on a common time axis with its handover events: the gap the
    user sees."""
    events = _read(res.series / "handover.csv")
    if not events:
        return None
    gp: dict[str, list[tuple[float, float]]] = defaultdict(list)
    cell_of: dict[str, str] = {}
    for r in _read(res.series / "goodput.csv"):
        t, g = _f(r.get("t_s")), _f(r.get("goodput_bps"))
        if t is not None and g is not None:
            gp[r.get("run", "")].append((t, g))
            cell_of[r.get("run", "")] = res.cell(r)
    first: dict[str, str] = {}
    for run, cell in sorted(cell_of.items(), key=lambda kv: int(_f(kv[0]) or 0)):
        first.setdefault(cell, run)
    if not first:
        return None
    cells = list(first)[:MAX_PANELS]
    fig, axes = _panels(len(cells), plt, height=2.0)
    by_run_events: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for e in events:
        t = _f(e.get("t_s"))
        if t is not None:
            by_run_events[e.get("run", "")].append((t, e.get("event", "")))
    peak = max(g for pts in gp.values() for _, g in pts) or 1.0
    div, unit = _scale("bit/s", peak)
    for i, (ax, cell) in enumerate(zip(axes, cells)):
        run = first[cell]
        per_s: dict[int, list[float]] = defaultdict(list)      # 1 s means: 200 ms bins of whole messages jitter
        for t, g in gp[run]:
            per_s[int(t)].append(g)
        pts = [(t + 0.5, sum(v) / len(v)) for t, v in sorted(per_s.items())]
        ax.plot([p[0] for p in pts], [p[1] / div for p in pts], lw=0.8, color=CELL_COLOURS[i % len(CELL_COLOURS)],
                gid=DATA_GID,
                label=f"goodput (1 s means), run {run}")
        for j, (t, ev) in enumerate(e for e in sorted(by_run_events.get(run, [])) if e[1] in MAIN_EVENTS):
            ax.axvline(t, color="k", lw=0.6, ls=":", label="the watch's handover events" if j == 0 else None)
            _note(ax, t, ev, "k")
        _mark_timeline(ax, res, [run], t_max=pts[-1][0] if pts else None)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"goodput ({unit})")
        ax.set_title(cell, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        _legend(ax, loc="upper right")
    axes[-1].set_xlabel("time (s since the run began)")
    fig.suptitle(f"{res.experiment}: delivery through the handover (one run per cell)")
    return Figure("handover_delivery", "handover", "delivery through the handover",
                  "Goodput (1 s means) of one run per cell with the watch's handover events (dotted) and the "
                  "BT radio's states: the gap a user sees.", fig)


# -- interface selection -------------------------------------------------------------------------

def _interface_spans(rows: list[dict[str, str]]) -> tuple[list[tuple[str, float, float]], list[tuple[float, str, str]]]:
    """One run's interface.csv rows: (interface, from s, to s) while each was active, and the
    switches (t, to, reason). The first sample says where the run began; the last, where it ended."""
    samples = sorted((t, r.get("active", "")) for r in rows if r.get("event") == "sample"
                     for t in [_f(r.get("t_s"))] if t is not None)
    switch_rows = sorted((t, r) for r in rows if r.get("event") == "switch" for t in [_f(r.get("t_s"))] if t is not None)
    switches = [(t, r.get("to", ""), r.get("reason", "")) for t, r in switch_rows]
    if not samples and not switches:
        return [], switches
    start = min([0.0] + [t for t, _ in samples[:1]])
    end = max([t for t, _ in samples[-1:]] + [t for t, _, _ in switches])
    active = samples[0][1] if samples else switch_rows[0][1].get("from", "")
    spans, t0 = [], start
    for t, to, _ in switches:
        if t > t0 and active:
            spans.append((active, t0, t))
        active, t0 = to, t
    if end > t0 and active:
        spans.append((active, t0, end))
    return spans, switches


def _path_rates(rows: list[dict[str, str]]) -> dict[str, list[tuple[float, float]]]:
    """One run's multipath.csv rows, the watch's side: each path's rate (bit/s, sent + received)
    over each series interval, at the interval's end."""
    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        t = _f(r.get("t_s"))
        if r.get("side") == "watch" and t is not None:
            per[r.get("path_name", "")].append((t, (_f(r.get("bytes_sent")) or 0) + (_f(r.get("bytes_received")) or 0)))
    out = {}
    for name, pts in per.items():
        pts.sort()
        out[name] = [(t1, (b1 - b0) * 8 / (t1 - t0)) for (t0, b0), (t1, b1) in zip(pts, pts[1:]) if t1 > t0]
    return out


def _interface_timeline(res: _Results, plt) -> Figure | None:
    """Per cell, one run under an interface policy: the active interface (shaded), what each path
    carried (the transport's counters), each switch (a dotted line, its reason beside it)."""
    by_run: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in _read(res.series / "interface.csv"):
        by_run[r.get("run", "")].append(r)
    if not by_run:
        return None
    first: dict[str, str] = {}
    for run in sorted(by_run, key=lambda run: int(_f(run) or 0)):
        first.setdefault(res.cell(by_run[run][0]), run)
    paths: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in _read(res.series / "multipath.csv"):
        if r.get("run", "") in first.values():
            paths[r.get("run", "")].append(r)
    cells = list(first)[:MAX_PANELS]
    fig, axes = _panels(len(cells), plt, height=2.0)
    rates = {run: _path_rates(paths[run]) for run in first.values()}
    peak = max([g for per in rates.values() for pts in per.values() for _, g in pts] + [1.0])
    div, unit = _scale("bit/s", peak)
    for ax, cell in zip(axes, cells):
        run = first[cell]
        spans, switches = _interface_spans(by_run[run])
        banded: set[str] = set()
        for name, a, b in spans:
            ax.axvspan(a, b, color=INTERFACE_COLOURS.get(name, "0.6"), alpha=0.15, lw=0, gid=f"interface-{name}",
                       label=None if name in banded else f"{INTERFACE_NAMES.get(name, name)} active")
            banded.add(name)
        for name, pts in sorted(rates[run].items()):
            ax.plot([t for t, _ in pts], [g / div for _, g in pts], lw=0.9, drawstyle="steps-pre", gid=DATA_GID,
                    color=INTERFACE_COLOURS.get(name, "0.3"), label=f"{INTERFACE_NAMES.get(name, name)} path carried")
        if not rates[run]:
            # No transport counters: the active interface itself is the data (a step line, 1 = WiFi).
            xs = [x for _, a, b in spans for x in (a, b)]
            ys = [int(name == "wifi") for name, _, _ in spans for _ in (0, 1)]
            ax.plot(xs, ys, color="k", lw=0.9, gid=DATA_GID, label="active interface (0 BT, 1 WiFi)")
        for j, (t, to, reason) in enumerate(switches):
            ax.axvline(t, color="k", lw=0.7, ls=":", gid=SWITCH_GID, label="switch" if j == 0 else None)
            _note(ax, t, f"→ {INTERFACE_NAMES.get(to, to)}: {reason}", "k")
        _mark_timeline(ax, res, [run], t_max=spans[-1][2] if spans else None, radio=False)
        ax.set_ylim(bottom=0)
        ax.set_ylabel(f"rate ({unit})" if rates[run] else "interface")
        ax.set_title(f"{cell} (run {run}, {len(switches)} switches)", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        _legend(ax, loc="upper right")
    axes[-1].set_xlabel("time (s since the run began)")
    fig.suptitle(f"{res.experiment}: the watch's active interface (one run per cell)")
    return Figure("interface_timeline", "interface", "active interface and switches",
                  "One run per cell: the interface its policy held (shaded), what each path of the multipath "
                  "transport carried (100 ms intervals) and each switch (dotted) with the policy's reason.", fig)


def _qoe_energy(res: _Results, plt) -> Figure | None:
    """Seed 003's Fig. 12 axes: per app (`app:`), each cell's QoE (the app's own metric) against the
    watch's energy, medians with the runs' range as bars: which policy buys QoE with energy."""
    from wearlab.workloads.apps import BY_NAME

    rows = [r for r in res.ok if r.get("app") in BY_NAME and _f(r.get("energy_j")) is not None]
    apps = [a for a in BY_NAME if any(r.get("app") == a for r in rows)]
    if not apps:
        return None
    labels = sorted({res.cell(r, without=("app",)) for r in rows})
    colour = {lab: CELL_COLOURS[i % len(CELL_COLOURS)] for i, lab in enumerate(labels)}
    fig, axes = plt.subplots(1, len(apps), figsize=(1.0 + 3.4 * len(apps), 3.8), squeeze=False, layout="constrained")
    for ax, name in zip(axes[0], apps):
        app = BY_NAME[name]
        mine = [r for r in rows if r.get("app") == name and _f(r.get(app.qoe_metric)) is not None]
        groups: dict[str, list[dict[str, str]]] = defaultdict(list)
        for r in mine:
            groups[res.cell(r, without=("app",))].append(r)
        qdiv, qunit = _scale(res.units.get(app.qoe_metric, ""), max([_f(r[app.qoe_metric]) or 0 for r in mine] + [0]))
        ediv, eunit = _scale("J", max([_f(r["energy_j"]) or 0 for r in mine] + [0]))
        for lab in sorted(groups):
            q = [_f(r[app.qoe_metric]) / qdiv for r in groups[lab]]
            e = [_f(r["energy_j"]) / ediv for r in groups[lab]]
            qm, em = _median(q), _median(e)
            bars = ax.errorbar([qm], [em], xerr=[[qm - min(q)], [max(q) - qm]], yerr=[[em - min(e)], [max(e) - em]],
                               fmt="o", ms=6, capsize=3, color=colour[lab], label=lab)
            bars.lines[0].set_gid(DATA_GID)
        better = "lower" if app.qoe_better == "lower" else "higher"
        ax.set_xlabel(f"{app.qoe_metric} ({qunit}; {better} is better)", fontsize=8)
        ax.set_ylabel(f"watch energy above idle ({eunit})", fontsize=8)
        ax.set_title(f"{name}", fontsize=9, loc="left")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        _legend(ax, loc="best")
    fig.suptitle(f"{res.experiment}: QoE against the watch's energy per app (seed 003 Fig. 12's axes)")
    return Figure("qoe_energy", "energy", "QoE against energy per app",
                  "Per app, each cell's QoE (the app's metric: download time, video throughput, message delay, "
                  "camera rate) against the watch's energy_j: medians, bars from the lowest to the highest run.", fig)


# -- energy --------------------------------------------------------------------------------------

def _energy(res: _Results, plt) -> Figure | None:
    rows = _read(res.series / "energy.csv")
    if not rows:
        return None
    # node -> cell -> state -> per-run joules
    per: dict[str, dict[str, dict[str, dict[str, float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    # energy_j is the workload's client's, energy_relay_j any other node's (the phone relaying)
    client = str((res.plan.get("fields") or {}).get("client") or "")
    relays: set[str] = set()
    for r in rows:
        j = _f(r.get("joules"))
        if j is None:
            continue
        node = f"{r.get('node', '')} ({r.get('device', '')})"
        if client and r.get("node", "") != client:   # results without the plan's client: no relay known
            relays.add(node)
        runs = per[node][res.cell(r)][r.get("state", "")]
        runs[r.get("run", "")] = runs.get(r.get("run", ""), 0.0) + j
    if not per:
        return None
    claims = res.claims_on({"energy_j", "energy_handshake_j", "energy_relay_j"})
    fig, axes = plt.subplots(len(per), 1, figsize=(max(7.0, 1.2 + 0.7 * max(len(c) for c in per.values())),
                                                     1.5 + 3.6 * len(per)), squeeze=False, layout="constrained")
    for ax, (node, cells) in zip(axes[:, 0], per.items()):
        labels = list(cells)
        states = [s for s in ENERGY_STATES if any(s in st for st in cells.values())] + \
                 sorted({s for st in cells.values() for s in st} - set(ENERGY_STATES))
        meds = {s: [_median(list(cells[c].get(s, {}).values())) for c in labels] for s in states}
        div, unit = _scale("J", max(sum(meds[s][i] for s in states) for i in range(len(labels))) or 1.0)
        bottom = [0.0] * len(labels)
        for s in states:
            vals = [v / div for v in meds[s]]
            ax.bar(range(len(labels)), vals, bottom=bottom, color=ENERGY_STATES.get(s, "0.6"), label=s, width=0.7,
                   gid=DATA_GID)
            bottom = [b + v for b, v in zip(bottom, vals)]
        labelled = False
        for x, lab in enumerate(labels):
            cell_rows = [r for r in res.ok if res.cell(r) == lab]
            for c in claims:
                if _claim_cell(c, cell_rows, res) and (c.metric == "energy_relay_j") == (node in relays):
                    _mark_paper_point(ax, x + 0.42, c.paper_low, c.paper_high,
                                      None if labelled else "paper (claims)", scale=1 / div)
                    labelled = True
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(f"energy above idle ({unit}, median)")
        ax.set_title(node, fontsize=9, loc="left")
        ax.grid(axis="y", alpha=0.3)
        _legend(ax, loc="upper left")
    fig.suptitle(f"{res.experiment}: energy per phase (the device's power model)")
    return Figure("energy_phases", "energy", "energy per phase",
                  "Each device's energy per power state (the phase's time x the device's level), median over a "
                  "cell's runs; black diamonds are the paper's values where a claim names the cell.", fig)


# -- all -----------------------------------------------------------------------------------------

def draw(results: Path, claims: list[Claim] | None = None) -> Drawing:
    """Every figure the results directory's files support, and per section without one, why.
    The caller closes the figures (Drawing.close)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    res = _Results(results, claims)
    d = Drawing(results, res.workload)

    def add(fig: Figure | None) -> None:
        if fig is not None:
            d.figures.append(fig)

    wl = res.workload
    owd = _read(res.series / "owd.csv") if wl in ("stream", "messages") else []
    if wl == "http-get":
        if not res.ok:
            d.missing["http-get"] = "no successful runs in runs.csv"
        for make in (_http_waterfall, _http_phases, _http_bytes, _ratio_figure):
            add(make(res, plt))
        if res.ok and not any(f.section == "http-get" for f in d.figures):
            d.missing["http-get"] = "runs.csv has no wire phase times (wire_*_s) or bytes"
    elif wl == "page-load":
        if not res.ok:
            d.missing["page-load"] = "no successful runs in runs.csv"
        add(_page_waterfall(res, plt))
        add(_ratio_figure(res, plt))
        if res.ok and not any(f.section == "page-load" for f in d.figures):
            d.missing["page-load"] = "series/objects.csv has no object times of a successful run"
    elif wl in ("stream", "messages"):
        for fig in (_owd_over_time(res, owd, plt), _owd_cdf(res, owd, plt), _goodput(res, plt),
                    _delay_split_bars(res, plt), _delay_split_over_time(res, plt), _virtual_queue(res, plt),
                    _ratio_figure(res, plt)):
            add(fig)
        if not any(f.section == "streams" for f in d.figures):
            d.missing["streams"] = "no messages delivered (series/owd.csv and goodput.csv are empty or absent)"
    else:
        d.missing[wl or "workload"] = f"no figures are drawn for workload '{wl}'"
    add(_handover(res, owd, plt))
    add(_handover_delivery(res, plt))
    if not any(f.section == "handover" for f in d.figures):
        d.missing["handover"] = "no wearable did a handover (no series/handover.csv, no P1-P3 in runs.csv)"
    add(_interface_timeline(res, plt))
    add(_energy(res, plt))
    add(_qoe_energy(res, plt))
    if not any(f.section == "energy" for f in d.figures):
        d.missing["energy"] = "no node names a device with power figures (no series/energy.csv)"
    return d


def plot_results(results: Path, drawing: Drawing | None = None) -> list[Path]:
    """Draw what the results hold; returns the PNG files written (in results/plots/)."""
    d = drawing or draw(results)
    out_dir = results / "plots"
    written: list[Path] = []
    try:
        for f in d.figures:
            out_dir.mkdir(exist_ok=True)
            path = out_dir / f"{f.name}.png"
            f.fig.savefig(path, dpi=110)
            written.append(path)
    finally:
        if drawing is None:
            d.close()
    return written
