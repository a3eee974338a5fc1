"""Starting a node's software and knowing when it is up: shared by every node kind and by the
tcpcrypt daemon a kind may carry."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from wearlab.errors import EnvironmentProblem

if TYPE_CHECKING:
    from wearlab.realize.netns import Network


class KindError(EnvironmentProblem):
    """A node kind's software cannot do what was asked: it exits, or never listens. Exit status 2,
    like any machine that cannot do what was asked (bad input is found by the plan before)."""


def listening_ports(net: Network, node: str) -> set[int]:
    """TCP ports something listens on in `node` (ss -Htln)."""
    out = net.run(node, ["ss", "-Htln"]).stdout
    return {int(l.split()[3].rsplit(":", 1)[1]) for l in out.splitlines() if l.strip()}


def wait_listening(net: Network, node: str, ports: set[int], what: str, timeout: float, proc=None) -> None:
    """Return once every port accepts in `node`; KindError when `proc` died or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ports <= listening_ports(net, node):
            return
        if proc is not None and proc.poll() is not None:
            raise KindError(f"{what} on {node} exited with status {proc.returncode} before listening on "
                            f"{', '.join(map(str, sorted(ports)))}")
        time.sleep(0.05)
    raise KindError(f"{what} on {node} is not listening on {', '.join(map(str, sorted(ports)))} "
                    f"after {timeout:.0f} s")
