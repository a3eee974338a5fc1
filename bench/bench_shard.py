"""Sharding on one box: a 16-run sweep run straight through, then as 4 shards merged (issue 24).

On the host:  .venv/bin/python bench/bench_shard.py [--shards 4] [--side-by-side 2] [--keep DIR]
              .venv/bin/python bench/bench_shard.py --reuse DIR   (analyse the runs a --keep left)

The sweep is bench/experiments/shard-bench.yaml: 2 protocols x 2 sizes x 4 repetitions of one
GET through a 2 Mbit/s netem link, 10.5-12 s each, so a run's time is the link's timers, not the
CPU's. It runs

1. unsharded: `wearlab run EXP` (one guest, all 16 runs);
2. sharded: `wearlab run EXP --shard I/4` for I = 1..4, at most 2 side by side (this box has 2
   cores; each guest is pinned to a core of its own, WEARLAB_GUEST_CPU, as two Slurm tasks on one
   node must not share a core), then `wearlab merge` of the four. Its wall time runs from the
   first shard's start to the merge's end.

Targets (exit status 1 when one is missed):
- wall: sharded + merge <= unsharded x 1.10. Two guests side by side overlap runs that wait on
  link timers, so 4 shards of 4 runs take about half the runs' time, plus 4 boots and set-ups
  instead of one: the 10 % is what sharding may cost where it cannot gain.
- same runs: the merged runs.csv has every run of the unsharded one, run for run the same
  repetition, cell, run_seed and every seed of series/seeds.csv (a run's seeds are its
  identity's, never its shard's).
- same values: each run's time_total differs from the unsharded run's by no more than its
  cell's own spread in the unsharded set (max - min of the 4 repetitions), or 80 ms (two round
  trips of the link: the smallest spread a TCP transfer's timing can show) where that is larger.
- same verdicts: `wearlab check --json` of both give every claim the same verdict wherever
  neither is inconclusive.
Results: bench/results/shard.json.
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
import threading
import time
from pathlib import Path

from common import BENCH, ROOT, environment, table, verdict, write_result

EXPERIMENT = BENCH / "experiments" / "shard-bench.yaml"
NAME = "shard-bench"
WEARLAB = str(ROOT / ".venv" / "bin" / "wearlab")
WALL_MARGIN = 1.10
SPREAD_FLOOR_S = 0.080   # 2 x the link's 40 ms round trip
CPUS = 2


def run_logged(argv: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[int, float]:
    t0 = time.monotonic()
    with log.open("w") as f:
        rc = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, check=False).returncode
    return rc, time.monotonic() - t0


def unsharded(work: Path) -> dict:
    out = work / "unsharded"
    rc, wall = run_logged([WEARLAB, "run", str(EXPERIMENT), "--out", str(out)], work / "unsharded.log")
    return {"exit_status": rc, "wall_s": wall, "results": str(out / NAME / "latest")}


def sharded(work: Path, shards: int, side_by_side: int) -> dict:
    """Shards 1..N on `side_by_side` slots, slot k's guests pinned to CPU k; then the merge."""
    queue = list(range(1, shards + 1))
    lock = threading.Lock()
    done: dict[int, dict] = {}

    def slot(k: int) -> None:
        env = {**os.environ, "WEARLAB_GUEST_CPU": str(k % CPUS)}
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            t0 = time.monotonic() - start
            rc, wall = run_logged([WEARLAB, "run", str(EXPERIMENT), "--shard", f"{i}/{shards}",
                                   "--out", str(work / f"shard-{i}")], work / f"shard-{i}.log", env)
            done[i] = {"exit_status": rc, "wall_s": wall, "started_s": t0, "slot": k, "guest_cpu": k % CPUS}

    start = time.monotonic()
    threads = [threading.Thread(target=slot, args=(k,)) for k in range(side_by_side)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shards_wall = time.monotonic() - start
    merged = work / "merged"
    rc, merge_wall = run_logged([WEARLAB, "merge", str(merged), *(str(work / f"shard-{i}" / NAME)
                                                                   for i in range(1, shards + 1))],
                                work / "merge.log")
    return {"shards": [done[i] for i in sorted(done)], "shards_wall_s": shards_wall, "merge_wall_s": merge_wall,
            "merge_exit_status": rc, "wall_s": time.monotonic() - start, "results": str(merged),
            "side_by_side": side_by_side}


def rows(d: Path, name: str) -> list[dict[str, str]]:
    with (d / name).open(newline="") as f:
        return list(csv.DictReader(f))


def compare_runs(one: Path, merged: Path) -> dict:
    """Run for run: identity and seeds equal, time_total within its cell's spread."""
    a = {r["run"]: r for r in rows(one, "runs.csv")}
    b = {r["run"]: r for r in rows(merged, "runs.csv")}
    sa = {(r["run"], r["what"], r["target"]): r["seed"] for r in rows(one, "series/seeds.csv")}
    sb = {(r["run"], r["what"], r["target"]): r["seed"] for r in rows(merged, "series/seeds.csv")}
    plan = json.loads((one / "plan.json").read_text())
    header = set(next(iter(a.values())).keys()) if a else set()
    keys = [k for k in ("cell", *plan["cells"][0]["values"]) if k in header]
    cell = lambda r: tuple(r.get(k, "") for k in keys)  # noqa: E731
    problems = [f"run {n}: missing from the merge" for n in a if n not in b]
    problems += [f"run {n}: in the merge only" for n in b if n not in a]
    by_cell: dict[tuple, list[float]] = {}
    for r in a.values():
        if r["status"] == "ok":
            by_cell.setdefault(cell(r), []).append(float(r["time_total"]))
    per_run = []
    for n in sorted(set(a) & set(b), key=int):
        x, y = a[n], b[n]
        for col in ("repetition", "run_seed", "status", *keys):
            if x.get(col) != y.get(col):
                problems.append(f"run {n}: {col} {x.get(col)!r} unsharded, {y.get(col)!r} merged")
        if x["status"] != "ok" or y["status"] != "ok":
            continue
        reps = by_cell[cell(x)]
        tol = max(max(reps) - min(reps), SPREAD_FLOOR_S)
        d = float(y["time_total"]) - float(x["time_total"])
        per_run.append({"run": int(n), "cell": dict(zip(keys, cell(x))), "repetition": int(x["repetition"]),
                        "run_seed": x["run_seed"], "unsharded_s": float(x["time_total"]),
                        "merged_s": float(y["time_total"]), "diff_s": d, "tolerance_s": tol, "pass": abs(d) <= tol})
        if abs(d) > tol:
            problems.append(f"run {n}: time_total {y['time_total']} s merged vs {x['time_total']} s unsharded "
                            f"(differ by {d:+.3f} s, its cell's spread {tol:.3f} s)")
    seed_diff = sorted({k for k in set(sa) | set(sb) if sa.get(k) != sb.get(k)})
    problems += [f"run {k[0]}: seed of {k[1]} {k[2]}: {sa.get(k)} unsharded, {sb.get(k)} merged" for k in seed_diff]
    return {"runs_unsharded": len(a), "runs_merged": len(b), "seeds_compared": len(sa), "per_run": per_run,
            "problems": problems, "same_runs_and_seeds": not any("time_total" not in p for p in problems),
            "values_within_spread": all(r["pass"] for r in per_run) and len(per_run) == len(a)}


def check(d: Path) -> dict[str, dict]:
    r = subprocess.run([WEARLAB, "check", str(d), "--json"], capture_output=True, text=True, cwd=ROOT, check=False)
    if r.returncode == 2:
        raise RuntimeError(f"wearlab check {d}: {r.stderr}")
    return {c["id"]: c for d in json.loads(r.stdout) for c in d["claims"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--side-by-side", type=int, default=2, help="shards at once (default 2: this box's cores)")
    ap.add_argument("--keep", type=Path, help="run in this (new) directory and keep it")
    ap.add_argument("--reuse", type=Path, help="analyse a directory a --keep left (no runs)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (the UML guest's host side, as `wearlab run` does)")
    work = a.reuse or a.keep or Path(tempfile.mkdtemp(prefix="wearlab-bench-shard-", dir="/var/tmp"))
    doc: dict = {"benchmark": "shard", "environment": environment(experiment=str(EXPERIMENT.relative_to(ROOT)))}
    try:
        if a.reuse:
            prior = json.loads((work / "timings.json").read_text())
            one, many = prior["unsharded"], prior["sharded"]
        else:
            work.mkdir(parents=True, exist_ok=True)
            one = unsharded(work)
            many = sharded(work, a.shards, a.side_by_side)
            (work / "timings.json").write_text(json.dumps({"unsharded": one, "sharded": many}, indent=2))
        doc["unsharded"], doc["sharded"] = one, many
        if one["exit_status"] not in (0, 1) or many["merge_exit_status"] != 0:
            print(f"a run or the merge failed; logs in {work}")
            doc["comparison"] = None
            write_result("shard", doc)
            return 1
        one_dir, merged_dir = Path(one["results"]).resolve(), Path(many["results"])
        cmp_ = compare_runs(one_dir, merged_dir)
        va, vb = check(one_dir), check(merged_dir)
        verdicts = [{"id": k, "unsharded": va[k]["verdict"], "merged": vb.get(k, {}).get("verdict"),
                     "unsharded_ours": va[k].get("ours"), "merged_ours": vb.get(k, {}).get("ours")} for k in va]
        disagree = [v for v in verdicts if "inconclusive" not in (v["unsharded"], v["merged"])
                    and v["unsharded"] != v["merged"]]
        doc["comparison"] = {**cmp_, "verdicts": verdicts, "verdicts_disagreeing": disagree}
    finally:
        if not (a.keep or a.reuse):
            shutil.rmtree(work, ignore_errors=True)

    print(table(["", "wall s"], [["unsharded (1 guest, 16 runs)", one["wall_s"]],
                                 [f"sharded {a.shards} ways, {many['side_by_side']} side by side", many["shards_wall_s"]],
                                 ["merge", many["merge_wall_s"]],
                                 ["sharded + merge", many["wall_s"]],
                                 ["ratio to unsharded", many["wall_s"] / one["wall_s"]]],
                title="\nWall time"))
    print(table(["shard", "slot", "cpu", "start s", "wall s", "exit"],
                [[i + 1, s["slot"], s["guest_cpu"], s["started_s"], s["wall_s"], s["exit_status"]]
                 for i, s in enumerate(many["shards"])], title="\nShards"))
    print(table(["run", "cell", "rep", "run_seed", "unsharded s", "merged s", "diff s", "tol s"],
                [[r["run"], " ".join(map(str, r["cell"].values())), r["repetition"], r["run_seed"], r["unsharded_s"],
                  r["merged_s"], r["diff_s"], r["tolerance_s"]] for r in cmp_["per_run"]],
                title="\nRun for run (time_total)"))
    print(table(["claim", "unsharded", "merged"], [[v["id"], v["unsharded"], v["merged"]] for v in verdicts],
                title="\nwearlab check"))
    for p in cmp_["problems"]:
        print(f"  ! {p}")
    checks = {
        f"sharded + merge <= {WALL_MARGIN:.2f} x unsharded wall": many["wall_s"] <= WALL_MARGIN * one["wall_s"],
        "merged runs = unsharded runs (run, repetition, cell, run_seed, seeds)": cmp_["same_runs_and_seeds"],
        "time_total run for run within its cell's spread": cmp_["values_within_spread"],
        "check verdicts agree where neither is inconclusive": not disagree,
    }
    doc["targets"] = checks
    path = write_result("shard", doc)
    print(f"\nwritten: {path}")
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
