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
import os
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
# `make test-experiments` runs two shards side by side (WEARLAB_SHARD=1/2 and 2/2): each experiment
# boots its own guest, and one waits on its links' timers most of the time. The shards are dealt
# longest first (each to the shard with the least so far) by the seconds a quiet run took (CI,
# 2 cores, after this file's QUICK); a file not listed counts 20 s.
SECONDS_TAKEN = {
    "handover": 150, "bufferbloat": 130, "seed003-handover-proactive": 55, "seed003-handover-reactive": 55,
    "seed003-sniff": 50, "sniff": 45, "proxy-sweep": 40, "lossy-wifi": 35, "tcpcrypt-paths": 40,
    "tcpcrypt": 40, "seed003-telegram": 40, "device-relay": 35, "seed000-relay": 35, "quickstart": 30,
    "proxy-check": 30, "seed003-bufferbloat-steady": 30, "seed003-bufferbloat-2mib": 20, "page-load": 60,
    "page-versions": 60,
    "seed004-characterizer": 30, "seed000-exp3-pages": 45, "seed002-usage-session": 20, "seed003-multipath": 41,
    "seed003-multipath-rtt": 35, "seed003-interface-selection": 43, "seed003-interface-selection-16mb": 13,
}


def shard(paths: list[Path], spec: str | None) -> list[Path]:
    """The files of shard `k/n` (all of them without a spec)."""
    if not spec:
        return paths
    k, n = (int(x) for x in spec.split("/"))
    loads, mine = [0.0] * n, []
    for p in sorted(paths, key=lambda p: (-SECONDS_TAKEN.get(_name(p), 20), p.name)):
        i = loads.index(min(loads))
        loads[i] += SECONDS_TAKEN.get(_name(p), 20)
        if i == k - 1:
            mine.append(p)
    return sorted(mine, key=paths.index)


def _name(path: Path) -> str:
    return load_experiment(path, CATALOG).name


SHIPPED = shard(SHIPPED, os.environ.get("WEARLAB_SHARD"))
SHORT = "5s"
# Beyond `duration`: what a file's cells need to be short and still do what they are for.
# A bulk stream's queues drain at the BT rate after the sender stops (8 MB at 1.1 Mbit/s: a minute):
# `bytes` bounds what a bulk cell sends, a smaller phone buffer what the chat's download queues.
_BULK = ["bytes=1MB"]
# The walk, the phases and the apps' reconnects on short timers (tests/test_handover.py's): at 5 m/s
# from 1 s, RSSI crosses the proactive -66 dBm near 2 s and BT's unusable -85 dBm near 6 s (25 m);
# WiFi is up 2.5 s later; tinyCam notices 10 s of silence, so at 20 s it has had data again.
_HANDOVER = ["duration=20s", "watch.walk_start=1s", "watch.walk_speed=5", "watch.p1=1s", "watch.p2=1s",
             "watch.p3=0.5s"]
QUICK: dict[str, list[str]] = {
    "handover": _HANDOVER,
    "seed003-handover-reactive": _HANDOVER,
    "seed003-handover-proactive": _HANDOVER,
    "sniff": ["bytes=300KB"],
    "seed003-sniff": ["bytes=300KB"],
    "bufferbloat": _BULK,
    "proxy-sweep": _BULK,
    "seed003-bufferbloat-steady": _BULK,
    "seed003-bufferbloat-2mib": _BULK,
    "seed003-telegram": ["phone.rmem_max=1MB"],
    # 8 cells: the CBR cells at 3 s (150 messages), the bulk ones at 250 KB (2.1 s over one path)
    "seed003-multipath": ["duration=3s", "bytes=250KB"],
    # 21 cells (the matrix less its 3 excluded; WiFi fair is a link profile), each ~1 s of its own besides the
    # cell's set-up: the apps at 1/256 of the paper's sizes (62.5 KB: 0.5 s over BT; video 0.47 s;
    # camera 0.59 s); the message is one in every tier. An app sets its own duration: no `duration=`.
    "seed003-interface-selection": ["app_scale=1/256"],
    # 2 cells (WiFi, adaptive) at 62.5 KB: ~0.05 s over WiFi, adaptive's switch (~0.6 s) comes after
    # it is done, so it stays on BT (~0.5 s); the default tier's 16 MB is ~14 s a run.
    "seed003-interface-selection-16mb": ["app_scale=1/256"],
}


def overrides(path: Path) -> list[str]:
    exp = load_experiment(path, CATALOG)
    out = QUICK.get(exp.name, [])
    uses_app = any(a not in (None, "", "none") for a in exp.matrix.get("app", [exp.fixed.get("app")]))
    if "duration" in exp.workload_class.params and not uses_app and not any(o.startswith("duration=") for o in out):
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
