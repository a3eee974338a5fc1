"""The `toy-exec` workload: the client runs `count` empty shell commands in its node per run and
reports how long they took. Written from docs/extending.md's checklist alone ("A workload", "A
result column"), to prove the checklist (tests/test_extending.py); it measures nothing of
interest."""

from __future__ import annotations

import time
from typing import Any

from wearlab.errors import Problem
from wearlab.model.columns import Metric
from wearlab.model.declarations import WorkloadFields
from wearlab.model.params import Param, ParamSet
from wearlab.model.yamlsrc import did_you_mean, dotted
from wearlab.workloads.workload import Outcome, Workload


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 100:
        return value
    raise ValueError(f"count is a whole number from 1 to 100, got {value!r}")


class ToyExecFields(WorkloadFields):
    client: str
    server: str


class ToyExec(Workload):
    name = "toy-exec"
    doc = "the client runs `count` empty shell commands per run (a toy: proves docs/extending.md)"
    Fields = ToyExecFields
    params = ParamSet((
        Param("count", _count, 1, "shell commands per run"),
    ))
    metrics = (
        Metric("toy_exec_s", "s", label="exec", summarised=True,
               doc="the client's `count` shell commands, start to end (wall clock)"),
        Metric("toy_commands", "count", better="none", doc="shell commands the run started"),
    )
    headline = ("toy_exec_s",)

    # -- model time: declarations the loader and the plan read -------------------------------
    @classmethod
    def endpoints(cls, fields: ToyExecFields) -> dict[str, str]:
        return {"client": fields.client, "server": fields.server}

    @classmethod
    def check(cls, fields, fixed, matrix, where, topo, src) -> list[Problem]:
        problems = []
        for key in ("client", "server"):
            node = getattr(fields, key)
            if node not in topo.nodes:
                path = ("workload", key)
                problems.append(Problem(src.file, src.line(path), dotted(path),
                                        f"unknown node '{node}'{did_you_mean(node, topo.nodes)}"))
        return problems

    # -- run time -------------------------------------------------------------------------------
    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        t0 = time.monotonic()
        for _ in range(cell["count"]):
            self.ctx.net.sh(self.fields.client, "true")
        return Outcome(row={"toy_exec_s": time.monotonic() - t0, "toy_commands": cell["count"]})
