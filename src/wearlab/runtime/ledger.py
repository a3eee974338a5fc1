"""A ledger of what wearlab made on this machine, so `wearlab clean` removes it and only it.

Each live run or guest has one JSON file under /run/wearlab/made (tmpfs: gone at reboot, as are
the things it lists). Processes wearlab starts in namespaces carry WEARLAB_RUN in their
environment as a second, ledger-independent way to find them after a `kill -9`.

Every entry names its owner: the wearlab process that made it (`owner_pid`) and that process's
start time (`owner_start`, so a PID the kernel reused for another program is not mistaken for
the owner). An entry whose owner is gone belongs to a run that died without cleaning up
(`kill -9`, a crash): `wearlab.run.cleanup.heal` removes it and what it lists.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil

LEDGER = Path(os.environ.get("WEARLAB_LEDGER", "/run/wearlab/made"))
MARK_ENV = "WEARLAB_RUN"


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def record(kind: str, ident: str, **facts) -> None:
    LEDGER.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    entry = {"kind": kind, "id": ident, "owner_pid": pid, "owner_start": _start_time(pid), **facts}
    tmp = LEDGER / f".{kind}-{ident}.tmp"
    tmp.write_text(json.dumps(entry))
    tmp.replace(LEDGER / f"{kind}-{ident}.json")


def forget(kind: str, ident: str) -> None:
    (LEDGER / f"{kind}-{ident}.json").unlink(missing_ok=True)


def entries() -> list[dict]:
    out = []
    if LEDGER.is_dir():
        for f in sorted(LEDGER.glob("*.json")):
            try:
                out.append(json.loads(f.read_text()) | {"_file": str(f)})
            except (OSError, ValueError):
                out.append({"kind": "corrupt", "_file": str(f)})
    return out


def process_alive(pid: int, started: float | None = None) -> bool:
    """Whether `pid` runs (not a zombie) and, given its start time, is still that process."""
    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(p.create_time() - started) < 0.05
    except psutil.Error:
        return False


def owner_alive(entry: dict) -> bool:
    """Whether the process that wrote a ledger entry still runs. A corrupt entry has no owner."""
    pid = entry.get("owner_pid")
    if not isinstance(pid, int):
        return False
    return process_alive(pid, entry.get("owner_start"))
