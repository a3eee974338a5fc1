"""`wearlab submit EXP --slurm`: an experiment as a Slurm job array, one shard per task, merged by
a job that depends on the array (issue 24).

What it writes, into a submission directory (`<out>/<experiment>/<UTC>-slurm/`), before anything
is submitted - the scripts a user reads are the scripts that run:

    shard.sbatch     the job array: task I runs `wearlab run EXP --shard I/N` into shards/I/
                     (or resumes it there: a task submitted again runs only its missing runs)
    merge.sbatch     `wearlab merge merged shards/*/EXP/latest`, after the whole array succeeded
    logs/            one log per task (shard-<I>.log) and the merge's
    submit.sh        what submits them: `sbatch` the array, then the merge after it; the job ids
                     go to jobs.txt
    submission.json  what was asked, the job ids, and how to follow them (`wearlab status DIR`)

The plan is made and checked here first (bad input exits 2, nothing is written or submitted). The
tasks call the wearlab that submitted them, by absolute path: from a checkout, its venv's Python
(the compute nodes must see this checkout and its venv: a shared file system, and run the tasks as
root); from the bundle (`make bundle`, WEARLAB_BUNDLE set by its launcher), the bundle's launcher,
as whoever submitted. In the bundle this command runs inside a UML guest, which has no way to
Slurm's controller: it writes the scripts, and the launcher runs submit.sh on the host once the
guest has stopped (the only command a guest hands the host: a submit.sh by path, see
images/bundle/wearlab). Each task names its own `--out`, so two tasks on one node never share a
results directory; each runs its own UML guest when the experiment needs one.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.measure import fidelity
from wearlab.report import results
from wearlab.run.shard import Shard

WHERE = "wearlab submit"


@dataclass(frozen=True)
class SlurmRequest:
    """What `wearlab submit --slurm` was asked."""

    experiment: Path
    runs: int                          # the plan's runs
    experiment_name: str
    tasks: int | None = None           # default: one per run, at most 16
    partition: str | None = None
    time: str | None = None            # sbatch --time (e.g. 30:00, 2:00:00)
    cpus_per_task: int = 2             # a UML guest's CPU and the host side's
    run_args: tuple[str, ...] = ()     # --runtime, --repetitions, --shaper, --set as given

    def task_count(self) -> int:
        n = self.tasks if self.tasks is not None else min(self.runs, 16)
        return max(1, min(n, self.runs)) if self.runs else 1


def bundle_dir() -> Path | None:
    """The bundle this wearlab runs from (its launcher says so in WEARLAB_BUNDLE), else None."""
    b = os.environ.get("WEARLAB_BUNDLE")
    return Path(b) if b else None


def wearlab_argv() -> list[str]:
    """How a task starts this wearlab, by absolute path: the bundle's launcher when this wearlab
    runs from a bundle (the task boots its own guest), else this interpreter (its venv)."""
    b = bundle_dir()
    if b is not None:
        return [str(b / "wearlab")]
    return [str(Path(sys.executable).absolute()), "-m", "wearlab"]


def shard_script(req: SlurmRequest, sub_dir: Path, workdir: Path) -> str:
    n = req.task_count()
    run = shlex.join([*wearlab_argv(), "run", str(req.experiment.absolute()), *req.run_args])
    return "\n".join([
        "#!/bin/sh",
        f"# wearlab: {req.experiment_name} as {n} shards of {req.runs} runs (written by `wearlab submit`).",
        "# Task I runs shard I/N into shards/I/; submitted again (e.g. `sbatch --array=3 shard.sbatch`), it resumes",
        "# that shard: only its missing runs run, with the seeds they would have had.",
        f"#SBATCH --job-name=wearlab-{req.experiment_name}",
        f"#SBATCH --array=1-{n}",
        f"#SBATCH --output={sub_dir}/logs/shard-%a.log",
        f"#SBATCH --cpus-per-task={req.cpus_per_task}",
        *([f"#SBATCH --partition={req.partition}"] if req.partition else []),
        *([f"#SBATCH --time={req.time}"] if req.time else []),
        "set -eu",
        f"cd {shlex.quote(str(workdir))}",
        'i="${SLURM_ARRAY_TASK_ID:?run me with sbatch (a job array task)}"',
        f'out={shlex.quote(str(sub_dir))}/shards/"$i"',
        f'latest="$out"/{shlex.quote(req.experiment_name)}/latest',
        'if [ -f "$latest/plan.json" ]; then',
        f'  exec {run} --shard "$i/{n}" --resume "$latest"',
        "fi",
        f'exec {run} --shard "$i/{n}" --out "$out"',
    ]) + "\n"


def merge_script(req: SlurmRequest, sub_dir: Path, workdir: Path) -> str:
    wl = shlex.join(wearlab_argv())
    d = shlex.quote(str(sub_dir))
    return "\n".join([
        "#!/bin/sh",
        f"# wearlab: merges the {req.task_count()} shards of {req.experiment_name} once every task succeeded.",
        f"#SBATCH --job-name=wearlab-{req.experiment_name}-merge",
        f"#SBATCH --output={sub_dir}/logs/merge.log",
        "#SBATCH --cpus-per-task=1",
        *([f"#SBATCH --partition={req.partition}"] if req.partition else []),
        "set -eu",
        f"cd {shlex.quote(str(workdir))}",
        f"rm -rf {d}/merged",
        f"exec {wl} merge {d}/merged {d}/shards/*/{shlex.quote(req.experiment_name)}/latest",
    ]) + "\n"


def submit_script(req: SlurmRequest, sub_dir: Path) -> str:
    follow = shlex.join([*wearlab_argv(), "status", str(sub_dir)])
    return "\n".join([
        "#!/bin/sh",
        f"# wearlab: submits {req.experiment_name}'s job array, then its merge after it (written by `wearlab submit`).",
        "# The job ids go to jobs.txt beside this script (`wearlab status` reads them).",
        "set -eu",
        'cd "$(dirname "$0")"',
        "array=$(sbatch --parsable shard.sbatch)",
        'array=${array%%;*}',
        'merge=$(sbatch --parsable --dependency=afterok:"$array" merge.sbatch)',
        'merge=${merge%%;*}',
        'printf \'array_job=%s\\nmerge_job=%s\\n\' "$array" "$merge" > jobs.txt',
        f'echo "submitted {req.experiment_name}: array job $array ({req.task_count()} tasks), merge job $merge after it"',
        f"echo {shlex.quote('  follow: ' + follow)}",
        f"echo {shlex.quote('  results: ' + str(sub_dir / 'merged'))}",
    ]) + "\n"


def read_ids(path: Path) -> dict[str, str]:
    """The `key=id` lines a submit.sh wrote (jobs.txt: array_job, merge_job; reproduce's
    suite-jobs.txt: check_job); {} before it ran."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def read_jobs(sub_dir: Path) -> dict[str, str]:
    """The job ids a submission's submit.sh wrote (array_job, merge_job); {} before it ran."""
    return read_ids(sub_dir / "jobs.txt")


@dataclass(frozen=True)
class Submission:
    dir: Path
    array_job: str | None = None
    merge_job: str | None = None

    @property
    def merged(self) -> Path:
        return self.dir / "merged"


def write_scripts(req: SlurmRequest, out: Path) -> Submission:
    """The submission directory with its scripts and submission.json (nothing submitted)."""
    sub_dir = out.absolute() / req.experiment_name / f"{results.utc_stamp()}-slurm"
    sub_dir.mkdir(parents=True)
    (sub_dir / "logs").mkdir()
    workdir = Path.cwd()
    (sub_dir / "shard.sbatch").write_text(shard_script(req, sub_dir, workdir))
    (sub_dir / "merge.sbatch").write_text(merge_script(req, sub_dir, workdir))
    (sub_dir / "submit.sh").write_text(submit_script(req, sub_dir))
    results.write_json(sub_dir / "submission.json", {
        "experiment": req.experiment_name, "experiment_file": str(req.experiment.absolute()), "runs": req.runs,
        "tasks": req.task_count(),
        "shards": {str(i): Shard(i, req.task_count()).to_document(req.runs)["runs"]
                   for i in range(1, req.task_count() + 1)},
        "run_args": list(req.run_args), "written_utc": datetime.now(timezone.utc).isoformat(),
        "merged": str(sub_dir / "merged"), "submitted": False})
    return Submission(sub_dir)


def sbatch_path() -> str:
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise EnvironmentProblem("wearlab submit --slurm needs Slurm's `sbatch` on PATH (a login node of the "
                                 "cluster; Debian: slurm-client); `--dry-run` writes and prints the scripts only")
    return sbatch


def run_submit_script(script: Path, timeout: float = 120) -> None:
    """Run a submit.sh written here (an experiment's, or reproduce's for a whole suite) with
    sbatch on its PATH."""
    sbatch = sbatch_path()
    argv = ["sh", str(script)]
    env = {**os.environ, "PATH": f"{Path(sbatch).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if res.returncode != 0:
        raise EnvironmentProblem(f"`{shlex.join(argv)}` failed: {(res.stderr or res.stdout).strip()}")


def mark_submitted(sub: Submission) -> Submission:
    """The job ids its submit.sh wrote, into submission.json too."""
    jobs = read_jobs(sub.dir)
    if not jobs.get("merge_job"):
        raise EnvironmentProblem(f"{sub.dir / 'submit.sh'} ran but wrote no merge job to {sub.dir / 'jobs.txt'}")
    doc = json.loads((sub.dir / "submission.json").read_text())
    results.write_json(sub.dir / "submission.json", {**doc, "submitted": True, **jobs})
    return Submission(sub.dir, jobs["array_job"], jobs["merge_job"])


def submit_written(sub: Submission) -> Submission:
    """Run the submission's submit.sh (the array, then the merge after it); the job ids go into
    submission.json too."""
    run_submit_script(sub.dir / "submit.sh")
    return mark_submitted(sub)


def hand_to_host(script: Path) -> Path:
    """From the bundle: the guest cannot reach Slurm, so the launcher runs `script` (a submit.sh)
    on the host once the guest has stopped. It reads the script's path from the job directory it
    shares with the guest (WEARLAB_JOB)."""
    job = os.environ.get("WEARLAB_JOB")
    if not job or not Path(job).is_dir():
        raise EnvironmentProblem("--slurm from the bundle needs the bundle's launcher (no WEARLAB_JOB directory "
                                 "here): run it as BUNDLE/wearlab ...")
    assert script.name == "submit.sh", script   # the launcher runs nothing else
    (Path(job) / "submit-on-host").write_text(f"{script}\n")
    return script


def submit(req: SlurmRequest, out: Path, console: Console, *, dry_run: bool) -> int:
    bundled = bundle_dir() is not None
    if not dry_run and not bundled:
        sbatch_path()   # before anything is written
    sub = write_scripts(req, out)
    shard_sh, merge_sh, submit_sh = sub.dir / "shard.sbatch", sub.dir / "merge.sbatch", sub.dir / "submit.sh"
    if dry_run:
        console.print(f"# {shard_sh}\n{shard_sh.read_text()}\n# {merge_sh}\n{merge_sh.read_text()}", highlight=False)
        console.print(f"written, not submitted (--dry-run): {sub.dir}; submit with\n  sh {submit_sh}")
        return 0
    if bundled:
        hand_to_host(submit_sh)
        console.print(f"written: {sub.dir}; the bundle's launcher submits it on the host when this guest stops "
                      f"(sh {submit_sh})")
        return 0
    sub = submit_written(sub)
    console.print(f"submitted {req.experiment_name}: array job {sub.array_job} ({req.task_count()} tasks), merge job "
                  f"{sub.merge_job} after it\n  follow: wearlab status {sub.dir}\n  results: {sub.merged}")
    return 0


# -- the same shards on Kubernetes (printed, not applied) ----------------------------------------

K8S_IMAGE = "wearlab/testbed:bookworm"   # the Compose stack's testbed image (images/testbed/)


def k8s_manifest(req: SlurmRequest, workdir: Path, results_dir: str = "/results") -> str:
    """An Indexed Job, one completion per shard (JOB_COMPLETION_INDEX counts from 0: shard I is
    index I-1), and a merge Job to apply once the first has succeeded (Kubernetes has no
    dependency between Jobs). Like the testbed container of the Compose stack, the pods need
    privileges (network namespaces, tc, a UML guest's /dev/shm) and this checkout with its venv
    at the same path (a volume: `wearlab-work` here), the results on another (`wearlab-results`)."""
    from io import StringIO

    from ruamel.yaml import YAML

    n = req.task_count()
    run = shlex.join([*wearlab_argv(), "run", str(req.experiment.absolute()), *req.run_args])
    out = f"{results_dir}/{req.experiment_name}"
    volumes = [{"name": "work", "persistentVolumeClaim": {"claimName": "wearlab-work"}},
               {"name": "results", "persistentVolumeClaim": {"claimName": "wearlab-results"}},
               {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Gi"}}]
    mounts = [{"name": "work", "mountPath": str(workdir)}, {"name": "results", "mountPath": results_dir},
              {"name": "shm", "mountPath": "/dev/shm"}]
    container = {"image": K8S_IMAGE, "workingDir": str(workdir), "volumeMounts": mounts,
                 "securityContext": {"privileged": True},
                 "resources": {"requests": {"cpu": str(req.cpus_per_task), "memory": "3Gi"}}}
    name = f"wearlab-{req.experiment_name}".lower().replace("_", "-")[:50]
    shards = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{name}-shards"},
              "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimitPerIndex": 1,
                       "template": {"spec": {"restartPolicy": "Never", "volumes": volumes, "containers": [{
                           **container, "name": "shard", "command": ["sh", "-c", (
                               'i=$((JOB_COMPLETION_INDEX + 1)); d="' + out + '/shards/$i"; '
                               'if [ -f "$d/' + req.experiment_name + '/latest/plan.json" ]; then exec ' + run +
                               f' --shard "$i/{n}" --resume "$d/{req.experiment_name}/latest"; fi; exec ' + run +
                               f' --shard "$i/{n}" --out "$d"')]}]}}}}
    merge = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{name}-merge"},
             "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "volumes": volumes,
                      "containers": [{**container, "name": "merge", "command": ["sh", "-c", (
                          f"rm -rf {out}/merged && exec " + shlex.join([*wearlab_argv(), "merge"]) +
                          f" {out}/merged {out}/shards/*/{req.experiment_name}/latest")]}]}}}}
    y = YAML()
    y.default_flow_style = False
    buf = StringIO()
    buf.write(f"# wearlab: {req.experiment_name} as {n} shards of {req.runs} runs, an Indexed Job (written by "
              "`wearlab submit --k8s`).\n# Apply the first document; once it has succeeded, the second "
              "(the merge). Needs the PVCs wearlab-work\n# (this checkout with its venv, at "
              f"{workdir}) and wearlab-results, and the image {K8S_IMAGE} (make images).\n")
    y.dump_all([shards, merge], buf)
    return buf.getvalue()


# -- following a submission ---------------------------------------------------------------------


def status(sub_dir: Path, console: Console) -> int:
    """Each shard's progress from its own files (runs.csv rows, metadata status), and Slurm's view
    of the jobs where `scontrol` answers. Exit 0 once merged, else 3 (still running or failed)."""
    f = sub_dir / "submission.json"
    if not f.is_file():
        raise InputError([Problem(str(sub_dir), None, "DIR", "is not a submission directory (no submission.json): "
                                  "give the directory `wearlab submit` printed")])
    doc = json.loads(f.read_text())
    n, name = int(doc["tasks"]), doc["experiment"]
    done = 0
    for i in range(1, n + 1):
        latest = sub_dir / "shards" / str(i) / name / "latest"
        want = len(Shard(i, n).runs(int(doc["runs"])))
        ok = _ok_rows(latest / "runs.csv")
        state = _meta_status(latest / "metadata.json")
        done += ok
        console.print(f"shard {i}/{n}: {ok} of {want} runs ok ({state})" + _fidelity_note(latest / "metadata.json"))
    jobs = {**read_jobs(sub_dir), **{k: doc[k] for k in ("array_job", "merge_job") if doc.get(k)}}
    for key in ("array_job", "merge_job"):
        if jobs.get(key):
            console.print(f"{key.replace('_', ' ')} {jobs[key]}: {_slurm_state(str(jobs[key]))}")
    merged = _meta_status(sub_dir / "merged" / "metadata.json")
    console.print(f"{done} of {doc['runs']} runs ok; merged: {merged}")
    noisy = _noisy(sub_dir / "merged" / "metadata.json")
    if noisy:
        console.print(f"noisy shards (their node failed the fidelity probe): {', '.join(noisy)}")
    return 0 if merged == "complete" else 3


def _ok_rows(path: Path) -> int:
    import csv

    try:
        with path.open(newline="") as f:
            return sum(1 for r in csv.DictReader(f) if r.get("status") == "ok")
    except OSError:
        return 0


def _fidelity_note(path: Path) -> str:
    try:
        return "; fidelity " + fidelity.describe(json.loads(path.read_text()))
    except (OSError, ValueError, AttributeError):
        return ""


def _noisy(path: Path) -> list[str]:
    try:
        return list(json.loads(path.read_text()).get("merge", {}).get("noisy_shards") or [])
    except (OSError, ValueError, AttributeError):
        return []


def _meta_status(path: Path) -> str:
    try:
        return str(json.loads(path.read_text()).get("status"))
    except (OSError, ValueError):
        return "not started"


def _slurm_state(job: str) -> str:
    if shutil.which("scontrol") is None:
        return "unknown (no scontrol here)" + (": in the bundle's guest; `scontrol show job` on the host"
                                               if bundle_dir() is not None else "")
    res = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=20,
                         check=False)
    if res.returncode != 0:
        return "unknown to Slurm now (finished long ago, or another cluster)"
    states = sorted({tok.split("=", 1)[1] for tok in res.stdout.split() if tok.startswith("JobState=")})
    return ", ".join(states) or "unknown"
