"""Harness overhead: how much longer `wearlab run` takes than the fetches it measures.

Two measurements, each of the whole `quickstart` experiment (60 runs):

- in the guest: `python -m wearlab run experiments/quickstart.yaml --runtime host --out <tmp>`
  inside the UML guest (where netem is), so the wall time has no guest boot in it;
- from the host: `.venv/bin/wearlab run experiments/quickstart.yaml --out <tmp>`, which boots the
  UML guest itself (its wall time includes the boot and power-off).

Run it on the host (does both; the in-guest part through `wearlab runtime-exec`):

    .venv/bin/python bench/bench_overhead.py            # both
    .venv/bin/python bench/bench_overhead.py --only host
    .venv/bin/wearlab runtime-exec -- .venv/bin/python bench/bench_overhead.py   # in-guest part only

On a kernel with sch_netem (no guest needed) the "in guest" part runs on that kernel directly.
Results: bench/results/overhead.json, one section per part (each with its own environment).
The wall time is split with the timestamps wearlab writes: process start -> metadata
started_utc (imports, loading), setup (metadata setup.total_s: network, servers, captures,
dumps), fetch agent + warm-up (-> first run's started_utc), the runs (sum of runs.csv wall_s, of
which curl's time_total), the gaps between runs (capture accounting of the previous run),
teardown (last run's end -> finished_utc) and exit (summary, -> process end).
Target: wall <= 1.15 x sum(time_total).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from common import RESULTS, ROOT, env_with_host_load, environment, probe, table, verdict, write_result

EXPERIMENT = ROOT / "experiments" / "quickstart.yaml"
TARGET_RATIO = 1.15


def ts(s: str) -> float:
    return datetime.fromisoformat(s).timestamp()


def find_results(out: Path) -> Path:
    dirs = [p.parent for p in out.glob("*/*/metadata.json") if not p.parent.is_symlink()]  # not `latest`
    if len(dirs) != 1:
        raise RuntimeError(f"expected one results directory under {out}, found {dirs}")
    return dirs[0]


def analyse(results_dir: Path, t_start: float, t_end: float) -> dict:
    """Split [t_start, t_end] (epoch seconds around the command) with wearlab's own timestamps."""
    meta = json.loads((results_dir / "metadata.json").read_text())
    with (results_dir / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    ok = [r for r in rows if r["status"] == "ok"]
    tt = [float(r["time_total"]) for r in ok if r.get("time_total")]
    starts = [ts(r["started_utc"]) for r in rows]
    walls = [float(r["wall_s"]) for r in rows]
    sum_total, sum_wall = sum(tt), sum(walls)
    wall = t_end - t_start
    started, finished = ts(meta["started_utc"]), ts(meta["finished_utc"])
    setup_s = meta.get("setup", {}).get("total_s")
    first, last_end = starts[0], starts[-1] + walls[-1]
    gaps = [starts[i + 1] - (starts[i] + walls[i]) for i in range(len(rows) - 1)]
    split = {
        "launch_to_started (boot, imports, load)": started - t_start,
        "setup (network, servers, captures, dumps)": setup_s,
        "agent + warm-up": first - (started + (setup_s or 0)),
        "runs: curl time_total": sum_total,
        "runs: per-run harness (wall_s - time_total)": sum_wall - sum_total,
        "gaps between runs (capture accounting)": sum(gaps),
        "teardown (last run -> finished_utc)": finished - last_end,
        "exit (summary, finished_utc -> end)": t_end - finished,
    }
    return {
        "results_dir": str(results_dir), "status": meta.get("status"), "runs": len(rows), "runs_ok": len(ok),
        "wall_s": wall, "sum_time_total_s": sum_total, "sum_wall_s_of_runs": sum_wall,
        "ratio_wall_to_sum_time_total": wall / sum_total if sum_total else None,
        "overhead_s": wall - sum_total,
        "setup_from_metadata": meta.get("setup"), "warmup_from_metadata": meta.get("warmup"),
        "split_s": split, "split_sum_s": sum(v for v in split.values() if v is not None),
        "gap_mean_s": sum(gaps) / len(gaps) if gaps else None, "gap_max_s": max(gaps) if gaps else None,
        "kernel_in_results": meta.get("machine", {}), "git_commit_in_results": meta.get("git_commit"),
        "pass": wall <= TARGET_RATIO * sum_total if sum_total else False,
    }


def timed_run(argv: list[str], out: Path, log: Path) -> dict:
    t0 = time.time()
    with log.open("w") as f:
        rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, check=False).returncode
    t1 = time.time()
    if rc != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {rc}; log:\n{log.read_text()[-3000:]}")
    res = analyse(find_results(out), t0, t1)
    res["command"] = argv
    res["exit_status"] = rc
    return res


def part_in_guest(repetitions: int | None) -> dict:
    """Here: a kernel with netem (inside the UML guest, normally). --runtime host = this kernel."""
    out = Path(tempfile.mkdtemp(prefix="wearlab-bench-overhead-"))
    try:
        argv = [sys.executable, "-m", "wearlab", "run", str(EXPERIMENT), "--runtime", "host", "--out", str(out)]
        if repetitions:
            argv += ["--repetitions", str(repetitions)]
        res = timed_run(argv, out, out / "run.log")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"environment": environment(shaper="netem", experiment=str(EXPERIMENT.relative_to(ROOT))), **res}


def part_from_host(repetitions: int | None) -> dict:
    out = Path(tempfile.mkdtemp(prefix="wearlab-bench-overhead-host-"))
    try:
        argv = [str(ROOT / ".venv" / "bin" / "wearlab"), "run", str(EXPERIMENT), "--out", str(out)]
        if repetitions:
            argv += ["--repetitions", str(repetitions)]
        res = timed_run(argv, out, out / "run.log")
        meta = json.loads((Path(res["results_dir"]) / "metadata.json").read_text())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    env = environment(shaper="netem", experiment=str(EXPERIMENT.relative_to(ROOT)),
                      runtime_of_run=meta.get("machine", {}).get("runtime"),
                      kernel_of_run=meta.get("machine", {}).get("kernel"))
    return {"environment": env, **res}


def show(name: str, r: dict) -> None:
    print(f"\n{name}: wall {r['wall_s']:.1f} s for {r['runs']} runs ({r['runs_ok']} ok); "
          f"sum time_total {r['sum_time_total_s']:.1f} s; ratio {r['ratio_wall_to_sum_time_total']:.3f} "
          f"(target <= {TARGET_RATIO}): {'pass' if r['pass'] else 'MISS'}")
    rows = [[k, v, f"{100 * v / r['wall_s']:.1f}" if v is not None else None] for k, v in r["split_s"].items()]
    rows.append(["(sum of the split)", r["split_sum_s"], f"{100 * r['split_sum_s'] / r['wall_s']:.1f}"])
    print(table(["part of the wall time", "s", "%"], rows))
    print(f"setup per metadata: {r['setup_from_metadata'] and {k: v for k, v in r['setup_from_metadata'].items() if k != 'shaping_notes'}}; "
          f"mean gap between runs {r['gap_mean_s']:.3f} s (max {r['gap_max_s']:.3f} s)")


def save(section: str, data: dict, repetitions: int | None) -> Path:
    # Only the experiment as written (5 repetitions) is "the" result; other counts go elsewhere.
    name = "overhead" if repetitions is None else f"overhead-reps{repetitions}"
    path = RESULTS / f"{name}.json"
    doc = {}
    if path.exists():
        try:
            doc = json.loads(path.read_text())
        except ValueError:
            doc = {}
    doc["benchmark"] = "overhead"
    doc["target"] = f"wall <= {TARGET_RATIO} x sum(runs.csv time_total)"
    doc[section] = data
    return write_result(name, doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("guest", "host"),
                    help="only the in-guest part or only the host-launched part (default: what can run here)")
    ap.add_argument("--repetitions", type=int, help="override quickstart's repetitions (default: its own, 5)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    here_has_netem = probe.in_uml_guest() or probe.netem_works()
    rc = 0
    if a.only in (None, "guest"):
        if here_has_netem:
            r = part_in_guest(a.repetitions)
            show("quickstart inside the guest (--runtime host there)", r)
            print(f"wrote {save('in_guest', r, a.repetitions)}")
            rc |= verdict({f"in-guest wall <= {TARGET_RATIO} x sum(time_total)": r["pass"]})
        else:
            # Run this same script inside the guest for the in-guest part.
            argv = [str(ROOT / ".venv" / "bin" / "wearlab"), "runtime-exec", "--",
                    str(ROOT / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--only", "guest"]
            if a.repetitions:
                argv += ["--repetitions", str(a.repetitions)]
            rc |= subprocess.run(argv, cwd=ROOT, env=env_with_host_load(), check=False).returncode
    if a.only in (None, "host") and not probe.in_uml_guest():
        if here_has_netem:
            print("\nthis kernel has netem: `wearlab run` would not boot a guest; the host part equals the in-guest one")
        r = part_from_host(a.repetitions)
        show("quickstart launched from the host (`wearlab run`, boots the UML guest)", r)
        print(f"wrote {save('from_host', r, a.repetitions)}")
        rc |= verdict({f"host-launched wall <= {TARGET_RATIO} x sum(time_total)": r["pass"]})
    return rc


if __name__ == "__main__":
    sys.exit(main())
