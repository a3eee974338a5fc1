"""`wearlab deploy` keeps a topology up (under the UML runtime here: this host lacks netem), real
tools the project did not write (ping, iperf3) run in its nodes through `wearlab exec` and meet
the links' configuration, `wearlab shell` is a real terminal (driven in tmux), and every way a
deployment ends - `wearlab destroy`, a hang-up, `kill -9` then the next command - leaves nothing.

One deployment serves the module (booting a guest takes ~10 s); the hang-up and kill -9 tests
make their own.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time

import pytest

from conftest import ROOT, WEARLAB, need_tool, wearlab
from test_cleanup import _leftovers
from wearlab.run import deploy

pytestmark = pytest.mark.root

TOPOLOGY = ROOT / "topologies" / "cproxy.yaml"
NAME = f"wltest-{os.getpid()}"
READY_S = 120
# cproxy.yaml: watch-phone bt-classic (15 ms one-way, 1.1 Mbit/s, queue 50), phone-ap wifi-5g-good
# (2 ms, 50 Mbit/s), ap-server wan (10 ms, 50 Mbit/s). watch -> server crosses all three.
ONE_WAY_MS = 15 + 2 + 10
RTT_MS = 2 * ONE_WAY_MS                      # 54 ms: the lower bound
# A ping is 84 B of IP (+14 B Ethernet: netem's rate counts the frame): 98 B x 8 / 1.1 Mbit/s =
# 0.71 ms per BT crossing, twice; 0.02 ms per 50 Mbit/s crossing, four times. The guest's clock
# ticks at 100 Hz: allow one 10 ms tick of lateness on top.
SERIALISATION_MS = 2 * 98 * 8 / 1.1e3 + 4 * 98 * 8 / 50e3
RTT_MAX_MS = RTT_MS + SERIALISATION_MS + 10
BT_RATE = 1.1e6
# TCP goodput over a 1.1 Mbit/s link: 1448 B of payload per 1514 B frame (timestamps on) ->
# 1.052 Mbit/s at most; 4 s from a cold start lose some of it to slow start.
GOODPUT_MAX = BT_RATE * 1448 / 1514 * 1.02
GOODPUT_MIN = BT_RATE * 0.75


def _start(name: str) -> subprocess.Popen:
    """`wearlab deploy` in a session of its own (as from its own terminal), its output to a file:
    a pipe nobody reads would stop it once full."""
    log = open(f"/tmp/{name}.log", "w+")   # noqa: SIM115 - closed with the process (_log)
    proc = subprocess.Popen([*WEARLAB, "deploy", str(TOPOLOGY), "--name", name], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    proc.log = log
    return proc


def _log(proc: subprocess.Popen) -> str:
    proc.log.seek(0)
    return proc.log.read()


def _wait_ready(proc: subprocess.Popen, name: str) -> dict:
    """Until the deployment's document exists (written once the network is built)."""
    doc = deploy.STATE / name / deploy.DOC
    deadline = time.monotonic() + READY_S
    while not doc.exists():
        if proc.poll() is not None:
            pytest.fail(f"wearlab deploy exited with {proc.returncode}: {_log(proc)}")
        assert time.monotonic() < deadline, "the deployment was not ready in time"
        time.sleep(0.1)
    return json.loads(doc.read_text())


@pytest.fixture(scope="module")
def deployed():
    proc = _start(NAME)
    try:
        yield proc, _wait_ready(proc, NAME)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)


def test_nothing_deployed_or_unknown_name_is_exit_2():
    res = wearlab("exec", "--name", "no-such-deployment", "watch", "--", "true")
    assert res.returncode == 2 and "no deployment named 'no-such-deployment'" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    if not deploy.deployments():
        for argv in (["exec", "watch", "--", "true"], ["shell", "watch"], ["destroy"]):
            res = wearlab(*argv)
            assert res.returncode == 2 and "nothing is deployed" in res.stderr, (argv, res.stderr)


def test_inspect_lists_nodes_interfaces_links(deployed):
    _, doc = deployed
    res = wearlab("inspect", "--name", NAME, "--json")
    assert res.returncode == 0, res.stderr
    (d,) = json.loads(res.stdout)["deployments"]
    assert d["name"] == NAME and d["format"] == 1 and set(d["nodes"]) == {"watch", "phone", "ap", "server"}
    intf = d["nodes"]["watch"]["interfaces"][0]
    assert (intf["name"], intf["ip"], intf["peer"], intf["link"]) == ("eth0", "10.10.0.1", "phone", "watch-phone")
    link = next(l for l in d["links"] if l["name"] == "watch-phone")
    assert link["shapes"]["watch->phone"]["delay"] == "15ms" and link["shapes"]["phone->watch"]["rate"] == "1.1Mbit"
    text = wearlab("inspect", "--name", NAME)
    assert text.returncode == 0 and "watch-phone" in text.stdout and "10.10.0.1/24" in text.stdout


def test_bad_input_is_exit_2(deployed):
    res = wearlab("exec", "--name", NAME, "moon", "--", "true")
    assert res.returncode == 2 and "no node 'moon'" in res.stderr and "watch" in res.stderr, res.stderr
    again = wearlab("deploy", str(TOPOLOGY), "--name", NAME, timeout=60)
    assert again.returncode == 2 and f"already deployed as '{NAME}'" in again.stderr, again.stderr
    for res in (res, again):
        assert "Traceback" not in res.stderr


def test_exec_passes_stdin_stdout_stderr_and_status(deployed):
    res = wearlab("exec", "--name", NAME, "watch", "--", "sh", "-c",
                  'cat; echo "err" >&2; hostname; echo "node=$WEARLAB_NODE"; exit 7', input="from stdin\n")
    assert res.returncode == 7, res.stderr
    assert res.stdout.splitlines() == ["from stdin", "watch", "node=watch"]
    assert res.stderr == "err\n"


def test_ping_rtt_meets_the_links(deployed):
    need_tool("ping")
    res = wearlab("exec", "--name", NAME, "watch", "--", "ping", "-c", "5", "-i", "0.2", "server", timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "from server (10.10.2.2)" in res.stdout   # the name resolves in the node
    rtt_min, _, rtt_max = (float(x) for x in re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", res.stdout).groups())
    print(f"ping watch -> server: min {rtt_min} ms, max {rtt_max} ms (bounds {RTT_MS}-{RTT_MAX_MS:.1f} ms)")
    assert RTT_MS <= rtt_min and rtt_max <= RTT_MAX_MS, res.stdout


def test_iperf3_meets_the_bt_rate(deployed):
    need_tool("iperf3")
    server = subprocess.Popen([*WEARLAB, "exec", "--name", NAME, "server", "--", "iperf3", "-s", "-1"], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while ":5201" not in wearlab("exec", "--name", NAME, "server", "--", "ss", "-ltn").stdout:
            assert server.poll() is None and time.monotonic() < deadline, "iperf3 -s did not listen"
        res = wearlab("exec", "--name", NAME, "watch", "--", "iperf3", "-c", "server", "-t", "4", "-J", timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        bps = json.loads(res.stdout)["end"]["sum_received"]["bits_per_second"]
        print(f"iperf3 watch -> server: {bps / 1e6:.3f} Mbit/s (link 1.1 Mbit/s; bounds "
              f"{GOODPUT_MIN / 1e6:.3f}-{GOODPUT_MAX / 1e6:.3f})")
        assert GOODPUT_MIN <= bps <= GOODPUT_MAX
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()


def _pane(tm: list[str]) -> str:
    return subprocess.run([*tm, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True).stdout


def _wait_pane(tm: list[str], pattern: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = _pane(tm)
        if re.search(pattern, text, re.M):
            return text
        assert time.monotonic() < deadline, f"no /{pattern}/ in the pane:\n{text}"
        time.sleep(0.05)


def test_shell_is_a_real_terminal(deployed):
    tmux = need_tool("tmux")
    tm = [tmux, "-L", f"wearlab-test-{os.getpid()}"]
    inner = f"{shlex.join([*WEARLAB, 'shell', '--name', NAME, 'watch'])}; echo wearlab-exit=$?; exec cat"
    subprocess.run([*tm, "new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "-c", str(ROOT), inner], check=True)
    try:
        _wait_pane(tm, r"^root@watch:.*#\s*$")
        subprocess.run([*tm, "send-keys", "-t", "t", "hostname; stty size; tty", "Enter"], check=True)
        _wait_pane(tm, r"^/dev/pts/\d+$")
        text = _pane(tm)
        assert re.search(r"^watch$", text, re.M) and re.search(r"^30 100$", text, re.M), text
        # An interactive command, interrupted by Ctrl-C: the shell is back, and says so.
        subprocess.run([*tm, "send-keys", "-t", "t", "sleep 100; echo after-sleep=$?", "Enter"], check=True)
        _wait_pane(tm, r"sleep 100; echo after-sleep=\$\?\s*$")
        subprocess.run([*tm, "send-keys", "-t", "t", "C-c"], check=True)
        # bash aborts the whole list on SIGINT: the echo never runs, the prompt comes back. Type on
        # only at that prompt: the terminal flushes its input on Ctrl-C, and keys typed before the
        # signal is handled go with it (seen once in CI).
        _wait_pane(tm, r"\^C\s*\n(?:.*\n)*?root@watch:.*#\s*$")
        subprocess.run([*tm, "send-keys", "-t", "t", "echo alive-$((40+2))", "Enter"], check=True)
        text = _wait_pane(tm, r"^alive-42$", timeout=10)
        assert "after-sleep" not in text.replace("echo after-sleep", "")
        subprocess.run([*tm, "send-keys", "-t", "t", "exit 3", "Enter"], check=True)
        _wait_pane(tm, r"^wearlab-exit=3$")
    finally:
        subprocess.run([*tm, "kill-server"], capture_output=True)


def test_destroy_leaves_nothing(deployed):
    proc, _ = deployed
    res = wearlab("destroy", NAME, timeout=120)
    assert res.returncode == 0, res.stderr
    assert proc.wait(timeout=30) == 0, _log(proc)
    assert _leftovers(proc.pid) == [] and not (deploy.STATE / NAME).exists()
    assert NAME not in deploy.deployments()


def test_hangup_leaves_nothing():
    name = f"{NAME}-hup"
    proc = _start(name)
    _wait_ready(proc, name)
    os.killpg(proc.pid, signal.SIGHUP)   # a closed terminal: its whole process group
    proc.wait(timeout=120)
    assert _leftovers(proc.pid) == [] and not (deploy.STATE / name).exists()


def test_kill9_is_healed_by_the_next_command():
    name = f"{NAME}-k9"
    proc = _start(name)
    _wait_ready(proc, name)
    proc.kill()
    proc.wait(timeout=30)
    left = _leftovers(proc.pid)
    assert left, "a kill -9 left nothing to heal: this test tests nothing"
    res = wearlab("inspect", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "removed what a dead run left" in res.stderr, res.stderr
    assert _leftovers(proc.pid) == [] and not (deploy.STATE / name).exists()
