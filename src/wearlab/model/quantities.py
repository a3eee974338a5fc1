"""The units of measured values: one table that runs.csv, the end-of-run summary table,
`wearlab compare` and the Prometheus exporter all read.

A metric declares its unit by symbol (`Metric("wire_connect_s", "s", doc=...)`, workloads.workload); the
symbol must be one of UNITS. Each unit says, once:
- how a value prints for a person (`format`): scaled to a readable prefix (µs/ms below 1 s,
  kB/MB, kbit/s/Mbit/s, mJ/J, % for a ratio) with significant digits, so a small value is never
  rounded to 0 (0.4 J prints "400 mJ", not "0");
- how runs.csv writes it (`csv`): `csv_decimals` fixed decimals, the resolution of the
  measurement in that unit, never flattening a non-zero value to 0;
- how Prometheus sees it (`base`, `to_base`, `prometheus_name`, `buckets`): Prometheus names
  carry their base unit as a suffix (seconds, bytes, bytes_per_second, joules, watts, ratio)
  and values are in that base unit, so bit/s are exported as bytes per second (/8); a histogram
  of one run's values gets `buckets` (upper bounds, in the base unit).

Adding a unit here is what makes a new kind of metric (energy in J, power in W) appear in the
CSV, the summary, `compare` and the exporter.

This is also the one module that formats values: besides the table's forms above, a value
written back as wearlab YAML input (`format_rate`, `format_duration`, `format_size`,
`format_percent`: tc's and netem's spelling, exact, so wearlab.model.unit_input - which only
parses - reads the same number back; e.g. a resolved plan's link shape, or a parameter's default
in `wearlab kinds`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

SPREAD_DIGITS = 2          # an IQR beside a median: its second digit is already noise
SIGNIFICANT = 3            # digits a table shows: a median [IQR] is rarely known better than that
# Suffixes a histogram's name may not end with (promtool: they belong to counters, a histogram's
# own series, or info gauges), and words it may not contain.
RESERVED_SUFFIXES = ("_total", "_count", "_sum", "_bucket", "_created", "_info")
# promtool's list of unit abbreviations a name must spell out (one `_`-separated word each).
ABBREVIATIONS = frozenset({"s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d"})
NAME = re.compile(r"[a-z_][a-z0-9_]*")


def _steps(low: float, high: float, mantissas: tuple[float, ...] = (1, 2.5, 5)) -> tuple[float, ...]:
    """Bucket bounds mantissa x 10^k from `low` to `high` inclusive."""
    out = []
    k = math.floor(math.log10(low))
    while True:
        for m in mantissas:
            v = float(f"{m * 10 ** k:.12g}")
            if v > high * (1 + 1e-9):
                return tuple(out)
            if v >= low * (1 - 1e-9):
                out.append(v)
        k += 1


@dataclass(frozen=True)
class Unit:
    symbol: str                                 # as a metric declares it
    doc: str
    base: str                                   # Prometheus base unit, the name's suffix ("" none)
    to_base: float                              # value x to_base = value in the base unit
    scales: tuple[tuple[float, str], ...]       # (factor, shown symbol), ascending: how a value prints
    buckets: tuple[float, ...]                  # histogram bounds, base unit
    name_suffixes: tuple[str, ...] = ()         # a metric name's own unit suffix, replaced by `base`
    csv_decimals: int = 6                       # runs.csv: 1 µs for seconds, as the captures resolve

    # -- for people --------------------------------------------------------------------------
    def _scale(self, value: float) -> tuple[float, str]:
        """The largest prefix the value reaches (rounded as it will print), else the smallest;
        zero prints in the unit itself (factor 1) when the unit has it."""
        if value == 0 or not math.isfinite(value):
            return next(((f, s) for f, s in self.scales if f == 1), self.scales[0])
        rounded = abs(float(f"{value:.{SIGNIFICANT}g}"))
        chosen = self.scales[0]
        for factor, shown in self.scales:
            if rounded >= factor * (1 - 1e-12):
                chosen = (factor, shown)
        return chosen

    def format(self, value: float, *, digits: int = SIGNIFICANT) -> str:
        """`value` (in this unit) for a person: 0.0301 s -> '30.1 ms', 0.4 J -> '400 mJ'."""
        factor, shown = self._scale(value)
        return _join(_number(value / factor, digits, whole=factor == 1), shown)

    def format_spread(self, value: float, spread: float, *, digits: int = SIGNIFICANT) -> str:
        """A median and its spread (IQR), each with its own unit and scale: '30.1 ms [1.2 ms]',
        '400 mJ [20 µJ]' - a bare '[0.0329]' made a reader guess the scale. The spread keeps
        two significant digits: it is an estimate of an estimate."""
        return f"{self.format(value, digits=digits)} [{self.format(spread, digits=SPREAD_DIGITS)}]"

    # -- for runs.csv ------------------------------------------------------------------------
    def csv(self, value: float | int) -> str:
        """A float with `csv_decimals` decimals (today's resolution); a non-zero value below it
        keeps its significant digits instead of becoming 0."""
        if isinstance(value, bool) or isinstance(value, int):
            return str(int(value))
        text = f"{value:.{self.csv_decimals}f}"
        if value != 0 and math.isfinite(value) and float(text) == 0:
            return f"{value:.6g}"
        return text

    # -- for Prometheus ----------------------------------------------------------------------
    def to_prometheus(self, value: float) -> float:
        return value * self.to_base

    def prometheus_name(self, metric: str) -> str:
        """The metric's name in base units: `wire_connect_s` (s) -> `wire_connect_seconds`,
        `down_goodput_bps` (bit/s) -> `down_goodput_bytes_per_second`, `bytes_up_total` (B) ->
        `bytes_up_total_bytes`, `down_bytes` (B) -> `down_bytes`, `http_code` (count) ->
        `http_code`. Raises ValueError for a name Prometheus' conventions refuse."""
        if not NAME.fullmatch(metric):
            raise ValueError(f"metric {metric!r}: a metric name is lowercase letters, digits and _")
        stem = metric
        for suffix in self.name_suffixes:
            if stem.endswith(suffix) and len(stem) > len(suffix):
                stem = stem[: -len(suffix)]
                break
        if self.base and not stem.endswith("_" + self.base):
            stem = f"{stem}_{self.base}"
        problem = None
        if stem.endswith(RESERVED_SUFFIXES):
            problem = f"its exported name {stem} ends with {stem[stem.rfind('_'):]}, which Prometheus reserves"
        elif "histogram" in stem:
            problem = "it is exported as a histogram, whose name may not say 'histogram'"
        elif ABBREVIATIONS & set(stem.split("_")):
            problem = f"spell its unit out ({', '.join(sorted(ABBREVIATIONS & set(stem.split('_'))))})"
        if problem:
            raise ValueError(f"metric {metric!r} ({self.symbol}): {problem}; rename it")
        return stem


def _number(x: float, digits: int, *, whole: bool) -> str:
    """At least `digits` significant digits, all the integer part, thousands separated. Never '0'
    for a non-zero x. `whole`: x is in the unit itself (not a prefix), where a whole number (a
    count, bytes) prints as one."""
    if x == 0:
        return "0"
    if not math.isfinite(x):
        return str(x)
    if whole and x == round(x) and abs(x) < 1e15:
        return f"{int(round(x)):,}"
    magnitude = math.floor(math.log10(abs(float(f"{x:.{digits}g}"))))
    return f"{x:,.{max(0, digits - 1 - magnitude)}f}"


def _join(number: str, shown: str) -> str:
    return f"{number} {shown}" if shown else number


_SECONDS = ((1e-6, "µs"), (1e-3, "ms"), (1.0, "s"))
_COUNTS = _steps(1, 1e6, (1, 2, 5))

UNITS: dict[str, Unit] = {u.symbol: u for u in (
    Unit("s", "time", "seconds", 1.0, _SECONDS,
         (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
         name_suffixes=("_s",)),
    Unit("B", "bytes", "bytes", 1.0, ((1.0, "B"), (1e3, "kB"), (1e6, "MB"), (1e9, "GB")),
         _steps(1e2, 1e8)),
    Unit("bit/s", "a rate in bits per second (exported in bytes per second)", "bytes_per_second", 1 / 8,
         ((1.0, "bit/s"), (1e3, "kbit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s")), _steps(1e2, 1e9),
         name_suffixes=("_bps",)),
    Unit("J", "energy", "joules", 1.0, ((1e-6, "µJ"), (1e-3, "mJ"), (1.0, "J"), (1e3, "kJ")), _steps(1e-4, 1e4),
         name_suffixes=("_j",)),
    Unit("W", "power", "watts", 1.0, ((1e-6, "µW"), (1e-3, "mW"), (1.0, "W")), _steps(1e-4, 1e2),
         name_suffixes=("_w",)),
    Unit("count", "how many of something (unitless)", "", 1.0, ((1.0, ""),), _COUNTS),
    Unit("packets", "packets", "packets", 1.0, ((1.0, "packets"),), _COUNTS),
    Unit("ratio", "a share, 0..1 (prints as %)", "ratio", 1.0, ((0.01, "%"),),
         (0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0),
         name_suffixes=("_ratio",)),
)}


def unit(symbol: str) -> Unit:
    """The unit a metric declares; an unknown symbol is a programming error (ValueError)."""
    try:
        return UNITS[symbol]
    except KeyError:
        raise ValueError(f"unknown unit {symbol!r}; units: {', '.join(UNITS)} (wearlab.model.quantities)") from None


# -- as YAML input: the syntax wearlab.model.unit_input parses ---------------------------------
# Exact (not three digits, as for people): a formatted value parses back to the same number.

def plain_number(value: float | str) -> str:
    """A number without a pointless '.0' or float noise: 10.0 -> '10', 0.1 + 0.2 -> '0.3'."""
    value = float(value) if isinstance(value, str) else value
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"


def _exact(x: float) -> bool:
    """True when x prints in at most 6 significant digits, so the unit choice stays readable."""
    return float(f"{x:.6g}") == x


def _round(x: float) -> float:
    """Drop float noise (0.1+0.2 style) so formatted values stay short and parse back equal."""
    return float(f"{x:.12g}")


def format_rate(bps: int | float) -> str:
    """10_000_000 -> '10Mbit'; 1_100_000 -> '1.1Mbit'; 236_700 -> '236.7kbit' (tc's spelling)."""
    for factor, shown in ((10**9, "Gbit"), (10**6, "Mbit"), (10**3, "kbit")):
        if bps >= factor and _exact(bps / factor):
            return f"{plain_number(bps / factor)}{shown}"
    return f"{plain_number(bps)}bit"


def format_duration(seconds: float) -> str:
    """0.005 -> '5ms'; 0.00025 -> '250us'; 120 -> '120s'; 0 -> '0ms' (netem's spelling)."""
    if seconds == 0:
        return "0ms"
    for factor, shown in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if seconds >= factor:
            return f"{plain_number(_round(seconds / factor))}{shown}"
    return f"{plain_number(_round(seconds / 1e-6))}us"


def format_size(nbytes: int) -> str:
    """1000 -> '1KB'; 1024 -> '1KiB'; 1500 -> '1.5KB'; 7 -> '7B'."""
    for factor, shown in ((10**9, "GB"), (2**30, "GiB"), (10**6, "MB"), (2**20, "MiB"),
                          (10**3, "KB"), (2**10, "KiB")):
        if nbytes >= factor and _exact(nbytes / factor) and nbytes % factor == 0:
            return f"{plain_number(nbytes / factor)}{shown}"
    for factor, shown in ((10**6, "MB"), (10**3, "KB")):
        if nbytes >= factor and _exact(nbytes / factor):
            return f"{plain_number(nbytes / factor)}{shown}"
    return f"{nbytes}B"


def format_percent(pct: float) -> str:
    """1.0 -> '1%'; 0.5 -> '0.5%' (a percent, 0..100)."""
    return f"{plain_number(_round(pct))}%"
