"""What the runner keeps while an experiment runs, shared with live control and the live view:
the plan, the workload's context (network, running node kinds, captures), the links and their
change log, the workload, progress, and the series files."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wearlab.nodes.node_kind import NodeKind
from wearlab.plan.plan import RunPlan
from wearlab.realize.changelog import ChangeLog
from wearlab.realize.linkctl import LinkControl
from wearlab.workloads.workload import Workload
from wearlab.workloads.context import WorkloadContext


@dataclass
class RunState:
    plan: RunPlan
    wctx: WorkloadContext
    links: LinkControl | None = None
    changes: ChangeLog | None = None
    workload: Workload | None = None
    progress: dict[str, Any] = field(default_factory=dict)   # runs done/total/failed, the current cell
    series: SeriesFiles | None = None

    @property
    def nodes(self) -> dict[str, NodeKind]:
        return self.wctx.nodes

    @property
    def run_start_ns(self) -> int | None:
        return self.wctx.run_start_ns


class SeriesFiles:
    """Time series under series/<name>.csv, one file per series the workload and node kinds
    declare; each row starts with the run and its cell's parameters, so `pandas.read_csv` gives a
    tidy table."""

    def __init__(self, directory: Path, declared: dict[str, tuple[str, ...]], param_columns: list[str],
                 append: bool = False):
        """`append`: a resumed session adds to the files an earlier one left (run.resume)."""
        self.directory = directory
        self.declared = declared
        self.head = ["run", "repetition", *param_columns]
        self.append_to_existing = append
        self._files: dict[str, Any] = {}

    def append(self, name: str, run: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        if name not in self.declared:
            raise KeyError(f"series {name!r} is not declared by the workload")
        if name not in self._files:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{name}.csv"
            kept = self.append_to_existing and path.is_file() and path.stat().st_size > 0
            f = path.open("a" if kept else "w", newline="")
            w = csv.DictWriter(f, fieldnames=[*self.head, *self.declared[name]], extrasaction="ignore")
            if not kept:
                w.writeheader()
            self._files[name] = (f, w)
        f, w = self._files[name]
        prefix = {k: run.get(k, "") for k in self.head}
        for r in rows:
            w.writerow({**prefix, **{k: _cell(v) for k, v in r.items()}})
        f.flush()
        os.fsync(f.fileno())

    def close(self) -> None:
        for f, _ in self._files.values():
            f.close()
        self._files.clear()


def _cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.9g}"
    return v
