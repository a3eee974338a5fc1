"""The `toy-marker` node kind: no software of its own; it writes a marker file while it is up and
counts the runs it saw. Written from docs/extending.md's checklist alone ("A node kind", "A
result column"), to prove the checklist (tests/test_extending.py)."""

from __future__ import annotations

from typing import Any

from wearlab.model import params as P
from wearlab.model.columns import Metric
from wearlab.model.params import Param, ParamSet
from wearlab.model.roles import Role
from wearlab.nodes.node_kind import NodeKind


class ToyMarker(NodeKind):
    name = "toy-marker"
    doc = "a toy: writes a marker file while up and counts its runs (proves docs/extending.md)"
    roles = frozenset({Role.SERVER, Role.AP, Role.ROUTER})
    options = ParamSet((
        Param("label", P.text("label"), "toy", "what the marker file says (one word)"),
    ))
    metrics = (Metric("toy_marker_runs", "count", better="none",
                      doc="runs this node's toy-marker saw start since it started"),)

    # -- plan time -------------------------------------------------------------------------------
    @classmethod
    def check(cls, view) -> list[tuple[str, str]]:
        if " " in view.settings["label"]:
            return [("label", f"label '{view.settings['label']}' is more than one word")]
        return []

    # -- lifecycle --------------------------------------------------------------------------------
    def prepare(self) -> None:
        self.marker = self.workdir / "marker"
        self.runs = 0

    def start(self) -> None:
        self.marker.write_text(self.settings["label"])

    def stop(self) -> None:
        self.marker.unlink(missing_ok=True)

    def run_started(self, t0_ns: int) -> None:
        self.runs += 1

    def run_metrics(self) -> dict[str, Any]:
        return {"toy_marker_runs": self.runs}
