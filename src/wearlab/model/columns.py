"""What one run's results hold, as declared by the workload and node kinds that produce them:
metric columns of runs.csv, time-series files, and summary ratios between cells.

Everything that shows results - the CSV, the end-of-run table, `wearlab compare`, the exporter,
plots - reads these declarations; nothing else knows what a column means. `columns_of` is the one
place a run's columns are computed from them (the plan calls it with the kinds its cells run; the
experiment loader with every kind, to check the metric names `ratios:` and `expect:` use).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from wearlab.model import quantities


@dataclass(frozen=True)
class Metric:
    """One metric column of a run's row. Its unit is one of wearlab.model.quantities.UNITS,
    which decides how runs.csv, the summary, `compare` and the exporter show it; an unknown unit,
    or a name Prometheus' conventions refuse, is a programming error raised where it is declared."""

    name: str
    unit: str                    # a symbol of quantities.UNITS: s, B, bit/s, J, W, count, packets, ratio
    better: str = "lower"        # "lower", "higher" or "none" (informational)
    label: str = ""              # short name for tables
    summarised: bool = False     # shown in the end-of-run table (median [IQR])
    doc: str = ""

    def __post_init__(self) -> None:
        quantities.unit(self.unit).prometheus_name(self.name)
        if not self.doc:
            # `wearlab kinds`, the exporter's HELP and the docs show it: a column nobody can read
            # the meaning of is a programming error, raised where it is declared.
            raise ValueError(f"metric {self.name} has no doc (what it measures, from where to where)")

    @property
    def quantity(self) -> quantities.Unit:
        return quantities.unit(self.unit)

    def describe(self) -> dict[str, Any]:
        return {"unit": self.unit, "better": self.better, "label": self.label or self.name,
                "summarised": self.summarised}


@dataclass(frozen=True)
class Series:
    """A time-series file `series/<name>.csv`: the run and cell columns, then `columns`."""

    name: str
    columns: tuple[str, ...]
    doc: str = ""


@dataclass(frozen=True)
class Ratio:
    """Per cell with `param` = numerator, the ratio of `metrics` medians to the cell that differs
    only in `param` (= denominator) and in `ignoring` (parameters that only apply to one side)."""

    param: str
    numerator: str
    denominator: str
    metrics: tuple[str, ...]
    ignoring: tuple[str, ...] = ()
    title: str = ""


@dataclass(frozen=True)
class Columns:
    """What a run's results hold: runs.csv's columns and the series files."""

    params: tuple[str, ...]
    metrics: tuple[Metric, ...]
    series: tuple[Series, ...]

    def runs_csv(self) -> list[str]:
        return ["run", "repetition", *self.params, "status", "error", *[m.name for m in self.metrics],
                "link_changes", "run_seed", "started_utc", "wall_s"]


def columns_of(workload: Any, node_kinds: Iterable[Any], matrix_keys: Iterable[str]) -> Columns:
    """The columns of a run of `workload` (a WorkloadDecl) on nodes of `node_kinds` (NodeKindDecls)
    sweeping `matrix_keys`. A cell is identified by the workload's parameters, then the matrix keys
    that are no workload parameter: the swept timeline first, then the node settings (`node.option`).
    Node settings fixed for the whole experiment are in experiment.yaml, not in every row (so two
    experiments that differ only in the proxy under test have the same cells: `wearlab compare`)."""
    names = list(workload.params.names())
    extra = [k for k in matrix_keys if k not in names]
    kinds = list(node_kinds)
    return Columns(params=(*names, *sorted(extra, key=lambda k: "." in k)),
                   metrics=(*workload.metrics, *[m for k in kinds for m in k.metrics]),
                   series=(*workload.series, *[s for k in kinds for s in k.series]))
