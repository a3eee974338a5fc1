"""`wearlab merge OUT SHARD_DIR...`: one results directory from the shards of one plan.

Each shard (`wearlab run EXP --shard I/N`, run.shard) wrote the whole plan and its own runs. The
merge checks that every shard ran the same plan (equal plan digests: the same experiment, options
and wearlab), that no run is there twice, and that every run's seed is the one its identity gives
(plan.seeds: experiment, cell, repetition, seed) - so a merged directory holds the runs one machine
running straight through would have run, with their seeds. Then it writes what `report`, `check`,
`compare` and `plot` read, as a single run writes it: plan.json, experiment.yaml, topology.yaml,
runs.csv (every run, in run order), series/*.csv (every run's rows), summary.json and the claims,
and metadata.json with every shard's machine, kernel, runtime, commit, status and runs. What only
a shard has (its captures, streams, its own metadata.json) is kept under shards/<I-of-N>/.

Missing runs are named (printed, and in metadata.json `merge.missing_runs`) and the exit status is
1; shards of different plans, or a run in two shards, are bad input (exit 2) and nothing is written.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.errors import InputError, Problem
from wearlab.measure import fidelity
from wearlab.model.columns import Ratio
from wearlab.plan.plan import document_digest, run_order
from wearlab.plan.seeds import RunSeeds
from wearlab.report import check, machine_trust, results
from wearlab.report.summary import ratios, summarize, to_document

WHERE = "wearlab merge"
# A shard's own files, merged file by file; everything else it holds is kept under shards/.
MERGED = {"plan.json", "metadata.json", "runs.csv", "series", "summary.json", results.CLAIMS_FILE,
          "experiment.yaml", "topology.yaml", "control"}


@dataclass
class ShardDir:
    path: Path
    plan: dict[str, Any]
    metadata: dict[str, Any]
    rows: list[dict[str, str]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return machine_trust.shard_label(self.metadata.get("shard"), self.path.name)


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def _load(path: Path) -> ShardDir:
    d = path / "latest" if (path / "latest").is_dir() and not (path / "plan.json").exists() else path
    for name in ("plan.json", "metadata.json", "runs.csv"):
        if not (d / name).is_file():
            raise InputError([Problem(str(d), None, name, "missing: give the results directories the shards wrote "
                                      "(each `wearlab run ... --shard I/N` prints its own)")])
    try:
        plan = json.loads((d / "plan.json").read_text())
        meta = json.loads((d / "metadata.json").read_text())
    except (OSError, ValueError) as e:
        raise InputError([Problem(str(d), None, None, f"unreadable: {e}")]) from e
    header, rows = _read_csv(d / "runs.csv")
    return ShardDir(d.resolve(), plan, meta, rows, header)


def _check(shards: Sequence[ShardDir]) -> None:
    problems: list[Problem] = []
    first = shards[0]
    digest = document_digest(first.plan)
    for s in shards[1:]:
        if document_digest(s.plan) != digest:
            problems.append(Problem(str(s.path / "plan.json"), None, None,
                                    f"is not the plan of {first.path} (another experiment, other options or another "
                                    "wearlab): only shards of one plan merge"))
        if s.path == first.path or s.path in [t.path for t in shards[:shards.index(s)]]:
            problems.append(Problem(str(s.path), None, None, "given twice"))
    if problems:
        raise InputError(problems)
    owner: dict[int, ShardDir] = {}
    runs = _runs_of(first.plan)
    for s in shards:
        for row in s.rows:
            if row.get("status") != "ok":
                continue   # a failed run counts as not run: a resubmitted shard runs it again
            n = int(row["run"])
            if n in owner:
                problems.append(Problem(str(s.path / "runs.csv"), None, f"run {n}",
                                        f"is in {owner[n].path} too: a run belongs to one shard (two shards with "
                                        "the same I/N, or a results directory given twice?)"))
                continue
            owner[n] = s
            if n not in runs:
                problems.append(Problem(str(s.path / "runs.csv"), None, f"run {n}",
                                        f"is not a run of the plan ({len(runs)} runs)"))
                continue
            rep, cell = runs[n]
            if str(rep) != row.get("repetition"):
                problems.append(Problem(str(s.path / "runs.csv"), None, f"run {n}",
                                        f"is repetition {row.get('repetition')}, the plan's run {n} is repetition {rep}"))
            elif row.get("run_seed"):
                want = RunSeeds.of(first.plan["experiment"], cell["values"], rep, int(first.plan["seed"])).run
                if str(want) != row["run_seed"]:
                    problems.append(Problem(str(s.path / "runs.csv"), None, f"run {n}",
                                            f"ran with seed {row['run_seed']}, not its identity's {want}"))
    if problems:
        raise InputError(problems)


def _runs_of(plan: dict[str, Any]) -> dict[int, tuple[int, dict[str, Any]]]:
    """run number -> (repetition, cell document), counted as the runner counts (plan.run_order)."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for c in plan.get("cells") or []:
        groups.setdefault(c.get("group"), []).append(c)
    return {n: (rep, cell) for n, rep, cell in run_order(groups.values(), int(plan.get("repetitions") or 1))}


def merge(out: Path, dirs: Sequence[Path], console: Console) -> int:
    if not dirs:
        raise InputError([Problem(WHERE, None, "SHARD_DIR", "give the results directories of the shards")])
    shards = [_load(Path(d)) for d in dirs]
    _check(shards)
    if out.exists() and any(out.iterdir()):
        raise InputError([Problem(str(out), None, "OUT", "exists and is not empty: merge into a new directory")])
    first = shards[0]
    total = int(first.plan.get("runs") or 0)
    ok = {int(r["run"]): r for s in shards for r in s.rows if r.get("status") == "ok"}
    failed = {int(r["run"]): r for s in shards for r in s.rows if r.get("status") != "ok" and int(r["run"]) not in ok}
    rows = [ok.get(n) or failed[n] for n in sorted({*ok, *failed})]
    missing = [n for n in range(1, total + 1) if n not in ok]

    out.mkdir(parents=True, exist_ok=True)
    for name in ("plan.json", "experiment.yaml", "topology.yaml"):
        if (first.path / name).is_file():
            shutil.copy2(first.path / name, out / name)
    header = first.header
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    kept = {int(r["run"]) for r in rows}
    _merge_series(out / "series", [s.path / "series" for s in shards], kept)
    for s in shards:
        extra = [p for p in s.path.iterdir() if p.name not in MERGED]
        if extra or (s.path / "metadata.json").is_file():
            dst = out / "shards" / s.label
            dst.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s.path / "metadata.json", dst / "metadata.json")
            for p in extra:
                _link_tree(p, dst / p.name)
    # A shard's own facts stay in `shards` (its probe judged its node, not the merge's).
    meta = {k: v for k, v in first.metadata.items() if k not in {"shard", "run_id", "started_utc", "finished_utc",
                                                                   "status", "sessions", "resumed", "fidelity"}}
    meta["shards"] = [{"dir": str(s.path), "shard": s.metadata.get("shard"), "run_id": s.metadata.get("run_id"),
                       "status": s.metadata.get("status"), "started_utc": s.metadata.get("started_utc"),
                       "finished_utc": s.metadata.get("finished_utc"), "command": s.metadata.get("command"),
                       "git_commit": s.metadata.get("git_commit"), "machine": s.metadata.get("machine"),
                       "runs_ok": sorted(int(r["run"]) for r in s.rows if r.get("status") == "ok"),
                       "fidelity": s.metadata.get("fidelity"), "trust": fidelity.trust(s.metadata)}
                      for s in shards]
    noisy = [s.label for s in shards if fidelity.trust(s.metadata) == "noisy"]
    unprobed = [s.label for s in shards if fidelity.trust(s.metadata) == "not probed"]
    meta["merge"] = {"merged_utc": datetime.now(timezone.utc).isoformat(), "runs": total, "runs_ok": len(ok),
                     "missing_runs": missing, "from": [str(s.path) for s in shards],
                     "noisy_shards": noisy, "unprobed_shards": unprobed}
    meta["status"] = "complete" if not missing else f"incomplete: {len(missing)} of {total} runs missing"
    results.write_json(out / "metadata.json", meta)
    # After the metadata: each claim names the noisy shards its runs came from (report.check).
    _write_summary(out, first.plan, first.metadata.get("columns") or {}, [r for r in rows if r.get("status") == "ok"],
                   meta)
    machines = sorted({(s.metadata.get("machine") or {}).get("kernel", "?") for s in shards})
    console.print(f"merged {len(shards)} shards of {first.plan.get('experiment')}: {len(ok)} of {total} runs ok "
                  f"(kernels: {'; '.join(machines)}) into {out}")
    for s in shards:
        if fidelity.trust(s.metadata) != "trusted":
            console.print(f"[yellow]shard {s.label} ({s.path}): {fidelity.describe(s.metadata)}[/yellow]")
    if noisy:
        console.print(f"[yellow]noisy shards: {', '.join(noisy)} - their node's link physics were outside the "
                      f"probe's bound ({fidelity.RULE}); their runs are merged but their timings are suspect[/yellow]")
    if missing:
        console.print(f"[red]missing runs: {_ranges(missing)} - run the shard(s) holding them again "
                      "(`wearlab run ... --shard I/N --resume DIR` runs only what is missing)[/red]")
        return 1
    return 0


def _merge_series(out: Path, dirs: Sequence[Path], runs: set[int]) -> None:
    """series/<name>.csv: every shard's rows of the kept runs, in run order (a run's own rows in the
    order its shard wrote them)."""
    names = sorted({p.name for d in dirs if d.is_dir() for p in d.glob("*.csv")})
    if not names:
        return
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        header: list[str] | None = None
        rows: list[list[str]] = []
        for d in dirs:
            if not (d / name).is_file():
                continue
            with (d / name).open(newline="") as f:
                reader = csv.reader(f)
                h = next(reader, None)
                if h is None:
                    continue
                header = header or h
                if h != header:
                    raise InputError([Problem(str(d / name), 1, None, "its columns are not the other shards'")])
                i = h.index("run") if "run" in h else None
                rows += [r for r in reader if i is None or (len(r) > i and r[i].isdigit() and int(r[i]) in runs)]
        if header is None:
            continue
        if "run" in header:
            i = header.index("run")
            rows.sort(key=lambda r: int(r[i]))
        with (out / name).open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)


def _write_summary(out: Path, plan: dict[str, Any], columns: dict[str, Any], rows: list[dict[str, str]],
                   meta: dict[str, Any]) -> None:
    """summary.json and the claims, from the plan document and the metadata's columns - what the
    runner writes from its RunPlan."""
    params = list(columns.get("params") or plan.get("columns", {}).get("params") or [])
    metrics = columns.get("metrics") or {}
    declared = tuple(Ratio(**{**r, "metrics": tuple(r.get("metrics") or ()), "ignoring": tuple(r.get("ignoring") or ())})
                     for r in plan.get("ratios") or [])
    wanted = {m for m, d in metrics.items() if isinstance(d, dict) and d.get("summarised")}
    wanted |= {m for r in declared for m in r.metrics}
    cells = summarize(rows, params, [m for m in metrics if m in wanted])
    results.write_json(out / "summary.json", to_document(cells, ratios(cells, declared)))
    if plan.get("claims"):
        check.write_claims(out, check.evaluate(plan, rows, meta))


def _link_tree(src: Path, dst: Path) -> None:
    """Copy by hard link where the file system allows (captures are large), else copy."""
    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    if src.is_dir():
        shutil.copytree(src, dst, copy_function=link, symlinks=True)
    elif src.is_file():
        link(str(src), str(dst))


def _ranges(ns: list[int]) -> str:
    out, start, prev = [], None, None
    for n in ns:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)
