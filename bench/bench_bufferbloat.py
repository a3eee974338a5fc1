"""CPROXY bufferbloat and the virtual-queue mitigation at the paper's duration (seed 003 §4).

Runs where netem lives:  .venv/bin/wearlab runtime-exec -- .venv/bin/python bench/bench_bufferbloat.py

experiments/bufferbloat.yaml narrowed to its headline cell: CBR 1.5 Mbit/s server -> watch through
the phone's relay, tcp_rmem max 8,291,456, without and with the virtual queue, for DURATION
(the paper ran >= 160 s per rate).
Targets (issue 6): unmitigated median OWD >= 10 s; mitigated median OWD >= 20x lower at >= 95 %
of the unmitigated goodput.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, Stopwatch, environment, require_root_and_netem, table, verdict, write_result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="160s")
    a = ap.parse_args()
    require_root_and_netem()
    with Stopwatch() as total, tempfile.TemporaryDirectory(prefix="wearlab-bench-") as d:
        res = subprocess.run([sys.executable, "-m", "wearlab", "run", str(ROOT / "experiments" / "bufferbloat.yaml"),
                              "--out", d, "--set", f"duration={a.duration}", "--set", "pattern=cbr",
                              "--set", "phone.rmem_max=8291456"],
                             capture_output=True, text=True, cwd=ROOT, check=False)
        if res.returncode != 0:
            print(res.stdout[-2000:], res.stderr[-2000:])
            return 1
        with (Path(d) / "bufferbloat" / "latest" / "runs.csv").open() as f:
            rows = {r["phone.mitigation"]: r for r in csv.DictReader(f)}
    keys = ("down_owd_median_s", "down_owd_p95_s", "down_goodput_bps", "d1_median_s", "d2_median_s",
            "d3_median_s", "d4_median_s", "vq_throttled_share")
    cases = {m: {k: float(r[k]) if r.get(k) not in (None, "") else None for k in keys} for m, r in rows.items()}
    base, vq = cases["none"], cases["virtual-queue"]
    ratio = base["down_owd_median_s"] / vq["down_owd_median_s"]
    share = vq["down_goodput_bps"] / base["down_goodput_bps"]
    print(table(["mitigation", *keys], [[m, *[c[k] for k in keys]] for m, c in cases.items()],
                title=f"\nCBR 1.5 Mbit/s, 8 MB receive buffer, {a.duration}"))
    print(f"OWD {ratio:.1f}x lower with the virtual queue at {share * 100:.1f} % of the goodput "
          "(paper, bulk: 78x at < 3 % less)")
    doc = {"benchmark": "bufferbloat", "environment": environment(), "parameters": vars(a), "cases": cases,
           "owd_ratio": ratio, "goodput_share": share,
           "targets": "unmitigated median OWD >= 10 s; mitigation >= 20x lower at >= 95 % goodput",
           "duration_s": total.s}
    path = write_result("bufferbloat", doc)
    print(f"\nwrote {path}")
    return verdict({"unmitigated median OWD >= 10 s": base["down_owd_median_s"] >= 10,
                    "mitigated median OWD >= 20x lower": ratio >= 20,
                    "mitigated goodput >= 95 % of unmitigated": share >= 0.95})


if __name__ == "__main__":
    sys.exit(main())
