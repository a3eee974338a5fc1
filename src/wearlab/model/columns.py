"""What one run's results hold, as declared by the workload and node kinds that produce them:
metric columns of runs.csv, time-series files, and summary ratios between cells.

Everything that shows results - the CSV, the end-of-run table, `wearlab compare`, the exporter,
plots - reads these declarations; nothing else knows what a column means.
"""

from __future__ import annotations

from dataclasses import dataclass
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
