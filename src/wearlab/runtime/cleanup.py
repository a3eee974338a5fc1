"""`wearlab clean`: remove what wearlab made, and only that.

Found six ways: each run's cgroup (wearlab/<run>, which holds everything the run started, nginx
and UML guests included, where the host has cgroup v2), the ledger (/run/wearlab/made), the
WEARLAB_RUN mark in process environments (for networks built by library callers, which join no
cgroup), processes in network namespaces holding wearlab's MAC prefix (daemons that rewrote their
environment), the `umid=wearlab-` UML guests' command lines, and Docker containers labelled
`wearlab.run` (container nodes). Namespaces and veths vanish with their last process; qdiscs live on
those veths. Work directories are /tmp/wearlab-*.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import psutil

from wearlab.realize.network import kill_marked, namespace_pids
from wearlab.runtime import cgroup, hostcpu, registry


def _uml_guests() -> list[int]:
    """Our guests carry our umid on their command line (the kernel binary's name varies with
    its version and configuration); another program's VM does not."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(a.startswith("umid=wearlab-") for a in cmd[1:]):
            found.append(proc.pid)
    return found


def clean() -> list[str]:
    removed: list[str] = []
    for d in cgroup.stale():
        n = cgroup.kill(d)
        removed.append(f"cgroup {d.name} ({n} processes)")
    for entry in registry.entries():
        if entry.get("kind") == "uml" and entry.get("watchdog_pid"):
            try:  # the watchdog kills its guest's process group on SIGTERM
                os.kill(int(entry["watchdog_pid"]), signal.SIGTERM)
                removed.append(f"UML guest {entry['id']} (watchdog {entry['watchdog_pid']})")
            except ProcessLookupError:
                pass
    for pid in _uml_guests():
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
            removed.append(f"UML guest process {pid}")
        except ProcessLookupError:
            pass
    from wearlab.realize import containers

    removed += [f"container {c[:12]}" for c in containers.remove(None)]
    victims = kill_marked(None)
    strays = [p for p in namespace_pids() if p not in victims]
    for p in strays:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    victims += strays
    if victims:
        removed.append(f"{len(victims)} processes in wearlab namespaces (pids {', '.join(map(str, victims[:10]))}"
                       f"{', ...' if len(victims) > 10 else ''})")
    removed += hostcpu.clean()
    for entry in registry.entries():
        if entry.get("kind") == hostcpu.KIND:
            continue  # live holders' entries stay (their runs restore the setting)
        for p in entry.get("paths", []):
            if Path(p).exists():
                shutil.rmtree(p, ignore_errors=True)
                removed.append(p)
        Path(entry["_file"]).unlink(missing_ok=True)
    for p in Path("/tmp").glob("wearlab-*"):
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(str(p))
    return removed
