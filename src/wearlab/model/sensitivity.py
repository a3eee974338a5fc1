"""Seed 004's characterizer as data: flows labelled with a sensitivity level, a battery that the
energy model drains, and thresholds that say which levels go over tcpcrypt at which battery level.

Seed 004 (Nikolidakis et al., section 2.4, Fig. 3) proposes a module that marks each piece of data
with a criticality level 0-4 (0 trivial, 4 highest confidentiality) and passes it to tcpcrypt or to
plain TCP, one TCP session per stack: with enough energy every level is encrypted, and as the
battery discharges only the higher levels are. The paper gives no numbers for the bands; here they
are the experiment's `thresholds`: `{50: 0, 20: 2, 0: 4}` reads "at 50 % and above encrypt levels
>= 0, from 20 % levels >= 2, from 0 % level 4 only". Below the lowest band nothing is encrypted.

The decision is taken per flow, at the flow's start, from the battery level at that moment:

    level(t) = start % - 100 x (energy charged so far in the run, J) / (capacity, J)
    capacity = mAh x 3.6 C/mAh x V   (the device profile's battery and its cell voltage)

and is one of item 2's per-flow modes: `require` or `opportunistic` (tcpcrypt, reset or relay a
fallback) for the levels the band encrypts, `off` (plain TCP, the daemon not in the path) for the
others. The workload that runs flows (workloads/characterizer.py) enforces it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from wearlab.model import unit_input

LEVELS = (0, 1, 2, 3, 4)
DECISIONS = ("require", "opportunistic", "off")
# mAh -> coulombs
COULOMBS_PER_MAH = 3.6


def _level(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a sensitivity level is a whole number 0-4 (0 trivial, 4 most confidential), got {value!r}")
    if value not in LEVELS:
        raise ValueError(f"sensitivity {value} is outside 0-4 (0 trivial, 4 most confidential)")
    return value


def _size(value: Any) -> int:
    n = unit_input.parse_size(value)
    if n <= 0:
        raise ValueError(f"'{value}' is impossible here: a flow moves more than 0 bytes")
    return n


class FlowSpec(BaseModel):
    """One labelled flow: an object the client fetches on its own TCP connection."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]
    sensitivity: Annotated[int, BeforeValidator(_level)]
    size: Annotated[int, BeforeValidator(_size)]


def battery_percent(value: Any) -> float:
    """A battery level: 80 or '80%' -> 80.0, within 0-100."""
    if isinstance(value, str) and value.strip().endswith("%"):
        pct = unit_input.parse_percent(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        pct = float(value)
    else:
        raise ValueError(f"battery is a level in percent (e.g. 80 or '80%'), got {value!r}")
    if not 0 <= pct <= 100:
        raise ValueError(f"battery {value!r} is impossible: a battery level is 0-100 %")
    return pct


@dataclass(frozen=True)
class Thresholds:
    """Battery bands, highest first: (from this battery level in %, the lowest level encrypted)."""

    bands: tuple[tuple[float, int], ...]

    def min_level(self, battery_pct: float) -> int | None:
        """The lowest sensitivity encrypted at this battery level; None: nothing is."""
        for floor, level in self.bands:
            if battery_pct >= floor:
                return level
        return None

    def text(self) -> str:
        """The canonical form, as `thresholds:` may be written: '50:0 20:2 0:4'."""
        return " ".join(f"{floor:g}:{level}" for floor, level in self.bands)


def thresholds(value: Any) -> str:
    """`thresholds:` as a mapping {battery %: lowest level encrypted} or its text '50:0 20:2 0:4'
    -> the canonical text (a cell's value: a CSV column, a --set, a matrix entry). Battery levels
    0-100, sensitivity levels 0-4, and monotonic: a lower battery never encrypts more levels."""
    return parse_thresholds(value).text()


def parse_thresholds(value: Any) -> Thresholds:
    if isinstance(value, str):
        pairs: list[tuple[Any, Any]] = []
        for part in value.split():
            floor, sep, level = part.partition(":")
            if not sep:
                raise ValueError(f"thresholds '{value}': write battery:level pairs, e.g. '50:0 20:2 0:4'")
            pairs.append((floor.strip().rstrip("%"), level.strip()))
        items = [(_number(f, value), _int(lv, value)) for f, lv in pairs]
    elif isinstance(value, Mapping):
        items = [(_number(f, value), lv) for f, lv in value.items()]
    else:
        raise ValueError("thresholds is a mapping {battery %: lowest sensitivity encrypted}, e.g. "
                         f"{{50: 0, 20: 2, 0: 4}}, got {value!r}")
    if not items:
        raise ValueError("thresholds needs at least one band, e.g. {0: 0} (encrypt every level)")
    bands: list[tuple[float, int]] = []
    for floor, level in items:
        if not 0 <= floor <= 100:
            raise ValueError(f"thresholds: battery level {floor:g} is outside 0-100 %")
        try:
            bands.append((floor, _level(level)))
        except ValueError as e:
            raise ValueError(f"thresholds at {floor:g} %: {e}") from None
    bands.sort(key=lambda b: -b[0])
    for (hi, lo_level), (lo, level) in zip(bands, bands[1:]):
        if hi == lo:
            raise ValueError(f"thresholds: battery level {hi:g} % is given twice")
        if level < lo_level:
            raise ValueError(f"thresholds are not monotonic: from {lo:g} % they encrypt levels >= {level} but from "
                             f"{hi:g} % only levels >= {lo_level}; a lower battery must not encrypt more")
    return Thresholds(tuple(bands))


def _number(v: Any, whole: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    try:
        return float(str(v).strip().rstrip("%"))
    except ValueError:
        raise ValueError(f"thresholds {whole!r}: {v!r} is not a battery level in %") from None


def _int(v: str, whole: Any) -> int:
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"thresholds {whole!r}: {v!r} is not a sensitivity level 0-4") from None


def decide(level: int, battery_pct: float, bands: Thresholds, encrypted_as: str) -> str:
    """A flow's mode at its start: `encrypted_as` (require | opportunistic) when the battery's band
    encrypts its level, `off` otherwise."""
    floor = bands.min_level(battery_pct)
    return encrypted_as if floor is not None and level >= floor else "off"


def capacity_joules(mah: float, volts: float) -> float:
    """A battery's energy: mAh x 3.6 C/mAh x V."""
    return mah * COULOMBS_PER_MAH * volts


def level_after(start_pct: float, charged_j: float, capacity_j: float) -> float:
    """The battery level after the energy model has charged `charged_j` since `start_pct`."""
    return start_pct - 100.0 * charged_j / capacity_j
