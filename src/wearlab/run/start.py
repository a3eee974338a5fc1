"""`wearlab run`: load the experiment, plan it, choose where the network lives, check the plan
against that kernel, and only then touch anything - heal what dead runs left, make the results
directory, and run the plan here or inside a UML guest. Everything the run starts lives in its own
cgroup, and every way a run can be asked to end ends it cleanly (runtime.signals).

How a run enters the guest: the host writes a job (`GuestJob`: the typed options of this command
whole, the results directory, and the host's plan with its digest) into the guest's job directory
(runtime.placement.rerun_in_guest); the guest's `wearlab guest-run JOB` loads the same files with
the same options, plans again, and runs only if its plan's digest is the host's - otherwise it
stops with exit status 2, naming what differs. No command line is rebuilt by hand: an option
added to `RunOptions` reaches the guest as it is.

`--resume DIR` continues an interrupted run in its own results directory: the plan made now must
be DIR/plan.json's (else exit 2, naming what differs), its finished runs are kept and the others
run with the seeds their identity gives them (run.resume, plan.seeds).
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from wearlab.errors import EnvironmentProblem
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.declarations import Catalog
from wearlab.model.experiment import Experiment
from wearlab.model.experiment_file import load_experiment
from wearlab.model.features import OPTIONAL
from wearlab.plan.plan import RunPlan, plan
from wearlab.report import results
from wearlab.run.cleanup import heal
from wearlab.runtime import cgroup, doctor, placement, probe, signals


class RunOptions(BaseModel):
    """What `wearlab run` was asked (cli.py fills it from its flags). The host plans from it and
    hands it whole to a UML guest, which plans from it again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment: Path
    runtime: str | None = None           # default: the experiment's
    repetitions: int | None = None
    out: Path = Path("results")
    shaper: str = Shaper.NETEM.value
    overrides: list[str] = Field(default_factory=list)   # KEY=VALUE, as given
    resume: Path | None = None           # an interrupted run's results directory to continue

    def load(self, catalog: Catalog) -> Experiment:
        return load_experiment(self.experiment, catalog, repetitions=self.repetitions, runtime=self.runtime,
                               overrides=overrides_of(self.overrides))


class GuestJob(BaseModel):
    """What the host hands the UML guest (runtime.placement.JOB_FILE in the job directory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    options: RunOptions
    results: Path                        # the results directory the host made
    plan_sha256: str                     # RunPlan.digest() of the host's plan
    plan: dict[str, Any]                 # the host's plan document (to name what differs)


def overrides_of(pairs: list[str]) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in pairs)}


def check_kernel(p: RunPlan) -> None:
    """Refuse a run whose kernel lacks what the plan needs - before anything is created."""
    needed = frozenset(f for f in p.features if f not in OPTIONAL)
    missing = doctor.missing_features(needed, p.runtime)
    if missing:
        where = "the UML guest's kernel" if p.runtime == Runtime.UML else f"this kernel ({probe.kernel_release()})"
        hint = (" run with `--runtime uml` (or `--runtime auto`) to use a User-Mode Linux guest whose kernel has it;"
                if p.runtime == Runtime.HOST else "")
        raise EnvironmentProblem(f"{p.name} needs {', '.join(missing)}, which {where} lacks;{hint} "
                                 "wearlab never runs without what an experiment asks for (`wearlab doctor` shows "
                                 "what each kernel has)")


def check_builds(p: RunPlan) -> None:
    """What the run needs that `make` builds (tcpcryptd) is there - before anything is created."""
    if "tcpcrypt" in p.builds():
        from wearlab.nodes.tcpcrypt import binary

        binary()   # EnvironmentProblem naming `make tcpcrypt`


def run_command(opts: RunOptions, catalog: Catalog, console: Console, err_console: Console) -> int:
    """`wearlab run` (on the host, or wherever a user runs it)."""
    exp = opts.load(catalog)
    p = plan(exp, opts.shaper)
    runtime, reason = placement.choose(p.runtime)
    p = p.placed(runtime)
    resumed = None
    if opts.resume is not None:   # before anything else: a plan other than the interrupted run's is bad input
        from wearlab.run.resume import check_plan

        resumed = opts.resume.resolve()
        check_plan(resumed, p)
    if runtime == Runtime.HOST and os.geteuid() != 0:
        raise EnvironmentProblem("wearlab run needs root (network namespaces, tc)")
    check_kernel(p)
    check_builds(p)
    images = {n: node.image for n, node in p.topology.nodes.items() if node.image}
    if images:
        # Container nodes start on this host (beside the guest, under uml): Docker and their
        # images, before anything is created.
        from wearlab.realize import containers

        containers.check_docker()
        containers.check_images(images)
    _heal(err_console)
    with signals.interruptible():
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            if resumed is not None:
                out_dir = resumed
                results.point_latest(out_dir)
            else:
                out_dir = results.new_results_dir(opts.out, p.name)
                results.point_latest(out_dir)  # at once: an interrupted run's rows are results too
                results.write_yaml(out_dir / "experiment.yaml", exp.to_document())
                results.write_yaml(out_dir / "topology.yaml", exp.topology.to_document(exp.catalog))
            if runtime == Runtime.UML:
                console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
                rc = _enter_guest(opts, p, out_dir)
            else:
                from wearlab.run.runner import run_experiment

                console.print(f"runtime: host ({reason})")
                rc = run_experiment(p, out_dir, console=console, resume=resumed is not None)
        finally:
            cgroup.leave(group)
    if (out_dir / "series").is_dir() and not probe.in_uml_guest():
        # Drawn on the host: the guest's CPU is the expensive one, and its root filesystem lacks
        # what matplotlib imports from the host's system python. (A run's guest never gets here;
        # this asks "where am I" for a `wearlab run` a user started inside a guest: no plots.)
        from wearlab.report.plots import plot_results

        for png in plot_results(out_dir):
            console.print(f"plot: {png}")
    return rc


def _enter_guest(opts: RunOptions, p: RunPlan, out_dir: Path) -> int:
    job = GuestJob(options=opts, results=out_dir.resolve(), plan_sha256=p.digest(), plan=p.to_document())
    mounts = [out_dir.resolve(), opts.experiment.resolve().parent]
    if p.topology.file:
        mounts.append(Path(p.topology.file).resolve().parent)
    attach = None
    if any(n.image for n in p.topology.nodes.values()):
        from wearlab.realize.containers import for_guest
        attach = partial(for_guest, p.topology)
    return placement.rerun_in_guest(job.model_dump(mode="json"), mounts=mounts, attach=attach)


def run_guest_job(job_file: Path, catalog: Catalog, console: Console, err_console: Console) -> int:
    """`wearlab guest-run JOB`, inside the UML guest the host booted for the job: plan from the
    host's options, run only the host's plan (equal digests), into the host's results directory."""
    job = GuestJob.model_validate_json(Path(job_file).read_text())
    p = plan(job.options.load(catalog), job.options.shaper).placed(Runtime.UML)
    mine = p.digest()
    if mine != job.plan_sha256:
        doc = p.to_document()
        differ = sorted(k for k in {*doc, *job.plan} if doc.get(k) != job.plan.get(k))
        raise EnvironmentProblem(
            f"the plan in the UML guest is not the host's (host {job.plan_sha256[:12]}, guest {mine[:12]}; they "
            f"differ in: {', '.join(differ) or 'nothing the document shows'}): did {job.options.experiment} or "
            "a file it names change while the guest booted? Nothing was run; run it again")
    if os.geteuid() != 0:
        raise EnvironmentProblem("wearlab run needs root (network namespaces, tc)")
    _heal(err_console)
    from wearlab.run.runner import run_experiment

    with signals.interruptible():
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            return run_experiment(p, job.results, console=console, host_plan_sha256=job.plan_sha256,
                                  resume=job.options.resume is not None)
        finally:
            cgroup.leave(group)


def _heal(err_console: Console) -> None:
    if os.geteuid() == 0:
        # What earlier runs that died (kill -9, a crash) left behind goes first; live runs stay.
        for line in heal():
            err_console.print(f"removed what a dead run left: {line}")
