"""`wearlab link` changes a running experiment's link at once: the next messages of a CBR stream
carry the new delay from the logged moment on, the change is in the run's timeline log, and it
took a bounded time from request to kernel (<= 100 ms on a quiet machine: bench_timeline). Bad requests are exit 2 and leave the run alone."""

from __future__ import annotations

import csv
import subprocess
import time

import pytest

from conftest import BUSY_SLACK_S, ROOT, WEARLAB, wearlab

# Request -> kernel on a busy machine: the runner polls every 20 ms, then one tc round trip, both
# possibly waiting for the guest's vCPU; half a second still reads as "at once" in a classroom.
LIVE_MS_BUSY = 500

EXPERIMENT = """
name: live
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 10Mbit, delay: 20ms}]
repetitions: 1
workload: {kind: stream, client: watch, server: server, direction: down, pattern: cbr,
           rate: 80kbit, message_size: 100, duration: 15s}
"""


def test_no_running_experiment_is_a_clear_error(tmp_path):
    res = wearlab("link", "show", "--results", str(tmp_path))
    assert res.returncode == 2 and "no running experiment" in res.stderr


@pytest.mark.parametrize("argv, message", [
    (["set", "watch-server", "dealy=1ms"], "dealy"),
    (["set", "watch-server"], "KEY=VALUE"),
    (["down"], "needs a link"),
])
def test_bad_requests_are_refused_before_sending(tmp_path, argv, message):
    res = wearlab("link", *argv, "--results", str(tmp_path))
    assert res.returncode == 2 and message in res.stderr, res.stderr


@pytest.mark.netem
def test_live_set_changes_the_next_messages(tmp_path):
    (tmp_path / "exp.yaml").write_text(EXPERIMENT)
    out = tmp_path / "r"
    run = subprocess.Popen([*WEARLAB, "run", str(tmp_path / "exp.yaml"), "--out", str(out)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("live/*/control/heartbeat")):
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read() if run.poll() is not None else "no heartbeat"
            time.sleep(0.05)
        time.sleep(4.0)   # into the run (setup takes ~1-2 s)
        bad = wearlab("link", "set", "watch-moon", "delay=1ms", "--results", str(out))
        assert bad.returncode == 2 and "no link 'watch-moon'" in bad.stderr, bad.stderr
        res = wearlab("link", "set", "watch-server", "delay=60ms", "--direction", "server->watch", "--results", str(out))
        assert res.returncode == 0, res.stdout + res.stderr
        assert "applied: server->watch set delay" in res.stdout
        shown = wearlab("link", "show", "--results", str(out))
        assert shown.returncode == 0 and "60ms" in shown.stdout, shown.stdout
        assert run.wait(timeout=120) == 0, run.stdout.read()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    d = out / "live" / "latest"
    assert not (d / "control").exists()
    with (d / "series" / "timeline.csv").open() as f:
        (change,) = [r for r in csv.DictReader(f) if r["source"] == "live"]
    with (d / "series" / "owd.csv").open() as f:
        owd = [(float(r["t_send_s"]), float(r["owd_s"])) for r in csv.DictReader(f)]
    with (d / "runs.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["link_changes"]) == 1
    t = float(change["t_s"])
    assert 2.0 < t < 14.0, t            # into the 15 s run, after the test's 4 s wait
    frame = (100 + 66) * 8 / 10e6
    before = [o for s, o in owd if s < t - 0.001]
    after = [o for s, o in owd if s > t + 0.001]
    assert before and after
    assert max(sorted(before)[: int(0.9 * len(before))]) <= 0.020 + frame + BUSY_SLACK_S
    assert min(after) >= 0.060 + frame - 0.0005          # every message after the change: the new delay
    assert "took" not in change["error"]


@pytest.mark.netem
def test_live_control_latency_is_bounded(tmp_path):
    """Request -> kernel within LIVE_MS_BUSY even beside a busy CPU (the quiet-machine target,
    <= 100 ms, is bench/bench_timeline.py's, which fails when missed)."""
    (tmp_path / "exp.yaml").write_text(EXPERIMENT.replace("duration: 15s", "duration: 10s"))
    out = tmp_path / "r"
    run = subprocess.Popen([*WEARLAB, "run", str(tmp_path / "exp.yaml"), "--out", str(out)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("live/*/control/heartbeat")):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(3.0)
        from wearlab.run import control
        latencies = []
        for delay in ("30ms", "40ms", "20ms"):
            ans = control.request(out, {"action": "set", "link": "watch-server", "set": {"delay": delay}})
            assert ans["ok"], ans
            latencies.append(ans["latency_ms"])
        assert all(0 < x <= LIVE_MS_BUSY for x in latencies), latencies
    finally:
        run.wait(timeout=120)


CLASSROOM = """
name: classroom
topology: {topology}
repetitions: 1
seed: 3
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 150kbit, message_size: 3KB, duration: 16s, reconnect: rtapp}}
nodes:
  watch: {{radio: bt, uplink_keepalive: true, handover: reactive, walk_start: manual, walk_speed: 20,
          p1: 1s, p2: 1s, p3: 1s}}
"""


@pytest.mark.netem
def test_classroom_controls_top_radio_and_handover_now(tmp_path):
    (tmp_path / "exp.yaml").write_text(CLASSROOM.format(topology=ROOT / "topologies" / "handover.yaml"))
    out = tmp_path / "r"
    run = subprocess.Popen([*WEARLAB, "run", str(tmp_path / "exp.yaml"), "--out", str(out)], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("classroom/*/control/heartbeat")):
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read() if run.poll() is not None else ""
            time.sleep(0.05)
        time.sleep(4.0)
        top = wearlab("top", "--once", "--results", str(out))
        assert top.returncode == 0 and "main down" in top.stdout and "radio: active" in top.stdout, top.stdout
        sleep = wearlab("radio", "sleep", "--results", str(out))
        assert sleep.returncode == 0 and "sleep requested" in sleep.stdout, sleep.stdout + sleep.stderr
        time.sleep(2.0)
        now = wearlab("handover", "now", "--results", str(out))
        assert now.returncode == 0 and "starts walking away now" in now.stdout, now.stdout + now.stderr
        again = wearlab("handover", "now", "--results", str(out))
        assert "walking away already" in again.stdout
        assert run.wait(timeout=120) == 0, run.stdout.read()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    d = out / "classroom" / "latest"
    with (d / "series" / "radio.csv").open() as f:
        radio = list(csv.DictReader(f))
    forced = [r for r in radio if r["reason"] == "forced: wearlab radio sleep"]
    assert len(forced) == 1
    # The usual rules bring it back: the phone's request after a recovery of 0.5-1.2 s, or - when
    # the watch has something to send first (the keepalive of this experiment) - its own wake-up
    # after watch_wake, 0.1 s. Either way the radio is asleep until then.
    after = [r for r in radio if float(r["t_s"]) > float(forced[0]["t_s"])]
    waking = next(r for r in after if r["state"] == "waking")
    active = next(r for r in after if r["state"] == "active")
    assert float(waking["t_s"]) < float(active["t_s"])
    recovery = float(waking["recovery_s"])
    if waking["reason"] == "phone request":
        assert 0.5 <= recovery <= 1.2
    else:
        assert waking["reason"] == "watch transmits" and recovery == pytest.approx(0.1)
    assert recovery <= float(active["t_s"]) - float(waking["t_s"]) <= recovery + 0.1
    with (d / "series" / "handover.csv").open() as f:
        events = list(csv.DictReader(f))
    walk = next(e for e in events if e["event"] == "walk")
    assert "waiting" in [e["event"] for e in events]
    assert any(e["event"] == "WiFi connected" for e in events)
    with (d / "series" / "timeline.csv").open() as f:
        logged = [r["change"] for r in csv.DictReader(f) if r["source"] == "live"]
    assert any(c.startswith("radio sleep") for c in logged) and any(c.startswith("handover now") for c in logged)
    assert walk
