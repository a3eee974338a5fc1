"""Load YAML into plain Python values while remembering where every key and item came from.

Validation happens on plain dicts/lists (pydantic never sees ruamel's node types), so the line
numbers have to be captured on the way in: `lines` maps a path such as ("links", 2, "delay") to its
1-based line. `problems_from_validation` turns a pydantic ValidationError into one Problem per
error, located with that map, worded for someone editing the YAML rather than the Python model.
"""

from __future__ import annotations

import datetime
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from wearlab.errors import InputError, Problem

YamlPath = tuple[str | int, ...]
LineMap = dict[YamlPath, int]

# Aliases can make a small file expand enormously ("billion laughs"); a testbed description never
# needs anywhere near this many values.
_MAX_VALUES = 100_000


@dataclass(frozen=True)
class YamlSource:
    """A parsed YAML file: plain data plus the line of every key and list item."""

    file: str
    data: Any
    lines: LineMap = field(default_factory=dict)

    def line(self, path: YamlPath = ()) -> int | None:
        return line_of(self.lines, path)


def load_yaml(path: str | Path) -> YamlSource:
    """Read and parse one YAML file; every failure becomes an InputError naming the file."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError([Problem(file, None, None, "file not found")]) from None
    except IsADirectoryError:
        raise InputError([Problem(file, None, None, "is a directory, not a YAML file")]) from None
    except PermissionError:
        raise InputError([Problem(file, None, None, "permission denied reading the file")]) from None
    except UnicodeDecodeError as e:
        line = _line_of_offset(Path(path).read_bytes(), e.start)
        raise InputError([Problem(file, line, None, "not UTF-8 text (is this really a YAML file?)")]) from None
    except OSError as e:
        raise InputError([Problem(file, None, None, f"cannot read the file: {e.strerror or e}")]) from None
    return parse_yaml(text, file)


def _line_of_offset(raw: bytes, offset: int) -> int:
    return raw.count(b"\n", 0, offset) + 1


def parse_yaml(text: str, file: str) -> YamlSource:
    """Parse YAML text (round-trip loader, for positions) into plain values and a line map."""
    yaml = YAML(typ="rt")
    try:
        node = yaml.load(text)
    except MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else None
        what = e.problem or e.context or "invalid YAML"
        dup = re.match(r'found duplicate key (".*?") with value', what)
        if dup:
            what = f"duplicate key {dup.group(1)}; a key may appear only once in a mapping"
        elif e.context and e.problem:
            what = f"{e.problem} ({e.context})"
        raise InputError([Problem(file, line, None, f"YAML syntax error: {what}")]) from None
    except (YAMLError, ValueError, TypeError, RecursionError) as e:
        # ruamel raises a few unmarked errors (bad tags, odd scalars); they still deserve one line.
        raise InputError([Problem(file, None, None, f"cannot parse YAML: {e}")]) from None
    lines: LineMap = {}
    try:
        data = _Plain(lines).convert(node, ())
    except _TooBig as e:
        raise InputError([Problem(file, None, None, str(e))]) from None
    if isinstance(node, (CommentedMap, CommentedSeq)):
        lines.setdefault((), node.lc.line + 1)
    return YamlSource(file, data, lines)


class _TooBig(Exception):
    pass


class _Plain:
    """Convert ruamel round-trip nodes to dict/list/str/int/float/bool/None, recording lines."""

    def __init__(self, lines: LineMap) -> None:
        self.lines = lines
        self.count = 0
        self.stack: set[int] = set()

    def convert(self, node: Any, path: YamlPath) -> Any:
        self.count += 1
        if self.count > _MAX_VALUES:
            raise _TooBig(f"more than {_MAX_VALUES} values (alias expansion?); refusing to load")
        if isinstance(node, (CommentedMap, CommentedSeq)):
            if id(node) in self.stack:
                raise _TooBig("a YAML alias refers to itself; recursive structures are not allowed")
            self.stack.add(id(node))
            try:
                return self._mapping(node, path) if isinstance(node, CommentedMap) else self._sequence(node, path)
            finally:
                self.stack.discard(id(node))
        return _scalar(node)

    def _mapping(self, node: CommentedMap, path: YamlPath) -> dict:
        out = {}
        for key, value in node.items():
            key = _scalar(key)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                key = str(key)  # complex keys ({a: 1}: x) are nonsense here; keep them printable
            sub = path + (key,)
            try:
                self.lines[sub] = node.lc.key(key)[0] + 1
            except (KeyError, TypeError, AttributeError):
                # Keys pulled in by a merge (<<: *base) have no position of their own here.
                self.lines[sub] = node.lc.line + 1
            out[key] = self.convert(value, sub)
        return out

    def _sequence(self, node: CommentedSeq, path: YamlPath) -> list:
        out = []
        for i, value in enumerate(node):
            sub = path + (i,)
            try:
                self.lines[sub] = node.lc.item(i)[0] + 1
            except (KeyError, TypeError, AttributeError):
                self.lines[sub] = node.lc.line + 1
            out.append(self.convert(value, sub))
        return out


def _scalar(value: Any) -> Any:
    """ruamel's scalar subclasses (ScalarFloat, ScalarBoolean, ...) to the builtin types."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, TaggedScalar):
        return str(value.value)
    if isinstance(value, bool) or type(value).__name__ == "ScalarBoolean":
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        # A bare date is never meaningful in wearlab YAML; as text it fails validation readably.
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# ---------------------------------------------------------------------------------------------
# Locating and wording problems


@dataclass(frozen=True)
class Where:
    """Where a document sits in its file (`at`: its path there, e.g. ("topology",) for a topology
    inline in an experiment), so later steps - the plan - can still point at a file, line and
    field. `file` None: not from a file (built in code)."""

    file: str | None
    lines: LineMap = field(default_factory=dict, compare=False, repr=False)
    at: YamlPath = ()

    def problem(self, path: YamlPath, message: str) -> Problem:
        full = tuple(self.at) + tuple(path)
        return Problem(self.file or "<topology>", line_of(self.lines, full), dotted(full) or None, message)

    def written(self, path: YamlPath) -> bool:
        """Whether the file has this key."""
        return (tuple(self.at) + tuple(path)) in self.lines


def line_of(lines: LineMap, path: YamlPath) -> int | None:
    """Line of `path`, or of its closest ancestor that appears in the file (for missing keys)."""
    path = tuple(path)
    while True:
        if path in lines:
            return lines[path]
        if not path:
            return None
        path = path[:-1]


def dotted(path: YamlPath) -> str:
    """("links", 2, "delay") -> "links[2].delay"; keys containing dots are bracketed."""
    out = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and re.fullmatch(r"[A-Za-z0-9_\-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    return out


def suggest(word: object, choices: typing.Iterable[str]) -> str | None:
    """Closest choice to a misspelt word, or None."""
    if not isinstance(word, str):
        return None
    choices = list(choices)
    match = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not match:
        lowered = {c.lower(): c for c in choices}
        match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
        match = [lowered[m] for m in match]
    return match[0] if match else None


def did_you_mean(word: object, choices: typing.Iterable[str]) -> str:
    """"; did you mean 'x'?" or "" when nothing is close."""
    best = suggest(word, choices)
    return f"; did you mean '{best}'?" if best else ""


def describe(value: object) -> str:
    """Short description of a YAML value for messages."""
    if value is None:
        return "nothing (empty value)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    return repr(value)


def problems_from_validation(
    error: ValidationError,
    lines: LineMap,
    file: str,
    model: type[BaseModel] | None = None,
    at: YamlPath = (),
) -> list[Problem]:
    """One Problem per pydantic error. `model` is the class that was validated (for suggesting
    known keys); `at` is where the validated mapping sits in the file (for inline sub-documents)."""
    problems = []
    for err in error.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p != "[key]")
        path = tuple(at) + loc
        message = _message(err, loc, model)
        problems.append(Problem(file, line_of(lines, path), dotted(path) or None, message))
    return sort_problems(problems)


def sort_problems(problems: list[Problem]) -> list[Problem]:
    """Files in order of first mention, lines ascending within a file (unlocated last);
    exact duplicates dropped."""
    order: dict[str, int] = {}
    unique: list[Problem] = []
    for p in problems:
        order.setdefault(p.file, len(order))
        if p not in unique:
            unique.append(p)
    return sorted(unique, key=lambda p: (order[p.file], p.line is None, p.line or 0))


def _message(err: dict, loc: YamlPath, model: type[BaseModel] | None) -> str:
    kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "extra_forbidden":
        key = loc[-1] if loc else "?"
        allowed = allowed_keys(model, loc[:-1]) if model else []
        hint = did_you_mean(key, allowed)
        if not hint and allowed:
            hint = f" (allowed here: {', '.join(allowed)})"
        return f"unknown key '{key}'{hint}"
    if kind == "missing":
        return f"missing required key '{loc[-1]}'" if loc else "missing required value"
    if kind in ("literal_error", "enum"):
        expected = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return f"{describe(value)} is not one of: {', '.join(expected)}{did_you_mean(value, expected)}"
    if kind in ("value_error", "assertion_error"):
        return re.sub(r"^(Value error|Assertion failed), ", "", err["msg"])
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping (key: value), got {describe(value)}"
    if kind in ("list_type", "tuple_type", "set_type"):
        return f"expected a list, got {describe(value)}"
    if kind in ("string_type", "string_sub_type"):
        return f"expected text, got {describe(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {describe(value)}"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number, got {describe(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {describe(value)}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        words = {"greater_than": "greater than", "greater_than_equal": "at least",
                 "less_than": "less than", "less_than_equal": "at most"}[kind]
        limit = next(iter(ctx.values()), "?")
        return f"{describe(value)} is impossible here: must be {words} {limit}"
    if kind in ("too_short", "too_long"):
        return f"{err['msg'].replace('Value', 'value')}"
    return err["msg"]


def allowed_keys(model: type[BaseModel], loc: YamlPath) -> list[str]:
    """Field names of the model found at `loc` inside `model` (walking lists and dicts)."""
    target = _model_at(model, loc)
    if target is None:
        return []
    return [f.alias or name for name, f in target.model_fields.items()]


def _model_at(model: type[BaseModel], loc: YamlPath) -> type[BaseModel] | None:
    t: Any = model
    for part in loc:
        t = _unwrap(t)
        if isinstance(t, type) and issubclass(t, BaseModel):
            fields = {f.alias or n: f for n, f in t.model_fields.items()}
            if part not in fields:
                return None
            t = fields[part].annotation
            continue
        origin, args = typing.get_origin(t), typing.get_args(t)
        if origin in (list, tuple, set) and args:
            t = args[0]
        elif origin is dict and len(args) == 2:
            t = args[1]
        else:
            return None
    t = _unwrap(t)
    return t if isinstance(t, type) and issubclass(t, BaseModel) else None


def _unwrap(t: Any) -> Any:
    """Strip Annotated[...] and Optional[...] to the interesting type."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(t) if a is not type(None)]
            models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
            t = models[0] if models else (members[0] if members else t)
            if not models and len(members) != 1:
                return t
        else:
            return t


class LocatedProblems:
    """Collects problems located relative to where a document sits in its file (`at`: the path of
    the topology or page inside it), each with its line and dotted field."""

    def __init__(self, file: str, lines: LineMap, at: YamlPath) -> None:
        self.file, self.lines, self.at = file, lines, tuple(at)
        self.problems: list[Problem] = []

    def line(self, path: YamlPath) -> int | None:
        return line_of(self.lines, self.at + tuple(path))

    def __call__(self, path: YamlPath, message: str) -> None:
        full = self.at + tuple(path)
        self.problems.append(Problem(self.file, line_of(self.lines, full), dotted(full) or None, message))

