"""What a workload kind is: a small registered type (containerlab's node kinds, Flent's runners).

A workload declares, once:
- `Fields`: what is fixed for the whole experiment (e.g. client and server node);
- `params`: what a matrix may vary, each with its one normaliser (`wearlab.model.params`);
- `metrics`: the columns one run's row gets, with unit, which direction is better, and whether
  the summary shows it;
- `series`: the time-series files its runs append to (one row per sample, with the run and
  cell they belong to), if any;
- `ratios`: summary ratios between cells that differ in one parameter (HTTPS / HTTP).
and implements the run: `check` (cross-checks against the topology, at load time), `start`
(agents, warm-up), `run` (one run -> one row, optionally finished later), `stop`.

The runner, the CSV columns, progress lines, the summary and `wearlab compare` read these
declarations; nothing outside a workload's own module knows what it measures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from wearlab.model import quantities
from wearlab.model.params import ParamSet

if TYPE_CHECKING:
    from wearlab.errors import Problem
    from wearlab.nodes.kinds import Need
    from wearlab.model.topology import Topology
    from wearlab.model.yamlsrc import YamlPath, YamlSource
    from wearlab.run.context import RunContext


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


@dataclass
class Outcome:
    """What one run produced. `finish` (optional) completes the row later, e.g. once the
    connection's teardown has been captured; it may raise to fail the run."""

    row: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    finish: Callable[[], dict[str, Any]] | None = None


class Workload:
    kind: ClassVar[str]
    doc: ClassVar[str] = ""
    Fields: ClassVar[type[BaseModel]]
    params: ClassVar[ParamSet] = ParamSet()
    metrics: ClassVar[tuple[Metric, ...]] = ()
    series: ClassVar[tuple[Series, ...]] = ()
    ratios: ClassVar[tuple[Ratio, ...]] = ()
    headline: ClassVar[tuple[str, ...]] = ()  # metrics a progress line shows (seconds), first present

    # -- model time --------------------------------------------------------------------------
    @classmethod
    def check(cls, fields: BaseModel, fixed: dict[str, Any], matrix: dict[str, list[Any]],
              where: dict[tuple[str, Any], YamlPath], topo: Topology, src: YamlSource) -> list[Problem]:
        """Problems between parameters and the topology. May fill computed defaults into
        `fixed` (e.g. the client's first hop)."""
        return []

    @classmethod
    def run_length(cls, cell: dict[str, Any]) -> float | None:
        """How long one run of `cell` lasts by design (s), if the workload knows: a timeline's
        events after it could never happen."""
        return None

    @classmethod
    def endpoints(cls, fields: BaseModel) -> dict[str, str]:
        """Role name -> node name of the nodes this workload runs on (e.g. client, server)."""
        return {}

    # -- run time ----------------------------------------------------------------------------
    def __init__(self, fields: BaseModel, ctx: RunContext):
        self.fields = fields
        self.ctx = ctx

    def needs(self, cells: list[dict[str, Any]]) -> list[Need]:
        """What the cells need of nodes: files to serve, connections a first hop should proxy
        (a proxy kind intercepts them; any other kind routes)."""
        return []

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

    def describe_cell(self, cell: dict[str, Any]) -> str:
        return " ".join(p.shown(cell[p.name]) for p in self.params
                        if cell.get(p.name) not in (None, "", "default"))


class WorkloadFields(BaseModel):
    """Base for a workload's fixed fields: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


REGISTRY: dict[str, type[Workload]] = {}


def register(cls: type[Workload]) -> type[Workload]:
    REGISTRY[cls.kind] = cls
    return cls


def workload_kinds() -> dict[str, type[Workload]]:
    # Importing the modules registers their kinds.
    from wearlab.workloads import http_get as _http_get, streams as _streams  # noqa: F401
    return REGISTRY
