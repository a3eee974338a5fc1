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


class StreamAgent:
    """wearlab.measure.stream_agent in a node: `serve` (server side) or a client taking requests."""

    def __init__(self, net, node: str, args: list[str]):
        self.node = node
        self.proc = net.popen(node, [sys.executable, "-m", "wearlab.measure.stream_agent", *args],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, bufsize=1)
        if not self._read(30).get("ready"):
            raise RuntimeError(f"stream agent on {node} did not start")

    def _read(self, timeout: float) -> dict[str, Any]:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else ""
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else f"no answer in {timeout:.0f} s"
            raise RuntimeError(f"stream agent on {self.node}: {err.strip()[-300:]}")
        return json.loads(line)

    def run(self, specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
        self.proc.stdin.write(json.dumps({"streams": specs}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)["streams"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class LineAgent:
    """A measurement agent module running in a node's namespace, spoken to in JSON lines: it
    answers `{"ready": true, "libcurl": ...}` once started, then one line per request."""

    module = ""      # the agent's module (python -m)
    what = ""        # how errors name it

    def __init__(self, net, client: str, timeout: float = 30, env: dict[str, str] | None = None):
        self.net, self.client = net, client
        # env: on a node with a device, the devicecpu library's settings (nodes.devicecpu)
        self.proc = net.popen(client, [sys.executable, "-m", self.module],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, bufsize=1, **({"env": env} if env is not None else {}))
        hello = self._read(timeout)
        if not hello.get("ready"):
            raise RuntimeError(f"{self.what} on {client} did not start: {hello}")
        self.libcurl = hello.get("libcurl")

    def _read(self, timeout: float) -> dict[str, Any]:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if r else ""
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else "no answer"
            raise RuntimeError(f"{self.what} on {self.client}: {err.strip()[-300:]}")
        return json.loads(line)

    def request(self, timeout_s: float, **req) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({**req, "timeout_s": timeout_s}) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout_s + 10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


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
