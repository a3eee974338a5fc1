"""The page-load waterfall of `wearlab report` and `wearlab plot` (report/plots.py), drawn from a
results directory written here by hand in the format `wearlab run` writes (runs.csv and
series/objects.csv, the columns of workloads/page_load.py): each bar's extent is its object's own
times, each cell shows its median load, and each connection has one colour."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from wearlab.report import html_report, plots

PARAMS = ["page", "http_version", "connections_per_origin", "protocol"]
OBJECT_COLUMNS = ["run", "repetition", *PARAMS, "index", "origin", "path", "size", "parent", "start_s", "ttfb_s",
                  "end_s", "bytes", "conn_id", "local_port", "http_version", "new_connection"]

# One HTTP/1.1 load (run 1): the root on www's connection 0, then the style on that connection
# and the script on a second one to static, the image after the script on static's connection.
# Times in s from the root's request.
H1 = [  # index, origin, path, start, first byte, end, connection
    (0, "www", "/", 0.000, 0.120, 0.150, 0),
    (1, "www", "/style.css", 0.150, 0.190, 0.230, 0),
    (2, "static", "/app.js", 0.150, 0.260, 0.400, 1),
    (3, "static", "/img/a.jpg", 0.420, 0.455, 0.600, 1),
]
# HTTP/2: three loads; the median (0.500 s) is run 3's, whose objects are these.
H2_LOADS = {2: 0.700, 3: 0.500, 4: 0.450}
H2 = [
    (0, "www", "/", 0.000, 0.110, 0.130, 5),
    (1, "www", "/style.css", 0.130, 0.160, 0.190, 5),
    (2, "static", "/app.js", 0.130, 0.240, 0.350, 6),
    (3, "static", "/img/a.jpg", 0.370, 0.400, 0.500, 6),
]


def _write(path: Path, columns: list[str], rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in columns})


def _objects(run: int, rep: int, version: str, objects, stretch: float = 1.0) -> list[dict]:
    cell = {"run": run, "repetition": rep, "page": "exp3-java", "http_version": version, "protocol": "https",
            "connections_per_origin": 6 if version == "1.1" else ""}
    return [{**cell, "index": i, "origin": o, "path": p, "size": 1000, "parent": "" if i == 0 else 0,
             "start_s": s * stretch, "ttfb_s": t * stretch, "end_s": e * stretch, "bytes": 1000, "conn_id": c,
             "local_port": 40000 + c, "new_connection": 1} for i, o, p, s, t, e, c in objects]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("page") / "run"
    d.mkdir()
    runs = [{"run": 1, "repetition": 0, "page": "exp3-java", "http_version": "1.1", "connections_per_origin": 6,
             "protocol": "https", "status": "ok", "page_load_s": 0.600}]
    objects = _objects(1, 0, "1.1", H1)
    for rep, (run, load) in enumerate(H2_LOADS.items()):
        runs.append({"run": run, "repetition": rep, "page": "exp3-java", "http_version": "2", "protocol": "https",
                     "status": "ok", "page_load_s": load})
        objects += _objects(run, rep, "2", H2, stretch=load / 0.500)
    _write(d / "runs.csv", ["run", "repetition", *PARAMS, "status", "page_load_s"], runs)
    _write(d / "series" / "objects.csv", OBJECT_COLUMNS, objects)
    metrics = {"page_load_s": {"unit": "s", "better": "lower", "label": "page load", "summarised": True}}
    (d / "metadata.json").write_text(json.dumps({"experiment": "page-load", "workload": "page-load",
                                                 "columns": {"params": PARAMS, "metrics": metrics}}))
    return d


def _bars(ax):
    """(row, left, right, colour, alpha) of every data bar, in ms."""
    out = []
    for p in ax.patches:
        if p.get_gid() == plots.DATA_GID:
            out.append((round(p.get_y() + p.get_height() / 2), p.get_x(), p.get_x() + p.get_width(),
                        p.get_facecolor()[:3], p.get_alpha()))
    return out


def test_the_waterfall_bars_are_the_objects_times(results):
    d = plots.draw(results)
    try:
        figs = [f for f in d.figures if f.name == "page_waterfall"]
        assert len(figs) == 1 and figs[0].section == "page-load", [f.name for f in d.figures]
        axes = figs[0].fig.axes
        titles = [ax.get_title(loc="left") for ax in axes]
        assert len(axes) == 2, titles          # one panel per cell: HTTP/1.1, HTTP/2
        for ax, objects in zip(axes, (H1, H2)):
            assert "(ms)" in ax.get_xlabel()
            bars = _bars(ax)
            assert len(bars) == 2 * len(objects)    # a wait and a transfer per object
            labels = [t.get_text() for t in ax.get_yticklabels()]
            assert labels == [f"{o} {p}" for _, o, p, *_ in objects]
            for i, _, _, start, first, end, _ in objects:
                row = sorted((b for b in bars if b[0] == i), key=lambda b: b[1])
                (_, l1, r1, c1, a1), (_, l2, r2, c2, a2) = row
                # waiting: request -> first byte (pale); receiving: first byte -> last byte (solid)
                assert (l1, r1, l2, r2) == pytest.approx((start * 1e3, first * 1e3, first * 1e3, end * 1e3), abs=1e-9)
                assert c1 == c2 and a1 == plots.PAGE_WAIT_ALPHA and a2 in (None, 1.0)
            # one colour per connection: www's (rows 0, 1) and static's (rows 2, 3) differ
            colour = {b[0]: b[3] for b in bars}
            assert colour[0] == colour[1] != colour[2] == colour[3]
        # the HTTP/2 panel is its median load, run 3 (0.5 s), not a mix of its loads
        assert "http_version=2" in titles[1] and "rep 1" in titles[1]
        assert max(b[2] for b in _bars(axes[1])) == pytest.approx(500.0)
    finally:
        d.close()


def test_plot_and_report_carry_the_waterfall(results, tmp_path):
    written = plots.plot_results(results)
    assert results / "plots" / "page_waterfall.png" in written
    assert "page-load" not in plots.draw(results).missing
    out = tmp_path / "report"
    html_report.write_report([results], out)
    text = "".join(p.read_text() for p in out.rglob("*.html"))
    assert 'id="fig-page_waterfall"' in text
