"""`wearlab capture` of a running experiment's link during its fetches: a pcapng that tshark reads,
the fetches' packets (TCP to the server's port) on the interfaces named `node:link`; piped into
`head -c` it stops at once and leaves nothing (no capture tcpdump, no socket, no ledger entry);
Ctrl-C stops it the same way; bad input is exit 2 with one clear line.

Two places the run may be: beside the capture in one kernel (the socket channel: the `netem`
step, inside the guest `make test` boots on a host without netem) and in a UML guest of its own
while the capture runs on the host (the guest's serial line: this host step, where the host lacks
netem). Each test runs once, in the step that has its case.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, WEARLAB, need_tool, wearlab
from wearlab.runtime import ledger, probe

EXPERIMENT = """
name: capture-live
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 4Mbit, delay: 10ms}]
repetitions: 300
timeout: 60s
workload: {kind: http-get, client: watch, server: server, protocol: http, size: 1MB}
"""
NAMES = {"watch:watch-server", "server:watch-server"}


def _host_lacks_netem() -> bool:
    return not probe.in_uml_guest() and not probe.netem_works()


@pytest.fixture(scope="module", params=[
    pytest.param("same-kernel", marks=pytest.mark.netem),
    pytest.param("uml", marks=[pytest.mark.root, pytest.mark.skipif(
        not _host_lacks_netem(), reason="the run shares this kernel here (the netem case covers it)")]),
])
def live_run(request, tmp_path_factory):
    """A `wearlab run` fetching 1 MB files over a 4 Mbit/s link, live until the module ends."""
    tmp = tmp_path_factory.mktemp("capture")
    (tmp / "exp.yaml").write_text(EXPERIMENT)
    out = tmp / "r"
    runtime = ["--runtime", "uml"] if request.param == "uml" else []
    run = subprocess.Popen([*WEARLAB, "run", str(tmp / "exp.yaml"), "--out", str(out), *runtime], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while not list(out.glob("*/*/control/heartbeat")):
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline, "the run never became live"
            time.sleep(0.1)
        yield out
    finally:
        run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def _server_port(out: Path) -> int:
    plan = json.loads(next(out.glob("*/*/plan.json")).read_text())
    ports = {int(p): what for entry in plan["ports"] for p, what in entry.get("server", {}).items()}
    return min(p for p, what in ports.items() if what.endswith(" http"))


def _captures(out: Path) -> dict:
    from wearlab.run import control
    return control.request(out, {"action": "capture", "list": True})


def _wait_nothing_left(out: Path, timeout: float = 10.0) -> float:
    t0 = time.monotonic()
    while True:
        now = _captures(out)
        if not now["sessions"] and not now["capture_tcpdumps"]:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"left behind: {now}"
        time.sleep(0.05)


def test_a_link_during_a_fetch(live_run, tmp_path):
    tshark = need_tool("tshark")
    f = tmp_path / "fetch.pcapng"
    res = wearlab("capture", "watch-server", "--results", str(live_run), "-c", "1500", "-w", str(f), timeout=60)
    assert res.returncode == 0, res.stderr
    assert "capturing on watch:watch-server (watch eth0), server:watch-server (server eth0)" in res.stderr
    assert "1500 packets captured" in res.stderr, res.stderr
    fields = subprocess.run([tshark, "-r", str(f), "-T", "fields", "-E", "separator=/t", "-e", "frame.interface_name",
                             "-e", "frame.interface_description", "-e", "tcp.srcport", "-e", "tcp.dstport",
                             "-e", "tcp.seq_raw", "-e", "tcp.len"],
                            capture_output=True, text=True, timeout=60)
    assert fields.returncode == 0, fields.stderr
    rows = [line.split("\t") for line in fields.stdout.splitlines()]
    assert len(rows) == 1500
    assert {r[0] for r in rows} == NAMES
    assert {r[1] for r in rows} == {"watch eth0, link watch-server, to server", "server eth0, link watch-server, to watch"}
    port = str(_server_port(live_run))
    data = {name: {(r[4], r[5]) for r in rows if r[0] == name and r[2] == port and r[5] not in ("", "0")}
            for name in NAMES}
    # The server's data segments of the fetch, sent on the server's end and received on the watch's.
    assert len(data["server:watch-server"]) > 100 and len(data["watch:watch-server"]) > 100, \
        {k: len(v) for k, v in data.items()}
    assert len(data["server:watch-server"] & data["watch:watch-server"]) > 100
    assert any(r[3] == port for r in rows if r[0] == "watch:watch-server")      # the watch's requests/ACKs


def test_head_c_stops_it_and_nothing_is_left(live_run):
    entries = len(ledger.entries())
    cap = subprocess.Popen([*WEARLAB, "capture", "watch-server", "--results", str(live_run), "-w", "-"], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        got = b""
        while len(got) < 100_000:                       # what `head -c 100000` does ...
            chunk = cap.stdout.read1(100_000 - len(got))
            assert chunk, cap.stderr.read().decode()
            got += chunk
        cap.stdout.close()                              # ... then it exits: the pipe closes
        t = time.monotonic()
        rc = cap.wait(timeout=10)
        stop_s = time.monotonic() - t
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    err = cap.stderr.read().decode()
    assert rc == 0 and "the reader closed the pipe" in err and "Traceback" not in err, err
    assert got[:4] == bytes.fromhex("0a0d0d0a")         # a pcapng section
    left_s = _wait_nothing_left(live_run)
    assert not [p for p in Path("/run/wearlab/capture").glob(f"{cap.pid}-*")]
    assert len(ledger.entries()) == entries
    print(f"stopped {stop_s * 1000:.0f} ms after the pipe closed; the run's side {left_s * 1000:.0f} ms later")
    assert stop_s < 3.0


def test_ctrl_c_stops_it(live_run, tmp_path):
    tshark = need_tool("tshark")
    f = tmp_path / "c.pcapng"
    cap = subprocess.Popen([*WEARLAB, "capture", "server", "--results", str(live_run), "-w", str(f)], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = cap.stderr.readline()                     # capturing on ...: every tcpdump listens
        assert line.startswith("capturing on server:watch-server"), line + cap.stderr.read()
        cap.send_signal(signal.SIGINT)
        assert cap.wait(timeout=10) == 130
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    assert "Traceback" not in cap.stderr.read()
    assert subprocess.run([tshark, "-r", str(f)], capture_output=True, timeout=60).returncode == 0
    _wait_nothing_left(live_run)


@pytest.mark.parametrize("target, message", [
    ("watch-moon", "no node or link 'watch-moon' (nodes: watch, server; links: watch-server)"),
    ("moon:eth0", "no node 'moon'"),
    ("watch:eth7", "node 'watch' has no interface 'eth7' (its interfaces: eth0 = watch-server)"),
])
def test_what_does_not_exist_is_refused(live_run, target, message):
    res = wearlab("capture", target, "--results", str(live_run), "-w", os.devnull, timeout=60)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr, res.stderr


def test_nothing_running_is_a_clear_error(tmp_path):
    res = wearlab("capture", "watch-phone", "--results", str(tmp_path), "-w", os.devnull)
    assert res.returncode == 2 and "no running experiment" in res.stderr and "Traceback" not in res.stderr, res.stderr
