"""Every experiment file wearlab ships runs to the end: each cell once, with its durations shortened
where the file allows it, every run `ok` (`make test-experiments`, a CI step of its own: about ten
minutes in the UML guest).

A shipped experiment that aborts half-way (the bufferbloat experiment's second virtual-queue cell
once found the first one's ifb still there) is a bug no unit test sees: the cells of one file
run one after another on the same nodes, and only running them all shows what a cell leaves to
the next. QUICK shortens what each file allows, so the sweep stays the file's own matrix.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest

from conftest import ROOT, wearlab
from wearlab.model.experiment_file import load_experiment
from wearlab.catalog import CATALOG

pytestmark = pytest.mark.shipped

# experiments/*.yaml and the seeds' suite, experiments/seeds/*.yaml (its claims.yaml is the claims'
# index, not an experiment: tests/test_claims_index.py).
SHIPPED = sorted((ROOT / "experiments").glob("*.yaml")) + sorted(
    p for p in (ROOT / "experiments" / "seeds").glob("*.yaml") if p.name != "claims.yaml")
SHORT = "5s"
# Beyond `duration`: what a file's cells need to be short and still do what they are for.
QUICK: dict[str, list[str]] = {
    # the walk, the phases and the apps' reconnects on short timers (tests/test_handover.py's)
    "handover": ["duration=25s", "watch.walk_start=1s", "watch.walk_speed=5", "watch.p1=2s", "watch.p2=2s",
                 "watch.p3=1s"],
    "sniff": ["bytes=300KB"],
    "seed003-sniff": ["bytes=300KB"],
    "seed003-handover-reactive": ["duration=25s", "watch.walk_start=1s", "watch.walk_speed=5", "watch.p1=2s",
                                  "watch.p2=2s", "watch.p3=1s"],
    "seed003-handover-proactive": ["duration=25s", "watch.walk_start=1s", "watch.walk_speed=5", "watch.p1=2s",
                                   "watch.p2=2s", "watch.p3=1s"],
}


def overrides(path: Path) -> list[str]:
    exp = load_experiment(path, CATALOG)
    out = QUICK.get(exp.name, [])
    if "duration" in exp.workload_class.params and not any(o.startswith("duration=") for o in out):
        out = [f"duration={SHORT}", *out]
    return out


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_experiment_runs_every_cell(path, tmp_path):
    sets = overrides(path)
    exp = load_experiment(path, CATALOG, repetitions=1, overrides=dict(s.split("=", 1) for s in sets))
    cells = len(exp.cells())
    t0 = time.monotonic()
    res = wearlab("run", str(path), "--repetitions", "1", "--out", str(tmp_path), *[f"--set={s}" for s in sets],
                  timeout=1800)
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    with (tmp_path / exp.name / "latest" / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    failed = [(r["run"], r["error"]) for r in rows if r["status"] != "ok"]
    assert not failed, failed
    assert len(rows) == cells, f"{len(rows)} rows for {cells} cells"
    print(f"{exp.name}: {cells} cells in {took:.0f} s")
