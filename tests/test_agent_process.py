"""measure.agents: an agent that misses a request's deadline is replaced, so its late answer is
never taken for the next request's (the bug: after one stream run timed out while the watch's
agent was still receiving, every later run of the experiment "delivered no message", its answer
being the previous run's)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from wearlab.measure.agents import LineAgent

# A stand-in agent: ready, then for each request waits `delay_s` and echoes its `n`.
SLOW_ECHO = """
import json, sys, time
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    time.sleep(req["delay_s"])
    print(json.dumps({"n": req["n"], "pid": __import__("os").getpid()}), flush=True)
"""


class LocalNet:
    """The one thing an agent asks of the network: a process "in a node" (here: on the host)."""

    def popen(self, node, argv, **kw):
        return subprocess.Popen(argv, **kw)


class SlowEcho(LineAgent):
    module, what = "slow_echo", "slow echo"


@pytest.fixture
def agent(tmp_path):
    (tmp_path / "slow_echo.py").write_text(SLOW_ECHO)
    a = SlowEcho(LocalNet(), "watch", env={**os.environ, "PYTHONPATH": str(tmp_path)})
    yield a
    a.stop()


def test_a_late_answer_is_never_the_next_requests(agent):
    first = agent.proc.pid
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="slow echo on watch: no answer in 0 s"):
        agent._ask({"n": 1, "delay_s": 1.0}, timeout=0.2)
    # The error comes at the deadline (plus a new agent's start-up), not when the late answer does.
    assert time.monotonic() - t < 0.2 + 5
    assert agent.proc.pid != first
    answer = agent._ask({"n": 2, "delay_s": 0}, timeout=5)
    assert answer["n"] == 2 and answer["pid"] == agent.proc.pid


def test_an_agent_that_died_is_started_again_for_the_next_request(agent):
    agent.proc.kill()
    agent.proc.wait()
    with pytest.raises((RuntimeError, OSError)):
        agent._ask({"n": 1, "delay_s": 0}, timeout=5)
    assert agent._ask({"n": 2, "delay_s": 0}, timeout=5)["n"] == 2


def test_requests_in_time_keep_one_agent(agent):
    pid = agent.proc.pid
    assert [agent._ask({"n": i, "delay_s": 0}, timeout=5)["n"] for i in range(3)] == [0, 1, 2]
    assert agent.proc.pid == pid
