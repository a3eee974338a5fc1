"""`wearlab reproduce` (`make reproduce`): run a suite of experiments - experiments/seeds/ by
default - to the end, resumably, then `wearlab check` and `wearlab report` on the results.

1. Every experiment file of the suite (a YAML file with a `workload:`; `--only` narrows them) is
   loaded and planned as `wearlab run` would, in its tier: the default is the file as written;
   `--full` applies its `full:` (`repetitions`, and `set:` as `--set KEY=VALUE`: the papers' own
   tier); `--repetitions N` overrides both. Bad input in any file stops the suite before it starts.
2. The estimate (run.estimate) of what is left to run is printed first, with its constants, and
   the full tier's too.
3. Each experiment runs as its own `wearlab run` (its output in <out>/<experiment>/reproduce.log)
   while one progress bar shows the suite: done, elapsed, time left (the estimate, corrected by
   how fast the runs go). What an earlier `wearlab reproduce` left is used: a results directory of
   the same plan (run.resume's digest) that is complete is kept as it is, an unfinished one is
   resumed (`wearlab run --resume`); another plan starts a new directory.
4. Ctrl-C stops the experiment running (its finished runs are kept) and the suite: run the same
   command again to continue. At the end: each experiment's time beside its estimate
   (<out>/reproduce.json), then `wearlab check` and `wearlab report` on the suite's results where
   this wearlab has them.

Exit status: 0; 1 when a run failed or `wearlab check` found a claim not reproduced; 2 bad input;
130 interrupted.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text
from rich.table import Table

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.declarations import Catalog
from wearlab.model.experiment_file import load_experiment
from wearlab.model.yamlsrc import load_yaml
from wearlab.plan.plan import RunPlan, document_digest, plan
from wearlab.run.estimate import Estimate, estimate, format_s
from wearlab.run.resume import schedule
from wearlab.run.start import RunOptions, overrides_of
from wearlab.runtime import placement, signals

DEFAULT_SUITE = Path("experiments/seeds")
DEFAULT_OUT = Path("results/seeds")
POLL_S = 0.5
WHERE = "<command line>"


@dataclass
class Item:
    """One experiment of the suite, planned in its tier."""

    file: Path
    options: RunOptions
    plan: RunPlan
    estimate: Estimate
    full: Estimate | None = None               # the full tier's (for the closing note)
    state: str = "new"                         # new | resume | complete
    results: Path | None = None                # the results directory to resume or keep
    done: set[int] = field(default_factory=set)   # run numbers finished there (ok)

    @property
    def name(self) -> str:
        return self.plan.name

    def left_s(self) -> float:
        """What is left of it: nothing when complete, else its set-up and the runs not done."""
        if self.state == "complete":
            return 0.0
        e = self.estimate
        runs = sum(e.run_s(cell.index) for n, _, cell in schedule(self.plan) if n not in self.done)
        return e.constants.set_up_s + e.restarts * e.constants.restart_s + runs

    def runs_left(self) -> int:
        return 0 if self.state == "complete" else self.estimate.runs - len(self.done)


def suite_files(paths: list[Path]) -> list[Path]:
    """The experiment files among `paths` (directories: their *.yaml): files with a `workload:`."""
    out: list[Path] = []
    for p in paths:
        files = sorted(p.glob("*.yaml")) if p.is_dir() else [p]
        for f in files:
            if f.is_dir():
                continue
            try:
                data = load_yaml(f).data
            except InputError:
                out.append(f)              # loading it again reports the problem
                continue
            if isinstance(data, dict) and "workload" in data:
                out.append(f)
    return out


def selected(name: str, file: Path, only: list[str]) -> bool:
    """`--only`: comma-separated patterns (shell wildcards, or a part of the name) against the
    experiment's name and its file's name."""
    if not only:
        return True
    for pat in only:
        for text in (name, file.stem, file.name):
            if fnmatch.fnmatch(text, pat) if any(c in pat for c in "*?[") else pat in text:
                return True
    return False


def tier_options(file: Path, catalog: Catalog, *, full: bool, repetitions: int | None, out: Path,
                 runtime: str | None) -> RunOptions:
    """The `wearlab run` options of a file's tier (module doc, 1)."""
    exp = load_experiment(file, catalog)
    reps, sets = None, []
    if full and exp.full is not None:
        reps = exp.full.repetitions
        sets = [f"{k}={v}" for k, v in exp.full.set.items()]
    if repetitions is not None:
        reps = repetitions
    return RunOptions(experiment=file, runtime=runtime, repetitions=reps, out=out, overrides=sets)


def prepare(paths: list[Path], catalog: Catalog, *, only: list[str], full: bool, repetitions: int | None,
            out: Path, runtime: str | None, fresh: bool = False) -> list[Item]:
    files = suite_files(paths)
    if not files:
        raise InputError([Problem(WHERE, None, "suite", f"no experiment files in {', '.join(map(str, paths))}")])
    problems: list[Problem] = []
    items: list[Item] = []
    chosen: str | None = None
    for f in files:
        try:
            opts = tier_options(f, catalog, full=full, repetitions=repetitions, out=out, runtime=runtime)
            exp = opts.load(catalog)
            if not selected(exp.name, f, only):
                continue
            p = plan(exp, opts.shaper)
            if chosen is None:
                chosen = placement.choose(p.runtime)[0]
            p = p.placed(chosen)
            full_est = None
            if not full:
                fo = tier_options(f, catalog, full=True, repetitions=None, out=out, runtime=runtime)
                full_est = estimate(plan(fo.load(catalog), fo.shaper).placed(chosen))
            items.append(Item(f, opts, p, estimate(p), full_est))
        except InputError as e:
            problems += e.problems
    if problems:
        raise InputError(problems)
    if not items:
        raise InputError([Problem(WHERE, None, "--only", f"no experiment of the suite matches {','.join(only)}")])
    names = [i.name for i in items]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError([Problem(WHERE, None, "suite", f"two files name the experiment {n}") for n in twice])
    for item in items:
        if not fresh:
            find_earlier(item, out)
    return items


def find_earlier(item: Item, out: Path) -> None:
    """What an earlier `wearlab reproduce` left of this experiment under `out` (module doc, 3)."""
    latest = out / item.name / "latest"
    try:
        d = latest.resolve(strict=True)
        doc = json.loads((d / "plan.json").read_text())
    except (OSError, ValueError):
        return
    if document_digest(doc) != item.plan.digest():
        return
    expected = {n: rep for n, rep, _ in schedule(item.plan)}
    done: set[int] = set()
    try:
        import csv

        with (d / "runs.csv").open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row.get("status") == "ok" and row.get("run", "").isdigit() and \
                        expected.get(int(row["run"])) == int(row.get("repetition") or -1):
                    done.add(int(row["run"]))
    except OSError:
        pass
    item.results, item.done = d, done
    item.state = "complete" if len(done) == len(expected) else "resume"


def print_estimate(console: Console, items: list[Item], *, full: bool) -> float:
    """The estimate of what is left, per experiment and whole, with its constants. Returns it (s)."""
    t = Table(title="estimate: runs to run" + (" (FULL=1: the papers' own repetitions)" if full else ""),
              title_justify="left")
    for col in ("experiment", "cells", "reps", "runs", "estimate", "state"):
        t.add_column(col, justify="right" if col in ("cells", "reps", "runs", "estimate") else "left",
                     no_wrap=True)
    total = 0.0
    for i in items:
        left = i.left_s()
        total += left
        state = {"new": "to run", "resume": "resume", "complete": "complete"}[i.state]
        t.add_row(i.name, str(len(i.plan.cells)), str(i.plan.repetitions), str(i.runs_left()), format_s(left), state)
    console.print(t)
    for i in items:
        if i.results is not None:
            kept = f" ({len(i.done)} of {i.estimate.runs} runs kept)" if i.state == "resume" else ""
            console.print(f"{i.name}: {i.state}{kept}: {i.results}", highlight=False)
    runs = sum(i.runs_left() for i in items)
    console.print(f"estimate: {runs} runs, {format_s(total)} (runtime {items[0].estimate.runtime.value}; "
                  f"{items[0].estimate.constants.describe()})")
    if not full and any(i.full is not None for i in items):
        f = sum(i.full.total_s for i in items if i.full is not None)
        n = sum(i.full.runs for i in items if i.full is not None)
        console.print(f"the papers' own repetitions (FULL=1): {n} runs, {format_s(f)}")
    return total


def reproduce(paths: list[Path], catalog: Catalog, console: Console, *, only: list[str], full: bool,
              repetitions: int | None, out: Path, runtime: str | None, estimate_only: bool = False,
              fresh: bool = False, builds: bool = False, slurm: bool = False, tasks: int | None = None) -> int:
    items = prepare(paths, catalog, only=only, full=full, repetitions=repetitions, out=out, runtime=runtime,
                    fresh=fresh)
    if builds:
        for b in sorted({b for i in items for b in i.plan.builds()}):
            console.print(b)
        return 0
    total = print_estimate(console, items, full=full)
    if estimate_only:
        return 0
    if slurm:
        return submit_suite(items, out, console, tasks=tasks)
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"started_utc": _utc(), "estimate_s": round(total, 1), "full": full,
                              "repetitions": repetitions, "constants": vars(items[0].estimate.constants),
                              "experiments": []}
    status, interrupted = 0, False
    with signals.interruptible(), _Bar(console, total) as bar:
        for item in items:
            if item.state == "complete":
                record["experiments"].append({"experiment": item.name, "state": "complete", "results": str(item.results)})
                continue
            rc, took, results = _run_one(item, out, bar)
            done = _ok_runs(results)
            entry = {"experiment": item.name, "file": str(item.file), "results": str(results) if results else None,
                     "estimate_s": round(item.left_s(), 1), "took_s": round(took, 1), "exit": rc,
                     "runs": item.estimate.runs, "runs_ok": done}
            record["experiments"].append(entry)
            _write_record(out, record)
            ratio = f"{took / entry['estimate_s']:.2f}x the estimate" if entry["estimate_s"] else ""
            bar.say(f"{item.name}: {done}/{item.estimate.runs} runs ok in {format_s(took)} "
                    f"(estimate {format_s(entry['estimate_s'])}, {ratio}); exit {rc}; {results}")
            if rc == 130:
                interrupted = True
                break
            if rc != 0 or done < item.estimate.runs:
                status = 1
    record["finished_utc"] = _utc()
    took = [e for e in record["experiments"] if "took_s" in e and e["exit"] in (0, 1)]
    if took:
        actual = sum(e["took_s"] for e in took)
        planned = sum(e["estimate_s"] for e in took)
        record["took_s"] = round(actual, 1)
        console.print(f"took {format_s(actual)} for what was estimated at {format_s(planned)}"
                      + (f" ({(actual - planned) / planned:+.0%})" if planned else ""))
    _write_record(out, record)
    if interrupted:
        console.print("[yellow]interrupted: the finished runs are kept; run the same command again "
                      "(`make reproduce`) to continue[/yellow]")
        return 130
    dirs = [Path(e["results"]) for e in record["experiments"]
            if e.get("results") and (Path(e["results"]) / "plan.json").is_file()]
    status = max(status, _after(console, "check", dirs, []))
    _after(console, "report", dirs, ["--out", str(out / "report")])
    return status


def submit_suite(items: list[Item], out: Path, console: Console, *, tasks: int | None) -> int:
    """`reproduce --slurm` (`make reproduce SLURM=1`): each experiment not yet complete as its own
    job array and merge (run.submit), then one job after all the merges: `wearlab check` and
    `wearlab report` on the merged results (and on the complete ones found here). One script
    submits them all, <out>/submit.sh (each experiment's submit.sh, then the check job after every
    merge): the script a user reads is the one that runs, from a checkout now, from the bundle by
    its launcher on the host once the guest has stopped (the guest cannot reach Slurm). Returns
    once submitted (or handed over); <out>/slurm-suite.json lists the jobs, `wearlab status DIR`
    follows each."""
    from wearlab.run.submit import (SlurmRequest, Submission, bundle_dir, hand_to_host, mark_submitted, read_ids,
                                    run_submit_script, sbatch_path, wearlab_argv, write_scripts)

    bundled = bundle_dir() is not None
    if not bundled:
        sbatch_path()
    out = out.absolute()
    out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"submitted_utc": _utc(), "experiments": []}
    subs: list[tuple[Item, Submission, int]] = []
    dirs: list[Path] = []
    for item in items:
        if item.state == "complete" and item.results is not None:
            dirs.append(item.results)
            record["experiments"].append({"experiment": item.name, "state": "complete", "results": str(item.results)})
            continue
        o = item.options
        run_args = [*(["--runtime", o.runtime] if o.runtime else []),
                    *(["--repetitions", str(o.repetitions)] if o.repetitions else []),
                    *[a for kv in o.overrides for a in ("--set", kv)]]
        req = SlurmRequest(experiment=item.file, runs=item.estimate.runs, experiment_name=item.name, tasks=tasks,
                           run_args=tuple(run_args))
        sub = write_scripts(req, out)
        subs.append((item, sub, req.task_count()))
        dirs.append(sub.merged)
    wl = shlex.join(wearlab_argv())
    ds = " ".join(shlex.quote(str(d)) for d in dirs)
    (out / "suite-check.sbatch").write_text("\n".join([
        "#!/bin/sh",
        "# wearlab reproduce --slurm: the suite's claims and report, once every experiment's merge succeeded.",
        "#SBATCH --job-name=wearlab-suite-check",
        f"#SBATCH --output={out}/suite-check.log",
        "#SBATCH --cpus-per-task=1",
        f"cd {shlex.quote(str(Path.cwd()))}",
        f"{wl} report {ds} --out {shlex.quote(str(out / 'report'))}",
        f"exec {wl} check {ds}",
    ]) + "\n")
    script = out / "submit.sh"
    script.write_text(suite_submit_script([sub for _, sub, _ in subs], out))
    record["check_log"] = str(out / "suite-check.log")
    if bundled:
        hand_to_host(script)
        record["experiments"] += [{"experiment": item.name, "submission": str(sub.dir), "tasks": n,
                                   "results": str(sub.merged)} for item, sub, n in subs]
        record["submit"] = str(script)
        _write_slurm_record(out, record)
        console.print(f"written: {script} (each experiment's job array and merge, then the suite's check); the "
                      f"bundle's launcher submits it on the host when this guest stops; the job ids go to "
                      f"{out / 'suite-jobs.txt'} and each submission's jobs.txt")
        return 0
    run_submit_script(script, timeout=120 + 30 * len(subs))
    for item, sub, n in subs:
        sub = mark_submitted(sub)
        record["experiments"].append({"experiment": item.name, "submission": str(sub.dir), "array_job": sub.array_job,
                                      "merge_job": sub.merge_job, "tasks": n, "results": str(sub.merged)})
        console.print(f"{item.name}: array job {sub.array_job} ({n} tasks), merge job {sub.merge_job}; "
                      f"wearlab status {sub.dir}", highlight=False)
    check_job = read_ids(out / "suite-jobs.txt").get("check_job")
    if not check_job:
        raise EnvironmentProblem(f"{script} ran but wrote no check job to {out / 'suite-jobs.txt'}")
    record["check_job"] = check_job
    _write_slurm_record(out, record)
    console.print(f"the suite's check and report: job {check_job} after the merges; its verdicts in "
                  f"{out / 'suite-check.log'}, the report in {out / 'report'}")
    return 0


def suite_submit_script(subs: list, out: Path) -> str:
    """<out>/submit.sh: each experiment's submit.sh (its array, its merge after it), then the
    suite's check after every merge; the check's job id to suite-jobs.txt."""
    lines = ["#!/bin/sh",
             "# wearlab reproduce --slurm: submits each experiment's job array and merge (its own submit.sh),",
             "# then the suite's check and report after every merge (written by `wearlab reproduce --slurm`).",
             "set -eu",
             'cd "$(dirname "$0")"',
             'merges=""']
    for sub in subs:
        lines += [f"sh {shlex.quote(str(sub.dir / 'submit.sh'))}",
                  f"m=$(sed -n 's/^merge_job=//p' {shlex.quote(str(sub.dir / 'jobs.txt'))})",
                  'merges="${merges:+$merges:}$m"']
    lines += ['check=$(sbatch --parsable ${merges:+--dependency=afterok:$merges} suite-check.sbatch)',
              'check=${check%%;*}',
              "printf 'check_job=%s\\n' \"$check\" > suite-jobs.txt",
              f'echo "the suite\'s check and report: job $check after the merges; verdicts in {out}/suite-check.log"']
    return "\n".join(lines) + "\n"


def _write_slurm_record(out: Path, record: dict[str, Any]) -> None:
    (out / "slurm-suite.json").write_text(json.dumps(record, indent=2) + "\n")


def _run_one(item: Item, out: Path, bar: _Bar) -> tuple[int, float, Path | None]:
    """One experiment as its own `wearlab run`, the bar following its runs.csv."""
    o = item.options
    argv = [sys.executable, "-m", "wearlab", "run", str(o.experiment), "--out", str(out)]
    if o.runtime:
        argv += ["--runtime", o.runtime]
    if o.repetitions is not None:
        argv += ["--repetitions", str(o.repetitions)]
    argv += [f"--set={s}" for s in o.overrides]
    latest = out / item.name / "latest"
    before = _target(latest)
    if item.state == "resume" and item.results is not None:
        argv += ["--resume", str(item.results)]
        before = None
    log_dir = out / item.name
    log_dir.mkdir(parents=True, exist_ok=True)
    bar.start(item)
    t0 = time.monotonic()
    with (log_dir / "reproduce.log").open("a") as log:
        log.write(f"\n=== {_utc()}: {' '.join(argv)}\n")
        log.flush()
        env = {**os.environ, "WEARLAB_PLAIN": "1"}
        # Its own session: a terminal's Ctrl-C reaches this process alone, which passes it on once
        # (a second one would cut the run's clean-up short: runtime.signals).
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        results = None
        try:
            while True:
                try:
                    rc = proc.wait(timeout=POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    pass
                results = results or _new_target(latest, before)
                if results is not None:
                    bar.follow(item, results)
        except KeyboardInterrupt:
            # Ctrl-C, SIGTERM, a closed terminal: the run is asked once to end; it ends cleanly,
            # keeping its runs.
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            rc = _wait_after_interrupt(proc)
    results = results or _new_target(latest, before)
    if results is not None:
        bar.follow(item, results)
    if rc != 130:
        bar.finish(item)
    return rc, time.monotonic() - t0, results


def _wait_after_interrupt(proc: subprocess.Popen) -> int:
    while True:
        try:
            rc = proc.wait(timeout=180)
            return 130 if rc in (0, 130) else rc
        except KeyboardInterrupt:
            continue
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)     # a second time: its guest is stopped at once


def _target(link: Path) -> Path | None:
    try:
        return link.resolve(strict=True)
    except OSError:
        return None


def _new_target(link: Path, before: Path | None) -> Path | None:
    now = _target(link)
    return now if now is not None and now != before else None


def _ok_runs(results: Path | None) -> int:
    if results is None or not (results / "runs.csv").is_file():
        return 0
    import csv

    with (results / "runs.csv").open(newline="") as fh:
        return sum(1 for r in csv.DictReader(fh) if r.get("status") == "ok")


def _after(console: Console, command: str, dirs: list[Path], extra: list[str]) -> int:
    """`wearlab check` / `wearlab report` on the suite's results, where this wearlab has them."""
    if not dirs:
        return 0
    probe = subprocess.run([sys.executable, "-m", "wearlab", command, "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        console.print(f"`wearlab {command}` is not in this wearlab: skipped")
        return 0
    console.print(f"wearlab {command} {' '.join(map(str, dirs))} {' '.join(extra)}".strip(), highlight=False)
    return subprocess.run([sys.executable, "-m", "wearlab", command, *map(str, dirs), *extra]).returncode


def _write_record(out: Path, record: dict[str, Any]) -> None:
    """<out>/reproduce.json: every `wearlab reproduce` of this results base, this one last."""
    path = out / "reproduce.json"
    try:
        sessions = json.loads(path.read_text()).get("sessions", [])
    except (OSError, ValueError, AttributeError):
        sessions = []
    sessions = [x for x in sessions if x.get("started_utc") != record["started_utc"]] + [record]
    tmp = out / "reproduce.json.tmp"
    tmp.write_text(json.dumps({"sessions": sessions}, indent=2) + "\n")
    tmp.replace(path)


def _utc() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()


class _TimeLeft(ProgressColumn):
    """The time left: what the estimate leaves, scaled by how the suite's time so far compares
    with the estimate of what it did (the estimate itself until there is enough to compare)."""

    def render(self, task) -> Text:
        left = max(0.0, (task.total or 0) - task.completed)
        elapsed = task.elapsed or 0.0
        if task.completed >= 30 and elapsed > 0:
            left *= min(4.0, max(0.25, elapsed / task.completed))
        return Text(f"~{format_s(left)} left", style="progress.remaining")


class _Bar:
    """The suite's progress in estimated seconds of work: each finished run adds its estimate, a
    finished experiment the rest of its own; rich's time left is then the estimate corrected by
    how fast the suite really goes. Without a terminal: a line per experiment and per 10 % of it."""

    def __init__(self, console: Console, total_s: float):
        self.console, self.total = console, max(total_s, 1.0)
        self.plain = os.environ.get("WEARLAB_PLAIN") == "1" or not console.is_terminal
        self.done_s = 0.0
        self._base = 0.0
        self._counted: set[int] = set()
        self._progress: Progress | None = None
        self._last_said = -1

    def __enter__(self) -> _Bar:
        if not self.plain:
            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
                                      TimeElapsedColumn(), _TimeLeft(),
                                      console=self.console)
            self._progress.__enter__()
            self._task = self._progress.add_task("suite", total=self.total)
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def say(self, text: str) -> None:
        (self._progress.console if self._progress is not None else self.console).print(text, highlight=False)

    def start(self, item: Item) -> None:
        self._base = self.done_s
        self._counted = set(item.done)
        self._update(item, f"{item.name}: starting")

    def follow(self, item: Item, results: Path) -> None:
        path = results / "runs.csv"
        try:
            lines = path.read_text().splitlines()[1:]
        except OSError:
            return
        import csv

        added = False
        for row in csv.reader(lines):
            if row and row[0].isdigit() and int(row[0]) not in self._counted:
                n = int(row[0])
                self._counted.add(n)
                cell = next((c for m, _, c in schedule(item.plan) if m == n), None)
                if cell is not None:
                    self.done_s += item.estimate.run_s(cell.index)
                    added = True
        if added:
            self._update(item, f"{item.name}: {len(self._counted)}/{item.estimate.runs} runs")

    def finish(self, item: Item) -> None:
        self.done_s = max(self.done_s, self._base + item.left_s())
        self._update(item, f"{item.name}: done")

    def _update(self, item: Item, what: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=min(self.done_s, self.total), description=what)
            return
        pct = int(100 * self.done_s / self.total)
        if pct // 10 != self._last_said // 10 or what.endswith(("starting", "done")):
            self._last_said = pct
            self.console.print(f"[{pct:3d} %] {what}", highlight=False)
