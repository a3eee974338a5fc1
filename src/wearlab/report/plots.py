"""Plots beside the results (PNG, matplotlib), drawn from the files alone: runs.csv, the series
and metadata.json's column declarations. Runners and plotters apart (Flent): `wearlab plot DIR`
redraws any results directory; `wearlab run` draws once the runs are done (on the host, also for
the uml runtime, where the guest's CPU is the expensive one).

What gets drawn depends on which series exist: stream workloads get OWD over time, the OWD CDF,
goodput over time, where the delay sat (d1-d4) and the virtual queue; others, none.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

CELL_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
                "tab:gray", "tab:olive", "tab:cyan")


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _label(row: dict[str, str], varied: list[str]) -> str:
    return ", ".join(f"{k}={row.get(k, '')}" for k in varied) or "all runs"


def plot_results(results: Path) -> list[Path]:
    """Draw what the results hold; returns the PNG files written (in results/plots/)."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    meta = json.loads((results / "metadata.json").read_text())
    params = meta.get("columns", {}).get("params", [])
    runs = _read(results / "runs.csv") if (results / "runs.csv").exists() else []
    varied = [p for p in params if len({r.get(p, "") for r in runs} - {""}) > 1]
    series_dir = results / "series"
    out_dir = results / "plots"
    written: list[Path] = []

    def save(fig, name: str) -> None:
        out_dir.mkdir(exist_ok=True)
        path = out_dir / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    if (series_dir / "owd.csv").exists():
        owd = [r for r in _read(series_dir / "owd.csv") if r["stream"] == "main"] or _read(series_dir / "owd.csv")
        by_cell: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for r in owd:
            by_cell[_label(r, varied)].append(
                (float(r["t_send_s"]), float(r["owd_s"])))
        colours = {c: CELL_COLOURS[i % len(CELL_COLOURS)] for i, c in enumerate(by_cell)}

        fig, ax = plt.subplots(figsize=(9, 5))
        for cell, pts in by_cell.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], ".", ms=1.5, color=colours[cell], label=cell)
        ax.set(xlabel="message sent at (s since the run began)", ylabel="one-way delay (s)",
               title=f"{meta.get('experiment')}: one-way delay over time")
        ax.set_yscale("log")
        ax.legend(fontsize=7, markerscale=6)
        save(fig, "owd_over_time.png")

        fig, ax = plt.subplots(figsize=(7, 5))
        for cell, pts in by_cell.items():
            ys = sorted(p[1] for p in pts)
            ax.plot(ys, [(i + 1) / len(ys) for i in range(len(ys))], color=colours[cell], label=cell)
        ax.set(xlabel="one-way delay (s)", ylabel="share of messages", title="one-way delay, CDF")
        ax.set_xscale("log")
        ax.legend(fontsize=7)
        save(fig, "owd_cdf.png")

    if (series_dir / "goodput.csv").exists():
        gp: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in _read(series_dir / "goodput.csv"):
            if r["stream"] == "main":
                gp[_label(r, varied)][float(r["t_s"])].append(float(r["goodput_bps"]))
        fig, ax = plt.subplots(figsize=(9, 5))
        for i, (cell, bins) in enumerate(gp.items()):
            ts = sorted(bins)
            ax.plot(ts, [sum(bins[t]) / len(bins[t]) / 1e6 for t in ts], lw=0.8,
                    color=CELL_COLOURS[i % len(CELL_COLOURS)], label=cell)
        ax.set(xlabel="time (s since the run began)", ylabel="goodput (Mbit/s, 200 ms bins)",
               title="goodput over time (mean over repetitions)")
        ax.legend(fontsize=7)
        save(fig, "goodput_over_time.png")

    split_cols = [c for c in ("d1_median_s", "d2_median_s", "d3_median_s", "d23_median_s", "d4_median_s")
                  if any(r.get(c) for r in runs)]
    if split_cols:
        cells: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in runs:
            for c in split_cols:
                if r.get(c):
                    cells[_label(r, varied)][c].append(float(r[c]))
        parts = [c for c in ("d1_median_s", "d2_median_s", "d3_median_s", "d4_median_s") if c in split_cols]
        if "d2_median_s" not in split_cols and "d23_median_s" in split_cols:
            parts = ["d1_median_s", "d23_median_s", "d4_median_s"]
        names = {"d1_median_s": "d1 server -> phone", "d2_median_s": "d2 phone TCP receive buffer",
                 "d3_median_s": "d3 proxy buffer", "d23_median_s": "d2+d3 phone", "d4_median_s": "d4 phone -> watch"}
        fig, ax = plt.subplots(figsize=(9, 5))
        labels = list(cells)
        bottom = [0.0] * len(labels)
        for j, part in enumerate(parts):
            vals = [sorted(cells[c][part])[len(cells[c][part]) // 2] if cells[c][part] else 0 for c in labels]
            ax.barh(labels, vals, left=bottom, color=CELL_COLOURS[j], label=names[part])
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set(xlabel="median delay (s)", title="where the server -> watch delay sat (seed 003 Fig. 10)")
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7)
        save(fig, "delay_split.png")

    if (series_dir / "vq.csv").exists():
        vq: dict[str, list[tuple[float, float, float, int]]] = defaultdict(list)
        for r in _read(series_dir / "vq.csv"):
            vq[_label(r, varied)].append((float(r["t_s"]), float(r["vq_bytes"]), float(r["q_ub_bytes"]),
                                          int(float(r["throttled"]))))
        if vq:
            fig, ax = plt.subplots(figsize=(9, 5))
            for i, (cell, pts) in enumerate(vq.items()):
                pts.sort()
                c = CELL_COLOURS[i % len(CELL_COLOURS)]
                ax.plot([p[0] for p in pts], [p[1] / 1e3 for p in pts], lw=0.8, color=c, label=f"{cell}: queue")
                ax.plot([p[0] for p in pts], [p[2] / 1e3 for p in pts], "--", lw=0.6, color=c, label=f"{cell}: Q_UB")
            ax.set(xlabel="time (s since the run began)", ylabel="virtual queue (kB)",
                   title="virtual queue of the mitigation (throttles above Q_UB)")
            ax.legend(fontsize=7)
            save(fig, "virtual_queue.png")
    return written
