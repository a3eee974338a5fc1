"""The guest's CPU polls while a guest runs, and gets its setting back however the run ends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wearlab.runtime import hostcpu, ledger


@pytest.fixture
def fake_cpu(tmp_path, monkeypatch):
    qos = tmp_path / "pm_qos_resume_latency_us"
    qos.write_text("0")
    monkeypatch.setattr(hostcpu, "_qos_file", lambda cpu: qos)
    monkeypatch.setattr(ledger, "LEDGER", tmp_path / "ledger")
    monkeypatch.setenv("WEARLAB_HOST_IDLE", "poll")
    if os.geteuid() != 0:
        pytest.skip("needs root")
    return qos


def test_polls_inside_and_restores_after(fake_cpu):
    with hostcpu.low_latency_idle(1) as what:
        assert fake_cpu.read_text() == "n/a"
        assert "polls" in what
    assert fake_cpu.read_text() == "0"
    assert ledger.entries() == []


def test_nested_holders_restore_only_when_the_last_leaves(fake_cpu):
    with hostcpu.low_latency_idle(1):
        with hostcpu.low_latency_idle(1):
            pass
        assert fake_cpu.read_text() == "n/a"  # the outer run still needs it
    assert fake_cpu.read_text() == "0"  # the value from before wearlab, not "n/a"


def test_clean_restores_after_a_holder_was_killed(fake_cpu):
    # A holder that dies without its finally (kill -9): a dead pid in the ledger.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    ledger.LEDGER.mkdir(parents=True, exist_ok=True)
    (ledger.LEDGER / f"pmqos-cpu1-{dead.pid}.json").write_text(
        f'{{"kind": "pmqos", "id": "cpu1-{dead.pid}", "owner_pid": {dead.pid}, "cpu": 1, "previous": "0"}}')
    fake_cpu.write_text("n/a")
    assert hostcpu.clean() == ["cpu1 idle setting restored (0)"]
    assert fake_cpu.read_text() == "0" and ledger.entries() == []


def test_default_idle_mode_leaves_the_cpu_alone(fake_cpu, monkeypatch):
    monkeypatch.setenv("WEARLAB_HOST_IDLE", "default")
    with hostcpu.low_latency_idle(1) as what:
        assert fake_cpu.read_text() == "0" and what == "unchanged"
