"""Where a command runs: the runtime choice (`auto` = host when netem works there, else uml) and
running inside a UML guest - a `wearlab run`'s job (`rerun_in_guest`: the job is data in the
guest's job directory, which the guest's `wearlab guest-run` reads; see run.start), or
`wearlab runtime-exec`'s command. The CLI only parses; this decides and launches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from wearlab.errors import EnvironmentProblem
from wearlab.model.choices import Runtime
from wearlab.runtime import probe, signals, uml

JOB_FILE = "run.json"   # a `wearlab run`'s job in the guest's job directory (run.start.GuestJob)


def choose(requested: Runtime | str) -> tuple[Runtime, str]:
    """(runtime, reason) for a requested runtime."""
    requested = Runtime(requested)
    # Truly "where am I": a user's command inside a guest (`wearlab runtime-exec -- ...`, the
    # guest's test suite) runs on the guest's kernel, whatever it asks. A run the host sent into
    # a guest never asks: its job says the plan's runtime (run.start.run_guest_job).
    if probe.in_uml_guest():
        return Runtime.HOST, "already inside a UML guest"
    if requested != Runtime.AUTO:
        return requested, "requested"
    p = probe.probe_qdisc("netem")
    if p.works:
        return Runtime.HOST, f"netem works on this kernel ({probe.kernel_release()})"
    try:
        uml.check_ready()
    except EnvironmentProblem as e:
        raise EnvironmentProblem(f"this kernel lacks sch_netem ({p.detail}) and the uml runtime is not "
                                 f"ready: {e}") from None
    return Runtime.UML, f"this kernel ({probe.kernel_release()}) lacks sch_netem: {p.detail}"


def project_paths() -> list[Path]:
    """What a guest must see of the host for wearlab to run in it: the checkout and the venv."""
    pkg = Path(__file__).resolve().parent.parent
    root = pkg.parent.parent if pkg.parent.name == "src" else pkg.parent
    return [root, Path(sys.prefix).resolve()]


def rerun_in_guest(job: Mapping, *, mounts: list[Path], attach: Callable | None = None) -> int:
    """A `wearlab run`'s `job` (JSON data) in a fresh guest: written to JOB_FILE in the guest's job
    directory, read there by `python -m wearlab guest-run JOB_FILE`, run from the same working
    directory with the project and `mounts` at the same paths. `attach`: see uml.run_in_guest
    (container nodes)."""
    def command(job_dir: Path) -> list[str]:
        (job_dir / JOB_FILE).write_text(json.dumps(job, indent=1) + "\n")
        return [sys.executable, "-m", "wearlab", "guest-run", str(job_dir / JOB_FILE)]

    return uml.run_in_guest(command, mounts=[*project_paths(), *mounts], cwd=Path.cwd(),
                            env={"WEARLAB_ARGV": os.environ.get("WEARLAB_ARGV", "")}, attach=attach)


def exec_where_network_lives(argv: list[str], requested: Runtime | str, say: Callable[[str], None]) -> int:
    """`wearlab runtime-exec`: run argv where the emulated network would live."""
    runtime, reason = choose(requested)
    if runtime == Runtime.UML:
        say(f"runtime: uml ({reason})")
        with signals.interruptible():
            return uml.run_in_guest(argv, mounts=project_paths(), cwd=Path.cwd())
    return subprocess.run(argv, check=False).returncode
