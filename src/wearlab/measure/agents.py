"""Talking to wearlab's agents in the nodes: the programs a workload starts in a node's namespace
(`python -m wearlab.measure.stream_agent`, `python -m wearlab.measure.fetch_agent`) and drives
with one JSON line per request. These classes start them, wait for their `ready`, send requests,
read the answers, and stop them."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from typing import Any


class _AgentProcess:
    """One agent process in a node: started, its `ready` line awaited, asked one JSON line per
    request. An answer that does not come in time leaves the agent mid-request, its late answer
    bound for the pipe: read by the next request, it would pass for that one's (a stream run then
    "delivered no message"). So an agent that missed its deadline is replaced by a fresh one before
    the error is raised, and the next run talks to an agent that has nothing pending."""

    what = "agent"
    terminate_on_stop = False   # a serving agent does not end with its stdin

    def __init__(self, net, node: str, argv: list[str], env: dict[str, str] | None = None, timeout: float = 30):
        self.net, self.node, self.argv, self.env = net, node, argv, env
        self.hello = self._start(timeout)

    def _start(self, timeout: float) -> dict[str, Any]:
        self.proc = self.net.popen(self.node, [sys.executable, "-m", *self.argv],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, bufsize=1, **({"env": self.env} if self.env is not None else {}))
        hello = self._read(timeout)
        if not hello.get("ready"):
            raise RuntimeError(f"{self.what} on {self.node} did not start: {hello}")
        return hello

    def _read(self, timeout: float) -> dict[str, Any]:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else ""
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else f"no answer in {timeout:.0f} s"
            raise RuntimeError(f"{self.what} on {self.node}: {err.strip()[-300:]}")
        return json.loads(line)

    def _ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return self._read(timeout)
        except (RuntimeError, OSError, ValueError):
            self._kill()
            try:
                self._start(30)
            except (RuntimeError, OSError, ValueError):
                pass   # the next request finds it dead, says why, and tries again
            raise

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            if self.terminate_on_stop:
                self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class StreamAgent(_AgentProcess):
    """wearlab.measure.stream_agent in a node: `serve` (server side) or a client taking requests."""

    what = "stream agent"
    terminate_on_stop = True

    def __init__(self, net, node: str, args: list[str]):
        super().__init__(net, node, ["wearlab.measure.stream_agent", *args])

    def run(self, specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
        return self._ask({"streams": specs}, timeout)["streams"]


class LineAgent(_AgentProcess):
    """A measurement agent module running in a node's namespace, spoken to in JSON lines: it
    answers `{"ready": true, "libcurl": ...}` once started, then one line per request."""

    module = ""      # the agent's module (python -m)

    def __init__(self, net, client: str, timeout: float = 30, env: dict[str, str] | None = None):
        # env: on a node with a device, the devicecpu library's settings (nodes.devicecpu)
        super().__init__(net, client, [self.module], env=env, timeout=timeout)
        self.client = client
        self.libcurl = self.hello.get("libcurl")

    def request(self, timeout_s: float, **req) -> dict[str, Any]:
        return self._ask({**req, "timeout_s": timeout_s}, timeout_s + 10)


class FetchAgent(LineAgent):
    """wearlab.measure.fetch_agent running in the client's namespace: one fetch per request."""

    module, what = "wearlab.measure.fetch_agent", "fetch agent"

    def get(self, timeout_s: float, **req) -> dict[str, Any]:
        return self.request(timeout_s, **req)


class PageAgent(LineAgent):
    """wearlab.measure.page_agent running in the client's namespace: one page load per request."""

    module, what = "wearlab.measure.page_agent", "page agent"

    def load(self, timeout_s: float, **req) -> dict[str, Any]:
        return self.request(timeout_s, **req)
