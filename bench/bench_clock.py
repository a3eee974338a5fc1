"""Could wearlab offer a virtual clock? UML's time-travel mode against the real clock.

On the host:  .venv/bin/python bench/bench_clock.py [--mptcp-runs N]

The issue's bar for shipping `--clock virtual` (time-travel=inf-cpu: network delays exact, idle
time skipped, CPU work takes no guest time): (1) the quickstart gives the same results as with
the real clock, within the real clock's own spread, and exact RTTs; (2) MPTCP works reliably;
(3) CPU-dependent timings can be refused or flagged. This measures (1) and (2) and writes the
evidence to bench/results/clock.json. It is evidence for a decision, not a target: the exit
status is 0 whenever the measurements ran.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, environment, table, write_result

WEARLAB = str(ROOT / ".venv" / "bin" / "wearlab")
VIRTUAL = {"WEARLAB_UML_ARGS": "time-travel=inf-cpu"}
METRICS = ("wire_connect_s", "wire_tls_handshake_s", "wire_total_s")


def quickstart(out: Path, extra_env: dict[str, str]) -> tuple[float, dict]:
    t0 = time.monotonic()
    subprocess.run([WEARLAB, "run", str(ROOT / "experiments" / "quickstart.yaml"), "--runtime", "uml",
                    "--out", str(out)], check=True, capture_output=True, env={**os.environ, **extra_env})
    wall = time.monotonic() - t0
    with (out / "quickstart" / "latest" / "runs.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    cells: dict[tuple, dict[str, list[float]]] = {}
    for r in rows:
        cell = cells.setdefault((r["protocol"], r["size"], r["path"]), {m: [] for m in METRICS})
        for m in METRICS:
            cell[m].append(float(r[m]))
    return wall, cells


def spread(xs: list[float]) -> tuple[float, float]:
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return med, q3 - q1


def mptcp_runs(n: int) -> dict:
    ok = 0
    for _ in range(n):
        res = subprocess.run([WEARLAB, "runtime-exec", "--", str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "-q",
                              "tests/test_guest_kernel.py", "-k", "mptcp"], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, **VIRTUAL}, check=False)
        ok += res.returncode == 0
    return {"runs": n, "passed": ok}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mptcp-runs", type=int, default=20)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    with tempfile.TemporaryDirectory(prefix="wearlab-clock-") as d:
        real_wall, real = quickstart(Path(d) / "real", {})
        virt_wall, virt = quickstart(Path(d) / "virtual", VIRTUAL)
    rows, within, compared = [], 0, 0
    cells = []
    for key in real:
        for m in METRICS:
            rm, iqr = spread(real[key][m])
            vm, viqr = spread(virt[key][m])
            if rm == 0 and vm == 0:
                continue
            compared += 1
            inside = abs(vm - rm) <= iqr
            within += inside
            rows.append([*key, m, rm * 1000, iqr * 1000, vm * 1000, viqr * 1000, (vm - rm) * 1000, inside])
            cells.append({"cell": key, "metric": m, "real_median_ms": rm * 1000, "real_iqr_ms": iqr * 1000,
                          "virtual_median_ms": vm * 1000, "virtual_iqr_ms": viqr * 1000, "within_real_iqr": inside})
    print(table(["protocol", "size", "path", "metric", "real med", "real IQR", "virt med", "virt IQR", "diff",
                 "within"], rows, title="\nQuickstart, real vs virtual clock (ms)"))
    mptcp = mptcp_runs(a.mptcp_runs)
    print(f"\nquickstart wall time: real {real_wall:.1f} s, virtual {virt_wall:.1f} s")
    print(f"virtual medians within the real clock's IQR: {within} of {compared}")
    print(f"MPTCP path-failure test under time-travel: {mptcp['passed']} of {mptcp['runs']} passed")
    doc = {"benchmark": "clock", "environment": environment(), "wall_s": {"real": real_wall, "virtual": virt_wall},
           "cells": cells, "within_real_iqr": within, "compared": compared, "mptcp_time_travel": mptcp,
           "bar_met": within == compared and mptcp["passed"] == mptcp["runs"]}
    print(f"\nwrote {write_result('clock', doc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
