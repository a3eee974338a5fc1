"""One cgroup (v2) per wearlab run, so `wearlab clean` can kill everything a run started —
including daemons that double-fork and rewrite their environment (nginx), which no PID file or
environment mark follows reliably. cgroup.kill (Linux >= 5.14) kills a whole cgroup at once.

Only the `wearlab run` process joins (its children inherit); libraries calling network.build()
directly are not moved, so a test harness never ends up inside a cgroup that clean kills.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

NAME = "wearlab"


def cgroup2_root() -> Path | None:
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return Path(parts[1])
    except OSError:
        pass
    return None


def base() -> Path | None:
    root = cgroup2_root()
    return None if root is None else root / NAME


def join(run_id: str) -> Path | None:
    """Move this process (and so its future children) into wearlab/<run_id>; None if no cgroup2."""
    b = base()
    if b is None or os.geteuid() != 0:
        return None
    try:
        d = b / run_id
        d.mkdir(parents=True, exist_ok=True)
        (d / "cgroup.procs").write_text(str(os.getpid()))
        return d
    except OSError:
        return None


def own_cgroups() -> set[Path]:
    root = cgroup2_root()
    out = set()
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::") and root is not None:
                out.add(root / line[3:].lstrip("/"))
    except OSError:
        pass
    return out


def kill(d: Path, timeout: float = 10.0) -> int:
    """Kill every process in cgroup d and remove it. Returns how many processes it held."""
    try:
        n = len((d / "cgroup.procs").read_text().split())
    except OSError:
        return 0
    kill_file = d / "cgroup.kill"
    if kill_file.exists():
        kill_file.write_text("1")
    else:  # kernels before 5.14: signal each member
        for pid in (d / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            d.rmdir()
            break
        except OSError:
            time.sleep(0.05)
    return n


def leave(d: Path | None) -> None:
    """Back to the root cgroup, then remove ours (killing anything still in it)."""
    if d is None:
        return
    root = cgroup2_root()
    try:
        (root / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return
    kill(d)


RUN_PREFIX = "run-"


def run_name(pid: int) -> str:
    return f"{RUN_PREFIX}{pid}"


def orphaned() -> list[Path]:
    """Run cgroups whose `wearlab run` process is no longer in them (it died: kill -9, a crash).
    What they still hold (nginx daemons, node shells) has no owner left to stop it."""
    b = base()
    if b is None or not b.is_dir():
        return []
    out = []
    for d in sorted(b.iterdir()):
        if not (d.is_dir() and d.name.startswith(RUN_PREFIX) and d.name[len(RUN_PREFIX):].isdigit()):
            continue
        try:
            members = (d / "cgroup.procs").read_text().split()
        except OSError:
            continue
        pid = d.name[len(RUN_PREFIX):]
        # Not in it and not running: dead. (A live run is outside its cgroup only for a moment,
        # while joining or leaving it.)
        if pid not in members and not Path(f"/proc/{pid}").exists():
            out.append(d)
    return out


def stale() -> list[Path]:
    """wearlab cgroups other than the one we are in."""
    b = base()
    if b is None or not b.is_dir():
        return []
    mine = own_cgroups()
    return [d for d in sorted(b.iterdir()) if d.is_dir() and d not in mine]
