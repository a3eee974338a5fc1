"""`wearlab reproduce` (`make reproduce`) on a small suite: the estimate first, Ctrl-C, then the same
command again continues - the interrupted experiment resumed in its own results directory, the
next one run - and a third time finds everything complete and runs nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, WEARLAB, wearlab

EXPERIMENT = """
name: {name}
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 2Mbit, delay: 5ms}}]
repetitions: 3
seed: 3
timeout: 30s
workload: {{kind: http-get, client: watch, server: server}}
matrix: {{protocol: [http, https], size: [400KB]}}
full: {{repetitions: 30, note: "a paper's 30"}}
"""


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("one", "two"):
        (suite / f"{name}.yaml").write_text(EXPERIMENT.format(name=name))
    (suite / "claims.yaml").write_text("claims: []\n")
    return suite


@pytest.mark.root
def test_reproduce_interrupted_continues_and_then_has_nothing_to_do(tmp_path):
    suite, out = _suite(tmp_path), tmp_path / "results"
    argv = [*WEARLAB, "reproduce", str(suite), "--out", str(out), "--runtime", "uml"]
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    runs = out / "one" / "latest" / "runs.csv"
    deadline = time.monotonic() + 300
    try:
        while not (runs.exists() and len(runs.read_text().splitlines()) >= 2):
            assert time.monotonic() < deadline, "no run finished in time"
            assert p.poll() is None, "the suite ended before it could be interrupted"
            time.sleep(0.1)
    finally:
        os.killpg(p.pid, signal.SIGINT)            # Ctrl-C: the terminal's whole foreground group
        said, _ = p.communicate(timeout=180)
    assert p.returncode == 130, said
    first = said.splitlines()
    assert first[0].startswith("estimate"), said    # the estimate first
    assert any("12 runs" in line for line in first), said
    assert any("FULL=1" in line and "120 runs" in line for line in first), said
    assert "run the same command again" in said
    kept = len(runs.read_text().splitlines()) - 1
    assert 1 <= kept < 6
    interrupted = runs.resolve().parent

    res = wearlab(*argv[3:], timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert (out / "one" / "latest").resolve() == interrupted       # resumed in place
    meta = json.loads((interrupted / "metadata.json").read_text())
    assert meta["resumed"] == {"runs_kept": kept, "runs_to_run": 6 - kept}
    for name in ("one", "two"):
        rows = (out / name / "latest" / "runs.csv").read_text().splitlines()[1:]
        assert len(rows) == 6 and all(",ok," in r for r in rows), rows
    first, record = json.loads((out / "reproduce.json").read_text())["sessions"]
    assert [e["exit"] for e in first["experiments"]] == [130]
    assert [e["experiment"] for e in record["experiments"]] == ["one", "two"]
    assert all(e["exit"] == 0 and e["runs_ok"] == 6 for e in record["experiments"])

    res = wearlab(*argv[3:], timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("complete:") == 2, res.stdout
    assert "0 runs" in res.stdout
