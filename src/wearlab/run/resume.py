"""Resuming an interrupted results directory (`wearlab run EXP --resume DIR`).

A run is (cell, repetition), numbered by its place in the plan's schedule (`schedule`: repetitions
outermost, then groups, then cells), and its identity fixes its seeds (plan.seeds). So resuming
needs only the plan and what was finished: the plan made now must be the one in DIR/plan.json
(equal digests, else nothing runs and every difference is named), the rows with status `ok` and
their series rows are kept, every other (cell, repetition) runs again - with the seeds it would
have had in one run straight through. What a run straight through and an interrupted one resumed
leave differs only by measurement noise, timestamps, and the sessions listed in metadata.json.

Kept in place: runs.csv (the ok rows; sorted by run once the session ends), series/*.csv (the kept
runs' rows), the earlier sessions' captures (renamed `<name>.part<k>.pcap`: the new session's
capture would overwrite them), streams/, experiment.yaml and topology.yaml.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wearlab.errors import InputError, Problem
from wearlab.plan.plan import CellPlan, RunPlan, document_digest, run_order
from wearlab.report.live_record import live_runs


def schedule(plan: RunPlan) -> Iterator[tuple[int, int, CellPlan]]:
    """(run number, repetition, cell) of every run, in the order an uninterrupted run takes them."""
    return run_order(plan.groups(), plan.repetitions)


def check_plan(results: Path, p: RunPlan) -> None:
    """Refuse to resume `results` with a plan other than the one it was run with (exit 2, one line
    per difference)."""
    where = results / "plan.json"
    if (results / "control").is_dir() and live_runs(results):
        raise InputError([Problem(str(results), None, "--resume", "an experiment is running in it now; "
                                  "resume it once it has stopped (Ctrl-C or `wearlab clean` end it)")])
    if not where.is_file():
        raise InputError([Problem(str(results), None, "--resume", "is not a results directory (no plan.json): "
                                  "give the directory of the interrupted run, e.g. results/<experiment>/latest")])
    try:
        old = json.loads(where.read_text())
    except (OSError, ValueError) as e:
        raise InputError([Problem(str(where), None, None, f"unreadable: {e}")]) from e
    new = p.to_document()
    if document_digest(old) == p.digest():
        return
    if _same_file(old.get("file"), new.get("file")):   # one file, written another way
        old = {**old, "file": new.get("file")}
        if document_digest(old) == p.digest():
            return
    problems = [Problem(str(where), None, key, said) for key, said in _differences(old, new)]
    command = _previous(results).get("command")
    hint = f" (it was run as: {command})" if command else ""
    problems.append(Problem(str(where), None, None, "the plan made now is not the interrupted run's, so its runs "
                            f"would not be the same runs: resume with the same experiment and options{hint} and the "
                            "same wearlab, or start a new results directory (leave out --resume)"))
    raise InputError(problems)


def _same_file(a: Any, b: Any) -> bool:
    try:
        return isinstance(a, str) and isinstance(b, str) and os.path.samefile(a, b)
    except OSError:
        return False


def _differences(a: Any, b: Any, path: str = "", depth: int = 0) -> list[tuple[str, str]]:
    """(where, what) of every difference between two plan documents, named down to the second
    level (`columns.series: ["devicecpu"] now only`)."""
    if a == b:
        return []
    if isinstance(a, dict) and isinstance(b, dict) and depth < 2:
        return [d for k in sorted({*a, *b}, key=str) for d in _differences(a.get(k), b.get(k), f"{path}{k}.", depth + 1)]
    where = path.rstrip(".")
    if isinstance(a, list) and isinstance(b, list) and all(_scalar(x) for x in [*a, *b]):
        there, now = [x for x in a if x not in b], [x for x in b if x not in a]
        said = ", ".join(p for p in (f"{_short(there)} there only" if there else "",
                                     f"{_short(now)} now only" if now else "") if p)
        return [(where, said or "the same values in another order")]
    if _scalar(a) and _scalar(b):
        return [(where, f"{_short(a)} there, {_short(b)} now")]
    return [(where, "differs")]


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _short(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _previous(results: Path) -> dict[str, Any]:
    try:
        return json.loads((results / "metadata.json").read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class Kept:
    """What an earlier session finished: its ok rows (as runs.csv holds them), their run numbers,
    and the sessions before this one (for metadata.json)."""

    rows: list[dict[str, str]] = field(default_factory=list)
    runs: set[int] = field(default_factory=set)
    sessions: list[dict[str, Any]] = field(default_factory=list)


def keep_finished(out_dir: Path, p: RunPlan) -> Kept:
    """Keep the finished runs of `out_dir` (checked by check_plan) and drop the rest from its
    files, before a new session appends to them."""
    expected = {n: rep for n, rep, _ in schedule(p)}
    kept = Kept()
    runs = out_dir / "runs.csv"
    if runs.is_file():
        for row in _read(runs):
            try:
                n = int(row["run"])
            except (KeyError, ValueError):
                continue
            if row.get("status") == "ok" and expected.get(n) == int(row.get("repetition") or -1) and n not in kept.runs:
                kept.rows.append(row)
                kept.runs.add(n)
    for f in sorted((out_dir / "series").glob("*.csv")):
        _filter(f, kept.runs)
    prev = _previous(out_dir)
    kept.sessions = [*prev.get("sessions", []),
                     {k: prev.get(k) for k in ("run_id", "started_utc", "finished_utc", "status", "command",
                                               "plan_sha256")} | {"runs_kept": len(kept.runs)}] if prev else []
    part = len(kept.sessions)
    for pcap in sorted((out_dir / "captures").glob("*.pcap")):
        if ".part" not in pcap.name:
            pcap.rename(pcap.with_name(f"{pcap.stem}.part{part}.pcap"))
    return kept


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _filter(path: Path, runs: set[int]) -> None:
    """Keep only the rows of `runs` in a series file (atomically)."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or "run" not in header:
            return
        i = header.index("run")
        rows = [r for r in reader if len(r) > i and r[i].isdigit() and int(r[i]) in runs]
    _rewrite(path, header, rows)


def sort_runs(path: Path) -> None:
    """runs.csv in run order (a resumed session appended its runs after the kept ones)."""
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return
        rows = list(reader)
    i = header.index("run")
    rows.sort(key=lambda r: int(r[i]) if len(r) > i and r[i].isdigit() else 0)
    _rewrite(path, header, rows)


def _rewrite(path: Path, header: list[str], rows: list[list[str]]) -> None:
    """Replace a CSV file whole (written beside it, synced, then renamed: a crash leaves the old
    file or the new one, never half of either)."""
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
