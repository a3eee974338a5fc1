"""What a workload kind is at run time: a small registered type (containerlab's node kinds,
Flent's runners).

Its declaration - `Fields`, `params`, `metrics`, `series`, `ratios`, load-time `check`, and the
plan's questions (`needs`, `features`, `ports`) - is `wearlab.model.declarations.WorkloadDecl`; this
class adds the run: `start` (agents), `warm_up`, `run` (one run -> one row, optionally finished
later), `stop`, and `live` (its state for a live view). `wearlab.catalog` lists every workload
kind once. The runner, the CSV columns, progress lines, the summary and `wearlab compare` read
the declarations; nothing outside a workload's own module knows what it measures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from wearlab.model.declarations import WorkloadDecl
from wearlab.workloads.context import WorkloadContext


@dataclass
class Outcome:
    """What one run produced. `finish` (optional) completes the row later, e.g. once the
    connection's teardown has been captured (more row values, or an Outcome with series rows
    too); it may raise to fail the run."""

    row: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    finish: Callable[[], dict[str, Any] | Outcome] | None = None


class Workload(WorkloadDecl):
    def __init__(self, fields: BaseModel, ctx: WorkloadContext):
        self.fields = fields
        self.ctx = ctx

    def start(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        """Start agents (the nodes are up); returns facts for metadata.json."""
        return {}

    def warm_up(self, cells: list[dict[str, Any]]) -> dict[str, Any]:
        """Unrecorded runs after the nodes (re)started, so first-use costs are not measured."""
        return {}

    def run(self, cell: dict[str, Any], repetition: int) -> Outcome:
        raise NotImplementedError

    def stop(self) -> None:
        """Stop what start() started (teardown kills whatever is left)."""

    def live(self) -> dict[str, Any]:
        """What a live view shows of the run in progress (called from another thread)."""
        return {}
