"""Claims in experiments (`expect:`): what a paper - or a lab sheet - says the runs must show, and
what kind of evidence each is (docs/claims.md).

A claim names a metric, the cells whose runs it reads (`cells:`, matrix or fixed values) and a
statistic of those runs (median, mean, p95, max); optionally a contrast of two groups of cells
that differ in one matrix key (`ratio:` stat(numerator) / stat(denominator), `difference:`
numerator - denominator) and a `trend:` over a numeric matrix key (Spearman's rho of the
statistic - or of the contrast - at each of its values against the value). Its `paper:` value or
[low, high] range, in the metric's unit (ratios and trends are plain numbers), widened by its
`tolerance:` is the band `wearlab check` holds ours against (wearlab.report.check); `paper_scale:`
names a parameter (app_scale) whose value in the claim's cells multiplies that value, where the
cells run a part of the paper's sizes. `evidence:`
says what agreement would prove: `input` (a number the model takes from the paper: shown, never
scored), `calibration` (holds by construction once the inputs are right: `why` says which input)
or `prediction` (the model was not tuned to it).

Here: the YAML schema (`ClaimSpec`), reading it against the experiment (`load_claims`, every
problem at file:line:field), and the resolved `Claim` the plan carries, with the cells of each of
its groups once the plan knows its cells (`Claim.planned`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from wearlab.errors import Problem
from wearlab.model import matrix_values, unit_input
from wearlab.model.choices import Evidence, Statistic
from wearlab.model.columns import columns_of
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted

ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
ID_RULE = "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit (e.g. 000-table3-bytes)"
TREND_RHO = 0.8            # a trend holds when Spearman's rho is at least this, the right way
MIN_TREND_LEVELS = 3       # two points always have rho = +-1


class SourceSpec(BaseModel):
    """Where the claim comes from: the seed file's number and the table, figure or section."""

    model_config = ConfigDict(extra="forbid")

    seed: str | None = None
    where: str

    @field_validator("seed", mode="before")
    @classmethod
    def _seed(cls, v: Any) -> Any:
        # `seed: 000` is the integer 0 in YAML: the seed files' numbers have three digits.
        return f"{v:03d}" if isinstance(v, int) and not isinstance(v, bool) else v


class ContrastSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    over: str
    numerator: Any
    denominator: Any


class TrendSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    over: str
    direction: Literal["rising", "falling"]


class ClaimSpec(BaseModel):
    """One entry of `expect:` as written."""

    model_config = ConfigDict(extra="forbid")

    id: str
    claim: str
    source: SourceSpec
    evidence: Evidence
    why: str = ""                 # required for input and calibration: what input makes it hold
    note: str = ""                # why ours may differ (a set-up the paper did not have, ...)
    metric: str | None = None     # required, except for an input shown without a measurement
    cells: dict[str, Any] = Field(default_factory=dict)
    statistic: Statistic = Statistic.MEDIAN
    ratio: ContrastSpec | None = None
    difference: ContrastSpec | None = None
    trend: TrendSpec | None = None
    paper: Any = None
    paper_scale: str | None = None   # a parameter whose value in the claim's cells scales the paper's value
    tolerance: Any = None

    @field_validator("cells", mode="before")
    @classmethod
    def _empty(cls, v: Any) -> Any:
        return {} if v is None else v


# -- resolved ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Contrast:
    kind: Literal["ratio", "difference"]
    over: str
    numerator: Any
    denominator: Any


@dataclass(frozen=True)
class Trend:
    over: str
    direction: Literal["rising", "falling"]


@dataclass(frozen=True)
class Group:
    """Cells whose runs are pooled into one statistic: the claim's cells (`role` "cells"), or one
    side of its contrast ("numerator", "denominator"); `level`: the trend's value of its key."""

    role: str
    level: Any
    cells: tuple[int, ...]


@dataclass(frozen=True)
class Claim:
    """A claim resolved: values normalised as the cells hold them, the paper's range in SI units
    (`unit`, a quantities.UNITS symbol, "" for plain numbers), the tolerance as a fraction and an
    absolute amount. `groups` are filled in by the plan (`planned`)."""

    id: str
    claim: str
    seed: str | None
    where: str
    evidence: Evidence
    why: str
    note: str
    metric: str | None
    unit: str
    statistic: Statistic
    select: Mapping[str, Any]
    contrast: Contrast | None
    trend: Trend | None
    paper: tuple[float, float] | None      # None: an input shown as written (paper_text)
    paper_text: str
    tolerance: float                       # relative: widens each bound by this share of it
    tolerance_abs: float                   # absolute, in `unit`
    tolerance_text: str
    written: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    groups: tuple[Group, ...] = ()
    # A parameter (app_scale) whose value in the claim's cells multiplies the paper's range and an
    # absolute tolerance: the paper's figure is for the paper's sizes, the cells run a part of them.
    # `planned` applies it (paper_text then says so); None: the paper's value as written.
    paper_scale: str | None = None

    def keys(self) -> set[str]:
        """The experiment's parameters it names."""
        return set(self.select) | {x.over for x in (self.contrast, self.trend) if x is not None}

    def band(self) -> tuple[float, float] | None:
        """[low, high] of the paper widened by the tolerance (each bound by tolerance x |bound|
        plus the absolute tolerance: right for negative values too). A trend: rho's band."""
        if self.trend is not None:
            return (TREND_RHO, 1.0) if self.trend.direction == "rising" else (-1.0, -TREND_RHO)
        if self.paper is None:
            return None
        low, high = self.paper
        return (low - self.tolerance * abs(low) - self.tolerance_abs if math.isfinite(low) else low,
                high + self.tolerance * abs(high) + self.tolerance_abs if math.isfinite(high) else high)

    def planned(self, cells: Sequence[Mapping[str, Any]]) -> Claim:
        """This claim with its groups of cells (indices into `cells`, the plan's cells in order).
        A cell where a selected parameter does not apply ("": TLS settings of plain HTTP) is not
        excluded by it; a group may be empty where `--set` narrowed the experiment (`wearlab
        check` then says so)."""
        base = [i for i, c in enumerate(cells) if _selected(c, self.select)]

        def pick(key: str, value: Any, among: list[int]) -> list[int]:
            return [i for i in among if key in cells[i] and _same(cells[i][key], value)]

        levels: list[Any] = [None]
        if self.trend is not None:
            levels = []
            for i in base:
                v = cells[i].get(self.trend.over, "")
                if v != "" and not any(_same(v, x) for x in levels):
                    levels.append(v)
        groups = []
        for level in levels:
            among = pick(self.trend.over, level, base) if self.trend is not None else base
            if self.contrast is None:
                groups.append(Group("cells", level, tuple(among)))
            else:
                c = self.contrast
                groups += [Group("numerator", level, tuple(pick(c.over, c.numerator, among))),
                           Group("denominator", level, tuple(pick(c.over, c.denominator, among)))]
        out = dataclasses.replace(self, groups=tuple(groups))
        return out._scaled([cells[i] for g in groups for i in g.cells])

    def _scaled(self, cells: Sequence[Mapping[str, Any]]) -> Claim:
        """The paper's range (and an absolute tolerance) times the cells' value of `paper_scale`:
        one value, since load_claims made the claim select one; none (no cells, or the cells' value
        is 1) leaves it as written."""
        if self.paper_scale is None or self.paper is None:
            return self
        found = {unit_input.parse_fraction(c[self.paper_scale]) for c in cells if c.get(self.paper_scale, "") != ""}
        if len(found) != 1 or found == {1.0}:
            return self
        (k,) = found
        return dataclasses.replace(self, paper=(self.paper[0] * k, self.paper[1] * k),
                                   tolerance_abs=self.tolerance_abs * k,
                                   paper_text=f"{self.paper_text} x {_fraction(k)} ({self.paper_scale})")

    def to_document(self) -> dict[str, Any]:
        """As the plan (plan.json) holds it: what `wearlab check` reads."""
        band = self.band()
        return {
            "id": self.id, "claim": self.claim, "source": {"seed": self.seed, "where": self.where},
            "evidence": self.evidence.value, "why": self.why, "note": self.note,
            "metric": self.metric, "unit": self.unit, "statistic": self.statistic.value,
            "cells": {k: _plain(v) for k, v in self.select.items()},
            "contrast": ({"kind": self.contrast.kind, "over": self.contrast.over,
                          "numerator": _plain(self.contrast.numerator),
                          "denominator": _plain(self.contrast.denominator)} if self.contrast else None),
            "trend": {"over": self.trend.over, "direction": self.trend.direction} if self.trend else None,
            "paper_low": _bound(self.paper[0]) if self.paper else None,
            "paper_high": _bound(self.paper[1]) if self.paper else None,
            "paper_text": self.paper_text,
            "tolerance": self.tolerance_text,
            "band_low": _bound(band[0]) if band else None,
            "band_high": _bound(band[1]) if band else None,
            "groups": [{"role": g.role, "level": _plain(g.level), "cells": list(g.cells)} for g in self.groups],
        }


def _fraction(k: float) -> str:
    """0.0625 -> '1/16'; a scale that is no unit fraction as a number."""
    inv = 1 / k
    return f"1/{round(inv)}" if abs(inv - round(inv)) < 1e-9 * inv else f"{k:g}"


def _bound(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


_same = matrix_values.same


def _selected(cell: Mapping[str, Any], select: Mapping[str, Any]) -> bool:
    # The plan hands each cell with the experiment's fixed values and node settings, so a key that
    # `--set` fixed selects by its fixed value (a claim about another value then has no runs).
    return all(k not in cell or cell[k] == "" or _same(cell[k], v) for k, v in select.items())


# -- reading `expect:` -------------------------------------------------------------------------


@dataclass
class _Context:
    src: YamlSource
    wclass: Any
    matrix: Mapping[str, list[Any]]
    fixed: Mapping[str, Any]             # workload parameters and node settings (node.option) every cell has
    overridden: set[str]
    catalog: Any
    problems: list[Problem] = field(default_factory=list)

    def problem(self, path: YamlPath, message: str) -> None:
        self.problems.append(Problem(self.src.file, self.src.line(path), dotted(path), message))

    def normalize(self, key: str, raw: Any, among: list[Any]) -> Any | None:
        """The value of `among` that `raw` means ('500KB' -> 500000), else None."""
        return matrix_values.value_among(key, raw, among, self.wclass, self.catalog)

    def loose(self, key: str, raw: Any) -> Any:
        """`raw` normalised without a list to match (a key `--set` overrode)."""
        return matrix_values.loose(key, raw, self.wclass, self.catalog)


def load_claims(src: YamlSource, specs: Sequence[ClaimSpec], wclass, matrix: Mapping[str, list[Any]],
                fixed: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]], overridden: set[str],
                catalog) -> tuple[list[Claim], list[Problem]]:
    """`expect:` checked against the experiment: metrics the kinds declare, keys and values the
    matrix or the fixed settings have, a unit on every value, why for input and calibration.
    A key a `--set` overrode is taken as given (the claim then may select no run: `wearlab check`
    says so rather than the file failing)."""
    everything = {**fixed, **{f"{n}.{k}": v for n, opts in nodes.items() for k, v in opts.items()}}
    ctx = _Context(src, wclass, matrix, everything, set(overridden), catalog)
    metrics = {m.name: m for m in columns_of(wclass, catalog.node_kinds.values(), matrix).metrics}
    raw_list = src.data.get("expect") if isinstance(src.data.get("expect"), list) else []
    out: list[Claim] = []
    seen: dict[str, int] = {}
    for i, spec in enumerate(specs):
        at: YamlPath = ("expect", i)
        written = raw_list[i] if i < len(raw_list) and isinstance(raw_list[i], dict) else {}
        claim = _claim(ctx, at, spec, written, metrics, seen)
        seen.setdefault(spec.id, i)
        if claim is not None:
            out.append(claim)
    return out, ctx.problems


def _claim(ctx: _Context, at: YamlPath, spec: ClaimSpec, written: dict, metrics: dict, seen: dict) -> Claim | None:
    before = len(ctx.problems)
    if not ID.fullmatch(spec.id):
        ctx.problem(at + ("id",), f"'{spec.id}' is not a usable claim id: {ID_RULE}")
    elif spec.id in seen:
        ctx.problem(at + ("id",), f"claim id '{spec.id}' is used twice (also expect[{seen[spec.id]}]); ids are unique")
    if not spec.claim.strip():
        ctx.problem(at + ("claim",), "empty claim: say in one sentence what the paper found")
    if spec.evidence == Evidence.INPUT and not spec.why.strip():
        ctx.problem(at + ("why",), "missing why: an input says where the model takes this number from the paper "
                                   "(e.g. 'the watch's p1 option is the paper's mean')")
    if spec.evidence == Evidence.CALIBRATION and not spec.why.strip():
        ctx.problem(at + ("why",), "missing why: a calibration says which input makes it hold (e.g. 'the "
                                   "platform's cost per handshake is derived from this 147 ms')")

    metric = None
    if spec.metric is None:
        if spec.evidence != Evidence.INPUT:
            ctx.problem(at + ("metric",), f"missing metric: a {spec.evidence.value} is scored on a result column")
        for key in ("ratio", "difference", "trend"):
            if getattr(spec, key) is not None:
                ctx.problem(at + (key,), f"a {key} needs a metric")
    elif spec.metric not in metrics:
        ctx.problem(at + ("metric",), f"unknown metric '{spec.metric}'{did_you_mean(spec.metric, metrics)} "
                                      f"(`wearlab kinds` lists every result column)")
    else:
        metric = metrics[spec.metric]

    select = _select(ctx, at, spec)
    contrast = _contrast(ctx, at, spec)
    trend = _trend(ctx, at, spec, contrast)
    if contrast is not None and contrast.over in select:
        ctx.problem(at + ("cells", contrast.over), f"{contrast.over} is the {contrast.kind}'s key: leave it out of cells")
    if trend is not None and trend.over in select:
        ctx.problem(at + ("cells", trend.over), f"{trend.over} is the trend's key: leave it out of cells")

    unit = "" if (contrast is not None and contrast.kind == "ratio") else (metric.unit if metric else "")
    if spec.metric is not None and metric is None:
        return None    # reported: nothing to read the paper's value against
    paper, paper_text = _paper(ctx, at, spec, unit, metric is not None)
    tol_rel, tol_abs, tol_text = _tolerance(ctx, at, spec, unit)
    _paper_scale(ctx, at, spec, select, contrast, trend)
    if len(ctx.problems) > before:
        return None
    return Claim(id=spec.id, claim=spec.claim.strip(), seed=spec.source.seed, where=spec.source.where,
                 evidence=spec.evidence, why=spec.why.strip(), note=spec.note.strip(), metric=spec.metric,
                 unit=unit if trend is None else "", statistic=spec.statistic, select=select, contrast=contrast,
                 trend=trend, paper=paper, paper_text=paper_text, tolerance=tol_rel, tolerance_abs=tol_abs,
                 tolerance_text=tol_text, written=written, paper_scale=spec.paper_scale)


def _select(ctx: _Context, at: YamlPath, spec: ClaimSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    known = [*ctx.matrix, *[k for k in ctx.fixed if k not in ctx.matrix]]
    for key, raw in spec.cells.items():
        path = at + ("cells", key)
        if key in ctx.overridden:
            out[key] = ctx.loose(key, raw)
        elif key in ctx.matrix:
            value = ctx.normalize(key, raw, ctx.matrix[key])
            if value is None:
                ctx.problem(path, f"{raw!r} is not one of the values of {key}: {', '.join(map(str, ctx.matrix[key]))}")
            else:
                out[key] = value
        elif key in ctx.fixed:
            value = ctx.normalize(key, raw, [ctx.fixed[key]])
            if value is None:
                ctx.problem(path, f"{key} is {ctx.fixed[key]!r} in every cell of this experiment: {raw!r} selects none")
            else:
                out[key] = value
        else:
            ctx.problem(path, f"'{key}' is no parameter of this experiment{did_you_mean(key, known)} "
                              f"(matrix keys and fixed values: {', '.join(known) or 'none'})")
    return out


def _contrast(ctx: _Context, at: YamlPath, spec: ClaimSpec) -> Contrast | None:
    if spec.ratio is not None and spec.difference is not None:
        ctx.problem(at + ("difference",), "a claim is a ratio or a difference, not both")
        return None
    kind = "ratio" if spec.ratio is not None else "difference" if spec.difference is not None else None
    if kind is None:
        return None
    c: ContrastSpec = getattr(spec, kind)
    path = at + (kind,)
    if c.over in ctx.overridden:
        return Contrast(kind, c.over, ctx.loose(c.over, c.numerator), ctx.loose(c.over, c.denominator))
    if c.over not in ctx.matrix:
        ctx.problem(path + ("over",), f"'{c.over}' is not varied in matrix:{did_you_mean(c.over, list(ctx.matrix))} "
                                      f"(matrix keys: {', '.join(ctx.matrix) or 'none'})")
        return None
    sides = {}
    for side in ("numerator", "denominator"):
        raw = getattr(c, side)
        value = ctx.normalize(c.over, raw, ctx.matrix[c.over])
        if value is None:
            ctx.problem(path + (side,), f"{raw!r} is not one of the values of {c.over}: "
                                        f"{', '.join(map(str, ctx.matrix[c.over]))}")
        sides[side] = value
    if sides["numerator"] is not None and sides["numerator"] == sides["denominator"]:
        ctx.problem(path + ("denominator",), "numerator and denominator are the same cells")
    return Contrast(kind, c.over, sides["numerator"], sides["denominator"])


def _trend(ctx: _Context, at: YamlPath, spec: ClaimSpec, contrast: Contrast | None) -> Trend | None:
    t = spec.trend
    if t is None:
        return None
    path = at + ("trend", "over")
    if t.over in ctx.overridden:
        return Trend(t.over, t.direction)
    if t.over not in ctx.matrix:
        ctx.problem(path, f"'{t.over}' is not varied in matrix:{did_you_mean(t.over, list(ctx.matrix))} "
                          f"(matrix keys: {', '.join(ctx.matrix) or 'none'})")
        return None
    if contrast is not None and contrast.over == t.over:
        ctx.problem(path, f"the trend and the {contrast.kind} are both over {t.over}")
        return None
    values = ctx.matrix[t.over]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        ctx.problem(path, f"a trend is over numbers; {t.over}'s values are not ({', '.join(map(str, values))})")
    elif len(values) < MIN_TREND_LEVELS:
        ctx.problem(path, f"a trend needs at least {MIN_TREND_LEVELS} values of {t.over}; the matrix has {len(values)}")
    return Trend(t.over, t.direction)


def _range_text(raw: list) -> str:
    """[low, high] as a reader says it: an open side (null) is a bound, not "None"."""
    low, high = raw
    if low is None and high is not None:
        return f"<= {high}"
    if high is None and low is not None:
        return f">= {low}"
    return f"[{low}, {high}]"


def _paper(ctx: _Context, at: YamlPath, spec: ClaimSpec, unit: str, measured: bool
           ) -> tuple[tuple[float, float] | None, str]:
    path = at + ("paper",)
    raw = spec.paper
    if spec.trend is not None:
        rising = spec.trend.direction == "rising"
        text = f"{spec.trend.direction} (rho {'>=' if rising else '<='} {'' if rising else '-'}{TREND_RHO:g})"
        if raw is not None:
            ctx.problem(path, f"a trend's paper value is its direction, {text}; remove paper")
        return None, text
    if raw is None:
        ctx.problem(path, "missing paper: the paper's value, or [low, high]")
        return None, ""
    if isinstance(raw, str) and raw.strip().startswith("[") and raw.strip().endswith("]"):
        raw = [x.strip() for x in raw.strip()[1:-1].split(",")]
    text = _range_text(raw) if isinstance(raw, list) and len(raw) == 2 else str(raw)
    if not measured:
        return None, text   # an input without a metric: shown as written

    def parse(value: Any, where: YamlPath, side: str) -> float | None:
        if value is None:
            return -math.inf if side == "low" else math.inf
        try:
            return unit_input.parse_number(value) if unit == "" else unit_input.parse_quantity(value, unit)
        except ValueError as e:
            ctx.problem(where, f"{e} ({_unit_hint(unit)})")
            return None

    if isinstance(raw, list):
        if len(raw) != 2:
            ctx.problem(path, f"expected a value or [low, high], got a list of {len(raw)}")
            return None, text
        low, high = parse(raw[0], path + (0,), "low"), parse(raw[1], path + (1,), "high")
        if low is None or high is None:
            return None, text
        if low > high:
            ctx.problem(path, f"[{raw[0]}, {raw[1]}]: low is above high")
            return None, text
        return (low, high), text
    if isinstance(raw, dict):
        ctx.problem(path, "expected a value or [low, high], got a mapping")
        return None, text
    v = parse(raw, path, "")
    return ((v, v), text) if v is not None else (None, text)


def _paper_scale(ctx: _Context, at: YamlPath, spec: ClaimSpec, select: Mapping[str, Any],
                 contrast: Contrast | None, trend: Trend | None) -> None:
    """`paper_scale: KEY`: a numeric parameter with one value in the claim's cells (a ratio or a
    trend compares cells, where one scale cancels or differs: not allowed)."""
    key = spec.paper_scale
    if key is None:
        return
    path = at + ("paper_scale",)
    if contrast is not None or trend is not None:
        ctx.problem(path, f"paper_scale scales a value; a {'trend' if trend else contrast.kind} is not one")
        return
    if key in ctx.overridden:
        return
    if key in ctx.matrix:
        if key not in select and len(ctx.matrix[key]) > 1:
            ctx.problem(path, f"{key} varies in matrix: select one of its values in cells: (the paper's value is "
                              "scaled by it)")
            return
        values = [select[key]] if key in select else ctx.matrix[key]
    elif key in ctx.fixed:
        values = [ctx.fixed[key]]
    else:
        known = [*ctx.matrix, *ctx.fixed]
        ctx.problem(path, f"'{key}' is no parameter of this experiment{did_you_mean(key, known)}")
        return
    for v in values:
        try:
            if not unit_input.parse_fraction(v) > 0:
                raise ValueError
        except ValueError:
            ctx.problem(path, f"{key} is {v!r}: a paper's value is scaled by a positive number")


def _tolerance(ctx: _Context, at: YamlPath, spec: ClaimSpec, unit: str) -> tuple[float, float, str]:
    path = at + ("tolerance",)
    raw = spec.tolerance
    if raw is None:
        return 0.0, 0.0, "0"
    if spec.trend is not None:
        ctx.problem(path, f"a trend has no tolerance: it holds when rho passes {TREND_RHO:g} the right way")
        return 0.0, 0.0, ""
    try:
        if isinstance(raw, str) and raw.strip().endswith("%"):
            return unit_input.parse_percent(raw) / 100, 0.0, raw.strip()
        if isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 0:
            return 0.0, 0.0, "0"
        value = unit_input.parse_number(raw) if unit == "" else unit_input.parse_quantity(raw, unit)
    except ValueError as e:
        ctx.problem(path, f"{e} (a tolerance is a percent of the paper's value, e.g. '10%', or an amount "
                          f"{_unit_hint(unit)})")
        return 0.0, 0.0, ""
    if value < 0:
        ctx.problem(path, f"{raw!r} is impossible: a tolerance cannot be negative")
        return 0.0, 0.0, ""
    return 0.0, value, str(raw).strip()


def _unit_hint(unit: str) -> str:
    examples = {"s": "'147 ms'", "B": "'523KB'", "bit/s": "'2.6Mbit'", "J": "'60 mJ'", "W": "'405 mW'",
                "ratio": "'12%'", "count": "a number", "packets": "a number", "": "a plain number"}
    return f"in the metric's unit, {unit or 'none'}: e.g. {examples.get(unit, 'a number')}" if unit \
        else "a ratio's values are plain numbers"
