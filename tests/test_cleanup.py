"""Ending a running experiment every way it can end early - `kill -9`, Ctrl-C, SIGTERM, a closed
terminal (SIGHUP to its process group), SIGQUIT - leaves nothing behind, keeps the rows already
measured, and the next run works: after a `kill -9` the next `wearlab run` itself removes what
the dead run left (no `wearlab clean` needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, WEARLAB, wearlab
from wearlab.plan.addressing import MAC_PREFIX
from wearlab.runtime import cgroup, ledger, probe
from wearlab.run.cleanup import heal
from wearlab.runtime.uml import JOBS

EXPERIMENT = """
name: killme
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 2Mbit, delay: 10ms}}]
repetitions: {reps}
workload: {{kind: http-get, client: watch, server: server, protocol: http}}
matrix: {{size: [200KB]}}
"""


def pm_qos() -> dict[str, str]:
    """Every CPU's idle setting (a run makes its guest's CPU poll while it lives)."""
    return {str(f): f.read_text().strip() for f in Path("/sys/devices/system/cpu").glob("cpu*/power/pm_qos_resume_latency_us")}


def _leftovers(pid: int, qos_before: dict[str, str] | None = None) -> list[str]:
    """What the wearlab run of process `pid` made and left - and only that: other wearlab runs on
    the machine (a CI job beside a developer's experiment) are theirs, never a user's nginx or
    another program's VM either."""
    tag = f"wearlab-{pid}-"
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and \
                any(a.startswith(f"umid={tag}") for a in proc.info["cmdline"] or []):
            found.append(f"guest[{proc.pid}]")
    for proc in psutil.process_iter():
        try:
            mark = proc.environ().get(ledger.MARK_ENV, "")
        except (psutil.Error, OSError):
            continue
        if mark.startswith(f"{pid}-"):
            found.append(f"marked[{proc.pid}]")
    found += [str(p) for p in Path("/tmp").glob(f"{tag}*")]
    found += [e["_file"] for e in ledger.entries() if e.get("owner_pid") == pid]
    if not probe.in_uml_guest():  # in a guest: the job of the host process running it
        found += [f"job directory {p}" for p in JOBS.glob(f"{tag}*")]
    base = cgroup.base()
    if base is not None and (base / cgroup.run_name(pid)).exists():
        found.append(f"cgroup {base / cgroup.run_name(pid)}")
    holders = [e for e in ledger.entries() if e.get("kind") == "pmqos"]
    if qos_before is not None and not holders:   # another live run may keep a CPU polling, rightly
        found += [f"{f} is {v}, was {qos_before.get(f)}" for f, v in pm_qos().items() if v != qos_before.get(f)]
    # A wearlab veth never sits in the root namespace, whoever made it.
    veths = [l for l in subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                                       text=True).stdout.splitlines() if MAC_PREFIX in l]
    if veths:
        found.append(f"veths: {veths}")
    return found


def machine_clean() -> dict[str, str] | None:
    """The precondition: what runs that died left is healed (as `wearlab run` does). Returns the
    CPUs' idle settings to compare against afterwards."""
    heal()
    if any(e.get("kind") == "pmqos" for e in ledger.entries()):
        return None   # another live run keeps a CPU polling now: its setting is not the machine's own
    return pm_qos()


def _start_and_signal(tmp_path: Path, sig: int, group: bool = False) -> tuple[Path, Path, int, int]:
    """Start a long experiment, wait until two runs are written, send `sig` (to its whole process
    group with `group`, as a closing terminal does). Returns (experiment file, runs.csv, exit
    status, the run's pid)."""
    exp = tmp_path / "killme.yaml"
    exp.write_text(EXPERIMENT.format(reps=100))
    out = tmp_path / "results"
    p = subprocess.Popen([*WEARLAB, "run", str(exp), "--out", str(out)], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = out / "killme" / "latest" / "runs.csv"
    deadline = time.monotonic() + 120
    try:
        while not (runs.exists() and len(runs.read_text().splitlines()) >= 3):
            assert time.monotonic() < deadline, "no run finished in time"
            assert p.poll() is None, "the experiment ended before it could be signalled"
            time.sleep(0.2)
    finally:
        if group:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        rc = p.wait(timeout=120)
    return exp, runs, rc, p.pid


def _kill9_then_clean(tmp_path: Path) -> None:
    qos = machine_clean()
    exp, runs, _, pid = _start_and_signal(tmp_path, signal.SIGKILL)
    out = tmp_path / "results"
    kept = len(runs.read_text().splitlines()) - 1
    assert kept >= 2
    res = wearlab("clean")
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 10
    while _leftovers(pid, qos) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftovers(pid, qos) == []
    assert len(runs.read_text().splitlines()) - 1 >= kept  # measured rows are never lost
    exp.write_text(EXPERIMENT.format(reps=1))
    res = wearlab("run", str(exp), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _leftovers(pid, qos) == []


@pytest.mark.root
def test_kill9_then_clean(tmp_path):
    """Wherever pytest runs: on a kernel without netem this kills the host side of a UML run."""
    _kill9_then_clean(tmp_path)


@pytest.mark.netem
def test_kill9_then_clean_with_namespaces(tmp_path):
    """On a netem kernel (the UML guest here): node shells, nginx, tcpdump must all go."""
    _kill9_then_clean(tmp_path)


def _kill9_then_run(tmp_path: Path) -> None:
    """No `wearlab clean` in between: the next run reports and removes what the dead one left,
    and succeeds."""
    qos = machine_clean()
    exp, runs, _, pid = _start_and_signal(tmp_path, signal.SIGKILL)
    runs = runs.resolve()   # `latest` moves to the next run
    kept = len(runs.read_text().splitlines()) - 1
    left = _leftovers(pid, qos)
    assert left, "a kill -9 left nothing to heal: this test tests nothing"
    exp.write_text(EXPERIMENT.format(reps=1))
    res = wearlab("run", str(exp), "--out", str(tmp_path / "results"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "removed what a dead run left: ledger entry" in res.stderr, res.stderr
    assert _leftovers(pid, qos) == []
    assert len(runs.read_text().splitlines()) - 1 >= kept


@pytest.mark.root
def test_kill9_then_run_heals(tmp_path):
    _kill9_then_run(tmp_path)


@pytest.mark.netem
def test_kill9_then_run_heals_with_namespaces(tmp_path):
    _kill9_then_run(tmp_path)


def _interrupt(tmp_path: Path, sig: int = signal.SIGINT, group: bool = False) -> None:
    """Ctrl-C (SIGINT), SIGTERM, SIGQUIT or a closed terminal (SIGHUP to the process group)
    mid-experiment: exit 130, the rows so far kept, status recorded, nothing left, the CPUs'
    idle settings as before."""
    qos = machine_clean()
    _, runs, rc, pid = _start_and_signal(tmp_path, sig, group)
    out = tmp_path / "results"
    assert rc == 130
    meta = json.loads((out / "killme" / "latest" / "metadata.json").read_text())
    assert meta["status"].startswith("interrupted")
    assert len(runs.read_text().splitlines()) - 1 >= 2
    assert (out / "killme" / "latest" / "summary.json").exists()
    assert _leftovers(pid, qos) == []


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT], ids=lambda s: s.name)
def test_interrupt_keeps_results_and_cleans_up(tmp_path, sig):
    _interrupt(tmp_path, sig)


@pytest.mark.root
def test_hangup_keeps_results_and_cleans_up(tmp_path):
    """A closed terminal: SIGHUP to the run's whole process group."""
    _interrupt(tmp_path, signal.SIGHUP, group=True)


@pytest.mark.netem
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_interrupt_keeps_results_and_cleans_up_with_namespaces(tmp_path, sig):
    _interrupt(tmp_path, sig, group=sig == signal.SIGHUP)
