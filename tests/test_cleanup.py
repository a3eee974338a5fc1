"""`kill -9` of a running experiment, then `wearlab clean`: nothing is left behind, the rows
already measured are kept, and the next run works."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from conftest import ROOT, WEARLAB, wearlab
from wearlab.realize.addressing import MAC_PREFIX
from wearlab.realize.network import marked_pids, namespace_pids
from wearlab.runtime import registry

EXPERIMENT = """
name: killme
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 2Mbit, delay: 10ms}}]
repetitions: {reps}
workload: {{kind: http-get, client: watch, server: server, protocol: http}}
matrix: {{size: [200KB]}}
"""


def _leftovers() -> list[str]:
    """What wearlab (or these tests) made and left: never a user's nginx or another program's VM."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and \
                any(a.startswith("umid=wearlab-") for a in proc.info["cmdline"] or []):
            found.append(f"guest[{proc.pid}]")
    found += [f"in a wearlab namespace[{p}]" for p in namespace_pids()]
    found += [f"marked[{p}]" for p in marked_pids()]
    found += [str(p) for p in Path("/tmp").glob("wearlab-*")]
    found += [e["_file"] for e in registry.entries()]
    found += [f"cpu{e['cpu']} still polls (pm_qos)" for e in registry.entries() if e.get("kind") == "pmqos"]
    netns = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if n.startswith(("wearlab", "wl"))]
    if netns:
        found.append(f"netns: {netns}")
    veths = [l for l in subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                                       text=True).stdout.splitlines() if MAC_PREFIX in l]
    if veths:
        found.append(f"veths: {veths}")
    return found


def _start_and_signal(tmp_path: Path, sig: int) -> tuple[Path, Path, int]:
    """Start a long experiment, wait until two runs are written, send `sig`.
    Returns (experiment file, runs.csv, exit status)."""
    assert _leftovers() == [], "machine not clean before the test"
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
        p.send_signal(sig)
        rc = p.wait(timeout=120)
    return exp, runs, rc


def _kill9_then_clean(tmp_path: Path) -> None:
    exp, runs, _ = _start_and_signal(tmp_path, signal.SIGKILL)
    out = tmp_path / "results"
    kept = len(runs.read_text().splitlines()) - 1
    assert kept >= 2
    res = wearlab("clean")
    assert res.returncode == 0, res.stderr
    deadline = time.monotonic() + 10
    while _leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _leftovers() == []
    assert len(runs.read_text().splitlines()) - 1 >= kept  # measured rows are never lost
    exp.write_text(EXPERIMENT.format(reps=1))
    res = wearlab("run", str(exp), "--out", str(out), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert _leftovers() == []


@pytest.mark.root
def test_kill9_then_clean(tmp_path):
    """Wherever pytest runs: on a kernel without netem this kills the host side of a UML run."""
    _kill9_then_clean(tmp_path)


@pytest.mark.netem
def test_kill9_then_clean_with_namespaces(tmp_path):
    """On a netem kernel (the UML guest here): node shells, nginx, tcpdump must all go."""
    _kill9_then_clean(tmp_path)


def _interrupt(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) mid-experiment: exit 130, the rows so far kept, status recorded, nothing left."""
    _, runs, rc = _start_and_signal(tmp_path, signal.SIGINT)
    out = tmp_path / "results"
    assert rc == 130
    meta = json.loads((out / "killme" / "latest" / "metadata.json").read_text())
    assert meta["status"].startswith("interrupted")
    assert len(runs.read_text().splitlines()) - 1 >= 2
    assert (out / "killme" / "latest" / "summary.json").exists()
    assert _leftovers() == []


@pytest.mark.root
def test_ctrl_c_keeps_results_and_cleans_up(tmp_path):
    _interrupt(tmp_path)


@pytest.mark.netem
def test_ctrl_c_keeps_results_and_cleans_up_with_namespaces(tmp_path):
    _interrupt(tmp_path)
