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

`--hold` keeps the experiment's network, with the last cell's node kinds running, after the last
run, as a deployment named the experiment's (or `--name`): the results are complete, written and
summed up first, then run.hold holds the network where it lives until `wearlab destroy`, Ctrl-C,
SIGTERM or a hang-up. The name is taken (run.hold.claim: the deployment's state directory and
ledger entry) before anything else is made. Under uml the guest is booted as a deployment's is
reachable: a host pty on its serial line 1 with the node-exec hub (run.hold.guest_line), and
its host CPU polls while the runs measure, not while the network is held (`_hold_polling`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from wearlab.errors import EnvironmentProblem, InputError, Problem
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.declarations import Catalog
from wearlab.model.experiment import Experiment
from wearlab.model.experiment_file import load_experiment
from wearlab.model.features import OPTIONAL
from wearlab.plan.plan import RunPlan, plan
from wearlab.report import results
from wearlab.run.cleanup import heal
from wearlab.run.shard import Shard
from wearlab.runtime import cgroup, doctor, hostcpu, placement, probe, signals, uml

WHERE = "<command line>"
# The guest's metadata says what its host CPU did (report.metadata reads WEARLAB_HOST_IDLE): a held
# run's host polls until the hold, which uml.run_in_guest's own words cannot say.
HOLD_IDLE_ENV = "WEARLAB_RUN_HOST_IDLE"


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
    shard: str | None = None             # I/N: only the runs of that slice of the plan (run.shard)
    hold: bool = False                   # keep the network after the last run, as a deployment
    name: str | None = None              # the held network's name (default: the experiment's)

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
    host_pid: int | None = None          # the host's `wearlab run` (a held network's owner)


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


def check_runnable(p: RunPlan) -> None:
    """Everything a placed plan needs of this machine, before anything is created: the kernel's
    features, wearlab's own builds, and for container nodes (started on this host, beside the
    guest under uml) Docker and their images. A run and a deployment check the same."""
    images = {n: node.image for n, node in p.topology.nodes.items() if node.image}
    if images and os.environ.get("WEARLAB_BUNDLE"):
        raise EnvironmentProblem(f"{p.name}: container nodes ({', '.join(sorted(images))}) need root on the host "
                                 "(Docker, and a veth joined to the guest): the bundle runs as an ordinary user and "
                                 "cannot start them; run this experiment where you have root (`make experiment`)")
    check_kernel(p)
    check_builds(p)
    if images and p.runtime == Runtime.UML:
        captured = sorted(set(images) & p.workload.captured(p))
        if captured:
            raise InputError([p.topology.where.problem(
                ("nodes", n, "image"), f"node {n} runs as a container on the host, outside the UML guest, and the "
                f"{p.workload.name} workload captures its packets (tcpdump in its namespace, beside its software), "
                "which wearlab cannot start there: make it a namespace node (no image:) for this workload")
                for n in captured])
    if images:
        from wearlab.realize import containers

        containers.check_docker()
        containers.check_images(images)


def check_builds(p: RunPlan) -> None:
    """What the run needs that `make` builds (tcpcryptd) is there - before anything is created."""
    if "tcpcrypt" in p.builds():
        from wearlab.nodes.tcpcrypt import binary

        binary()   # EnvironmentProblem naming `make tcpcrypt`


def check_options(opts: RunOptions) -> None:
    """Flags that do not go together: exit 2 before anything is read."""
    if opts.hold and opts.resume is not None:
        raise InputError([Problem(WHERE, None, "--hold", "a resumed run is not held: resume it without --hold, "
                                                          "then `wearlab deploy EXPERIMENT` keeps its network up")])
    if opts.name is not None and not opts.hold:
        raise InputError([Problem(WHERE, None, "--name", "names the network held after the runs: give --hold too")])
    shard_of(opts)


def shard_of(opts: RunOptions) -> Shard | None:
    """The run's shard (--shard I/N), or None: all runs. A malformed one is bad input (exit 2)."""
    if opts.shard is None:
        return None
    try:
        return Shard.parse(opts.shard)
    except ValueError as e:
        raise InputError([Problem(WHERE, None, "--shard", str(e))]) from None


def check_same_shard(results_dir: Path, shard: Shard | None) -> None:
    """A shard's results are resumed as that shard: another slice would leave the first one's rows
    in a directory that `wearlab merge` then counts as the second's."""
    try:
        was = json.loads((results_dir / "metadata.json").read_text()).get("shard")
    except (OSError, ValueError):
        return
    before = f"{was['index']}/{was['count']}" if isinstance(was, dict) else None
    now = str(shard) if shard else None
    if before != now:
        raise InputError([Problem(str(results_dir), None, "--shard",
                                  f"it holds {'shard ' + before if before else 'all the runs'}, and this run asks for "
                                  f"{'shard ' + now if now else 'all the runs'}: resume it with "
                                  f"{'--shard ' + before if before else 'no --shard'}")])


def run_command(opts: RunOptions, catalog: Catalog, console: Console, err_console: Console) -> int:
    """`wearlab run` (on the host, or wherever a user runs it)."""
    check_options(opts)
    exp = opts.load(catalog)
    p = plan(exp, opts.shaper)
    runtime, reason = placement.choose(p.runtime)
    p = p.placed(runtime)
    resumed = None
    if opts.resume is not None:   # before anything else: a plan other than the interrupted run's is bad input
        from wearlab.run.resume import check_plan

        resumed = opts.resume.resolve()
        check_plan(resumed, p)
        check_same_shard(resumed, shard_of(opts))
    if runtime == Runtime.HOST and os.geteuid() != 0:
        raise EnvironmentProblem("wearlab run needs root (network namespaces, tc)")
    check_runnable(p)
    hold_name = (opts.name or p.name) if opts.hold else None
    if hold_name is not None:
        from wearlab.run import hold

        hold.check_name(hold_name, in_use=False)   # in use: asked once the dead are healed
    _heal(err_console)
    plotted = threading.Event()
    with signals.interruptible():
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            with _held_as(hold_name, runtime, opts, p) as state_dir:
                if resumed is not None:
                    out_dir = resumed
                    results.point_latest(out_dir)
                else:
                    out_dir = results.new_results_dir(opts.out, p.name)
                    results.point_latest(out_dir)  # at once: an interrupted run's rows are results too
                    results.write_yaml(out_dir / "experiment.yaml", exp.to_document())
                    results.write_yaml(out_dir / "topology.yaml", exp.topology.to_document(exp.catalog))
                if state_dir is not None:
                    hold.note(hold_name, run=str(out_dir.resolve()))

                def plots() -> None:
                    _plots(out_dir, console)
                    plotted.set()

                if runtime == Runtime.UML:
                    console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
                    rc = _enter_guest(opts, p, out_dir, state_dir=state_dir, held=plots, err_console=err_console)
                else:
                    from wearlab.run.runner import run_experiment

                    console.print(f"runtime: host ({reason})")
                    hold_here = None
                    if state_dir is not None:
                        hold_here = partial(_hold, name=hold_name, state_dir=state_dir, console=console,
                                            err_console=err_console, owner_pid=os.getpid(), runtime=Runtime.HOST,
                                            out_dir=out_dir, hub=True, started=plots)
                    rc = run_experiment(p, out_dir, console=console, resume=resumed is not None, hold=hold_here,
                                        shard=shard_of(opts))
        finally:
            cgroup.leave(group)
    if not plotted.is_set():
        _plots(out_dir, console)
    return rc


def _plots(out_dir: Path, console: Console) -> None:
    if (out_dir / "series").is_dir() and not probe.in_uml_guest():
        # Drawn on the host: the guest's CPU is the expensive one, and its root filesystem lacks
        # what matplotlib imports from the host's system python. (A run's guest never gets here;
        # this asks "where am I" for a `wearlab run` a user started inside a guest: no plots.)
        from wearlab.report.plots import plot_results

        for png in plot_results(out_dir):
            console.print(f"plot: {png}")


@contextlib.contextmanager
def _held_as(name: str | None, runtime: Runtime, opts: RunOptions, p: RunPlan) -> Iterator[Path | None]:
    """`--hold`: the deployment's name taken (run.hold.claim) for the whole command; else nothing."""
    if name is None:
        yield None
        return
    from wearlab.run import hold

    with hold.claim(name, runtime=runtime.value, topology=p.topology.file and str(Path(p.topology.file).resolve()),
                    experiment=str(opts.experiment.resolve())) as state_dir:
        yield state_dir


def _hold(state, cell, *, name: str, state_dir: Path, console: Console, err_console: Console, owner_pid: int,
          runtime: Runtime, out_dir: Path, hub: bool, started: Callable[[], None] | None = None) -> None:
    """run_experiment's `hold`: run.hold until a signal, which ends the hold (not the run: its
    results are complete) - so it returns normally."""
    from wearlab.run import hold

    plan = state.plan
    source = {"topology": plan.topology.file and str(Path(plan.topology.file).resolve()),
              "experiment": plan.file and str(Path(plan.file).resolve()), "run": str(out_dir.resolve())}
    try:
        hold.hold(state, cell, name=name, state_dir=state_dir, console=console, owner_pid=owner_pid,
                  runtime=runtime, source=source, hub=hub, started=started)
    except KeyboardInterrupt as e:
        if hub:   # in a guest (no hub), the host says it
            err_console.print(f"{name}: destroyed ({getattr(e, 'signal_name', 'SIGINT')})")


def _enter_guest(opts: RunOptions, p: RunPlan, out_dir: Path, *, state_dir: Path | None = None,
                 held: Callable[[], None] | None = None, err_console: Console | None = None) -> int:
    """Run the job in a UML guest. `state_dir`: a held run's (`--hold`): the guest is reachable by
    `wearlab exec`/`shell` as a deployment's is, and `held()` is called on the host once the
    guest holds the network."""
    job = GuestJob(options=opts, results=out_dir.resolve(), plan_sha256=p.digest(), plan=p.to_document(),
                   host_pid=os.getpid())
    mounts = [out_dir.resolve(), opts.experiment.resolve().parent]
    if p.topology.file:
        mounts.append(Path(p.topology.file).resolve().parent)
    attaches = []
    if any(n.image for n in p.topology.nodes.values()):
        from wearlab.realize.containers import for_guest
        attaches.append(partial(for_guest, p.topology))
    if state_dir is None:
        return placement.rerun_in_guest(job.model_dump(mode="json"), mounts=mounts,
                                        attach=attaches[0] if attaches else None)
    from wearlab.run.hold import HELD, attach_all, guest_line

    holding = threading.Event()
    attaches += [partial(guest_line, state_dir), partial(_hold_polling, state_dir / HELD, holding, held)]

    def command(job_dir: Path) -> list[str]:
        (job_dir / placement.JOB_FILE).write_text(job.model_dump_json(indent=1) + "\n")
        return [sys.executable, "-m", "wearlab", "guest-run", str(job_dir / placement.JOB_FILE)]

    try:
        # low_latency=False: `_hold_polling` makes the CPU poll itself, until the hold.
        return uml.run_in_guest(command, mounts=[*placement.project_paths(), *mounts, state_dir], cwd=Path.cwd(),
                                env={"WEARLAB_ARGV": os.environ.get("WEARLAB_ARGV", "")},
                                attach=attach_all(attaches), low_latency=False)
    except KeyboardInterrupt as e:
        if not (holding.is_set() or (state_dir / HELD).exists()):
            raise
        # The runs were done and their results written: ending the hold ends the command well.
        (err_console or Console(stderr=True)).print(f"{state_dir.name}: destroyed "
                                                    f"({getattr(e, 'signal_name', 'SIGINT')})")
        return 0


@contextlib.contextmanager
def _hold_polling(mark: Path, holding: threading.Event, held: Callable[[], None] | None, job_dir: Path):
    """A held run's host CPU: polling when idle (runtime.hostcpu) while the runs measure, back to
    its own setting once the guest holds the network - seen as the hold's mark (run.hold.HELD)
    appearing in the state directory the guest shares; then `held()` (the plots, drawn here)."""
    idle = hostcpu.low_latency_idle(hostcpu.guest_cpu())
    said = idle.__enter__()
    lock = threading.Lock()
    released = []

    def release() -> None:
        with lock:
            if not released:
                released.append(True)
                idle.__exit__(None, None, None)

    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):   # a file another kernel writes: looked at, 5 times a second
            if mark.exists():
                holding.set()
                release()
                if held is not None:
                    held()
                return

    watcher = threading.Thread(target=watch, name="hold-watch", daemon=True)
    watcher.start()
    try:
        yield [], {HOLD_IDLE_ENV: f"{said}; back to its own setting once the network is held"}
    finally:
        done.set()
        watcher.join(timeout=120)
        release()


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
    if os.environ.get(HOLD_IDLE_ENV):
        os.environ["WEARLAB_HOST_IDLE"] = os.environ[HOLD_IDLE_ENV]
    _heal(err_console)
    from wearlab.run.runner import run_experiment

    hold_here = None
    if job.options.hold:
        from wearlab.run.deployments import STATE

        name = job.options.name or p.name
        hold_here = partial(_hold, name=name, state_dir=STATE / name, console=console, err_console=err_console,
                            owner_pid=job.host_pid or os.getpid(), runtime=Runtime.UML, out_dir=job.results, hub=False)
    with signals.interruptible():
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            return run_experiment(p, job.results, console=console, host_plan_sha256=job.plan_sha256,
                                  resume=job.options.resume is not None, hold=hold_here,
                                  shard=shard_of(job.options))
        finally:
            cgroup.leave(group)


def _heal(err_console: Console) -> None:
    if os.geteuid() == 0:
        # What earlier runs that died (kill -9, a crash) left behind goes first; live runs stay.
        for line in heal():
            err_console.print(f"removed what a dead run left: {line}")
