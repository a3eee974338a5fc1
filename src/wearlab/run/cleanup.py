"""Removing what wearlab made, and only that: `heal()` for runs that died, `clean()` for all.

`heal()` runs before every `wearlab run` (and before the tests' "machine clean" check): it removes
the state of wearlab processes that no longer exist - a run killed with -9, a crashed one, a
guest whose host process died - and never anything of a run that is alive:
- ledger entries (/run/wearlab/made) whose owner is gone, with what they list: work directories,
  the processes marked with their run id, their UML guest, their containers and host veths;
- UML job directories (/run/wearlab/jobs/wearlab-<pid>-...) whose host process is gone;
- run cgroups (wearlab/run-<pid>) whose `wearlab run` process is gone, with what they still hold;
- PM QoS settings of host CPUs whose holders are all gone (the CPU's previous value restored).

`clean()` (`wearlab clean`) removes everything wearlab made, live runs included. Found six ways:
each run's cgroup (wearlab/<run>, which holds everything the run started, nginx and UML guests
included, where the host has cgroup v2), the ledger, the WEARLAB_RUN mark in process environments
(for networks built by library callers, which join no cgroup), processes in network namespaces
holding wearlab's MAC prefix (daemons that rewrote their environment), the `umid=wearlab-` UML
guests' command lines, and Docker containers labelled `wearlab.run` (container nodes). Namespaces
and veths vanish with their last process; qdiscs live on those veths. Work directories are
/tmp/wearlab-*.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import psutil

from wearlab.realize.netns import kill_marked, namespace_pids
from wearlab.runtime import cgroup, hostcpu, ledger, probe
from wearlab.runtime.uml import JOBS

_JOB_OWNER = re.compile(r"^wearlab-(\d+)-")


def _uml_guests(umid: str | None = None) -> list[int]:
    """Our guests carry our umid on their command line (the kernel binary's name varies with
    its version and configuration); another program's VM does not."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(a == f"umid={umid}" if umid else a.startswith("umid=wearlab-") for a in cmd[1:]):
            found.append(proc.pid)
    return found


def _kill_guest(pid: int) -> None:
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except ProcessLookupError:
        pass


def _remove_entry(entry: dict) -> list[str]:
    """Undo one ledger entry of a dead owner: what it made, then the entry."""
    kind, ident = entry.get("kind"), entry.get("id")
    done = []
    if kind == "uml":
        for pid in _uml_guests(ident):
            _kill_guest(pid)
            done.append(f"UML guest {ident} (pid {pid})")
    elif kind == "net":
        victims = kill_marked(ident)
        if victims:
            done.append(f"{len(victims)} processes of run {ident}")
    elif kind == "container":
        from wearlab.realize import containers

        done += [f"container {c[:12]} of run {ident}" for c in containers.remove(ident)]
    for p in entry.get("paths", []):
        if Path(p).exists():
            shutil.rmtree(p, ignore_errors=True)
            done.append(p)
    Path(entry["_file"]).unlink(missing_ok=True)
    owner = f"pid {entry['owner_pid']}" if "owner_pid" in entry else "no owner"
    done.append(f"ledger entry {Path(entry['_file']).name} ({owner}, no longer running)")
    return done


def _job_owner_alive(job: Path) -> bool:
    m = _JOB_OWNER.match(job.name)
    if m is None:
        return False
    try:
        return "wearlab" in " ".join(psutil.Process(int(m.group(1))).cmdline())
    except psutil.Error:
        return False


def heal() -> list[str]:
    """Remove the state of wearlab processes that died (module doc). Returns what it removed."""
    removed: list[str] = []
    for entry in ledger.entries():
        if entry.get("kind") == hostcpu.KIND or ledger.owner_alive(entry):
            continue
        removed += _remove_entry(entry)
    removed += hostcpu.clean()
    # Inside a guest, /run/wearlab/jobs holds the job of the host process running this very guest
    # (mounted from the host): the host's, never ours to judge.
    if JOBS.is_dir() and not probe.in_uml_guest():
        for job in sorted(JOBS.iterdir()):
            if job.is_dir() and not _job_owner_alive(job):
                for pid in _uml_guests(job.name.rsplit("-", 1)[0]):
                    _kill_guest(pid)
                shutil.rmtree(job, ignore_errors=True)
                removed.append(f"job directory {job}")
    for d in cgroup.orphaned():
        n = cgroup.kill(d)
        removed.append(f"cgroup {d.name} of a run that is gone ({n} processes)")
    return removed


def clean() -> list[str]:
    removed: list[str] = heal()
    for d in cgroup.stale():
        n = cgroup.kill(d)
        removed.append(f"cgroup {d.name} ({n} processes)")
    for entry in ledger.entries():
        if entry.get("kind") == "uml" and entry.get("watchdog_pid"):
            try:  # the watchdog kills its guest's process group on SIGTERM
                os.kill(int(entry["watchdog_pid"]), signal.SIGTERM)
                removed.append(f"UML guest {entry['id']} (watchdog {entry['watchdog_pid']})")
            except ProcessLookupError:
                pass
    for pid in _uml_guests():
        _kill_guest(pid)
        removed.append(f"UML guest process {pid}")
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
    for entry in ledger.entries():
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
