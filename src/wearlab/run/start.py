"""`wearlab run`: load the experiment, plan it, check the plan against the kernel the network will
live on, and only then touch anything - heal what dead runs left, make the results directory,
and run it here or again inside a UML guest (runtime.launch). Everything the run starts lives in
its own cgroup, and every way a run can be asked to end ends it cleanly (runtime.signals)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from wearlab.errors import EnvironmentProblem
from wearlab.model.declarations import Catalog
from wearlab.model.choices import Runtime, Shaper
from wearlab.model.experiment_file import load_experiment
from wearlab.model.features import OPTIONAL
from wearlab.plan.plan import RunPlan, plan
from wearlab.report import results
from wearlab.run.cleanup import heal
from wearlab.runtime import cgroup, doctor, placement, probe, signals


@dataclass
class RunOptions:
    experiment: Path
    runtime: str | None = None           # default: the experiment's
    repetitions: int | None = None
    out: Path = Path("results")
    shaper: str = Shaper.NETEM.value
    overrides: list[str] = field(default_factory=list)   # KEY=VALUE, as given
    into: Path | None = None             # the exact results directory (host -> guest)


def overrides_of(pairs: list[str]) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in pairs)}


def check_kernel(p: RunPlan, runtime: Runtime) -> None:
    """Refuse a run whose kernel lacks what the plan needs - before anything is created."""
    needed = frozenset(f for f in p.features if f not in OPTIONAL)
    missing = doctor.missing_features(needed, runtime)
    if missing:
        where = "the UML guest's kernel" if runtime == Runtime.UML else f"this kernel ({probe.kernel_release()})"
        hint = (" run with `--runtime uml` (or `--runtime auto`) to use a User-Mode Linux guest whose kernel has it;"
                if runtime == Runtime.HOST and not probe.in_uml_guest() else "")
        raise EnvironmentProblem(f"{p.experiment.name} needs {', '.join(missing)}, which {where} lacks;{hint} "
                                 "wearlab never runs without what an experiment asks for (`wearlab doctor` shows "
                                 "what each kernel has)")


def check_builds(p: RunPlan) -> None:
    """What the run needs that `make` builds (tcpcryptd) is there - before anything is created."""
    if "tcpcrypt" in p.builds():
        from wearlab.nodes.tcpcrypt import binary

        binary()   # EnvironmentProblem naming `make tcpcrypt`


def run_command(opts: RunOptions, catalog: Catalog, console: Console, err_console: Console) -> int:
    exp = load_experiment(opts.experiment, catalog, repetitions=opts.repetitions, runtime=opts.runtime,
                          overrides=overrides_of(opts.overrides))
    p = plan(exp, opts.shaper)
    runtime, reason = placement.choose(exp.runtime)
    if runtime == Runtime.HOST and os.geteuid() != 0:
        raise EnvironmentProblem("wearlab run needs root (network namespaces, tc)")
    if opts.into is None:   # a run re-executed in the guest was checked by the host that started it
        check_kernel(p, runtime)
        check_builds(p)
    images = {n: node.image for n, node in exp.topology.nodes.items() if node.image}
    if images and not probe.in_uml_guest():
        # Container nodes start on this host: Docker and their images, before anything is created.
        from wearlab.realize import containers

        containers.check_docker()
        containers.check_images(images)
    if os.geteuid() == 0:
        # What earlier runs that died (kill -9, a crash) left behind goes first; live runs stay.
        for line in heal():
            err_console.print(f"removed what a dead run left: {line}")
    with signals.interruptible():
        group = cgroup.join(cgroup.run_name(os.getpid()))
        try:
            return _run_in(opts, p, runtime, reason, console)
        finally:
            cgroup.leave(group)


def _run_in(opts: RunOptions, p: RunPlan, runtime: Runtime, reason: str, console: Console) -> int:
    exp = p.experiment
    if opts.into:
        out_dir = opts.into
    else:
        out_dir = results.new_results_dir(opts.out, exp.name)
        results.point_latest(out_dir)  # at once: an interrupted run's rows are results too
    if runtime == Runtime.UML and not probe.in_uml_guest():
        console.print(f"runtime: uml ({reason}); booting a User-Mode Linux guest")
        inner = ["run", str(opts.experiment.resolve()), "--runtime", "host", "--into", str(out_dir.resolve()),
                 "--shaper", opts.shaper, *[f"--set={o}" for o in opts.overrides]]
        if opts.repetitions:
            inner += ["--repetitions", str(opts.repetitions)]
        mounts = [out_dir.resolve(), opts.experiment.resolve().parent]
        if exp.topology.file:
            mounts.append(Path(exp.topology.file).resolve().parent)
        attach = None
        if any(n.image for n in exp.topology.nodes.values()):
            from functools import partial

            from wearlab.realize.containers import for_guest
            attach = partial(for_guest, exp.topology)
        rc = placement.rerun_in_guest(inner, mounts=mounts, attach=attach)
    else:
        from wearlab.run.runner import run_experiment

        if not probe.in_uml_guest():
            console.print(f"runtime: host ({reason})")
        rc = run_experiment(p, out_dir, runtime_label="uml" if probe.in_uml_guest() else runtime.value,
                            console=console)
    if not probe.in_uml_guest() and (out_dir / "series").is_dir():
        # Drawn here, on the host: the guest's CPU is the expensive one.
        from wearlab.report.plots import plot_results

        for png in plot_results(out_dir):
            console.print(f"plot: {png}")
    return rc
