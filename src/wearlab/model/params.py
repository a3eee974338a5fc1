"""Declared parameters: what workloads and node kinds may be told, one normaliser each.

A `Param` is written once, in the workload or node kind that owns it, and everything else reads
that declaration: the experiment loader (fixed under `workload:`/`nodes:` or varied under
`matrix:`), the run matrix, the CSV columns, progress lines, the resolved `experiment.yaml`.
Normalisers take what YAML gives (a string, a number) and return the value the code uses
(bytes, bit/s, seconds, a canonical string), or raise ValueError with a message for the user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wearlab.model import unit_input
from wearlab.model.yamlsrc import did_you_mean

Normalizer = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Param:
    """One parameter of a workload or node kind.

    default: the value when neither fixed nor varied (None: no value, unless `required`).
    applies: given the other values of a cell, whether this parameter means anything there; a
             cell where it does not gets "" for it (plain HTTP has no TLS version), and cells
             differing only in it collapse into one.
    to_doc: the value as the YAML would write it (bytes -> "100KB"), for the resolved experiment.
    """

    name: str
    normalize: Normalizer = _same
    default: Any = None
    doc: str = ""
    required: bool = False
    applies: Callable[[dict[str, Any]], bool] | None = None
    applies_doc: str = ""  # when it applies, for messages: "protocol is https"
    to_doc: Callable[[Any], Any] = _same
    shown: Callable[[Any], str] = str  # how a value reads in a progress line or a table


@dataclass(frozen=True)
class ParamSet:
    """An ordered set of parameters (declaration order is column order)."""

    params: tuple[Param, ...] = field(default_factory=tuple)

    def __iter__(self):
        return iter(self.params)

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.params)

    def __getitem__(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def names(self) -> list[str]:
        return [p.name for p in self.params]


# ---------------------------------------------------------------------------------------------
# Normalisers


def choice(name: str, choices: Iterable[str], *, lower: bool = False) -> Normalizer:
    options = tuple(choices)

    def check(value: Any) -> str:
        v = value.strip().lower() if lower and isinstance(value, str) else value
        if isinstance(v, str) and v in options:
            return v
        shown = f"'{value}'" if isinstance(value, str) else repr(value)
        raise ValueError(f"{name} {shown} is not one of: {', '.join(options)}{did_you_mean(value, options)}")
    return check


def size(value: Any) -> int:
    return unit_input.parse_size(value)


def positive_size(value: Any) -> int:
    n = unit_input.parse_size(value)
    if n <= 0:
        raise ValueError(f"'{value}' is impossible here: must be more than 0 bytes")
    return n


def rate(value: Any) -> int:
    r = unit_input.parse_rate(value)
    if r <= 0:
        raise ValueError(f"'{value}' is impossible here: a rate must be more than 0")
    return r


def duration(value: Any) -> float:
    return unit_input.parse_duration(value, bare_unit="s")


def positive_duration(value: Any) -> float:
    d = unit_input.parse_duration(value, bare_unit="s")
    if d <= 0:
        raise ValueError(f"'{value}' is impossible here: must be longer than 0 s")
    return d


def fraction(value: Any) -> float:
    """0.3 or '30%' -> 0.3, strictly between 0 and 1."""
    if isinstance(value, str) and value.strip().endswith("%"):
        f = unit_input.parse_percent(value) / 100
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        f = float(value)
    else:
        raise ValueError(f"{value!r} is not a fraction; write e.g. 0.3 or '30%'")
    if not 0 < f < 1:
        raise ValueError(f"{value!r} is impossible here: must be between 0 and 1")
    return f


def flag(name: str) -> Normalizer:
    """true/false (YAML also reads on/off/yes/no as booleans); --set gives the words."""
    words = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False}

    def check(value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in words:
            return words[value.strip().lower()]
        raise ValueError(f"{name} {value!r} is not true or false")
    return check


def text(name: str) -> Normalizer:
    def check(value: Any) -> str:
        if isinstance(value, str) and value.strip() and "\n" not in value:
            return value.strip()
        raise ValueError(f"{name} must be one line of text, got {value!r}")
    return check
