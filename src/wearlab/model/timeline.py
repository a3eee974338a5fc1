"""Timelines: what happens to the links during a run, from YAML and trace files.

An experiment may carry `timeline:` (one list of events) or `timelines:` (named lists; the matrix
sweeps them with `timeline: [static, walk-away]`, `static` being the built-in empty one). Times
are from the start of each run (each repetition of each cell starts the timeline again from the
topology's link state). An event:

    - {at: 5s, link: watch-phone, set: {delay: 60ms, rate: 500kbit}}   # both directions
    - {at: 8s, link: watch-phone, direction: phone->watch, set: {loss: 5%}}
    - {at: 10s, link: watch-phone, state: down}      # carries nothing until `state: up`
    - {at: 14s, link: watch-phone, state: up}        # back to what it was before going down
    - {at: 20s, link: watch-phone, reset: true}      # back to the topology's shaping
    - {at: 0s, link: phone-ap, direction: ap->phone, trace: traces/walk.csv}

`set:` takes the shaping keys of a topology link (rate, delay, jitter, loss, queue_packets, ...)
and changes only those keys. A link that is `down` loses every packet (netem loss 100 %) while its
interfaces and routes stay, as with a radio out of range: what the endpoints notice and how fast
is their own business (TCP retransmits, the handover policy).

Traces (`trace:`), from the event's `at` on, one direction or both:
- CSV (`.csv`): a header `time` plus any of `rate`, `delay`, `jitter`, `loss`; each row holds until
  the next. `time` in seconds (a number) or with a unit; other values written as in YAML
  ('500kbit', '40ms', '2%'). Every row gives every column (an empty cell is a gap, an error).
- Mahimahi (`.trace`, or `format: mahimahi`): one line per delivery opportunity of an MTU-sized
  packet, in ms since the trace's start (mm-link's format). wearlab turns it into a rate per
  `bin` (default 100 ms): opportunities x 1500 B x 8 / bin. A bin without opportunities gets one
  (netem cannot shape at rate 0 - a packet enqueued at 0 bit/s would wait forever); the number
  of such bins is reported. `loop: true` replays the trace until the run ends, as mm-link does.
Changes reach netem in place (`tc qdisc change`), so a rate change applies to packets enqueued
after it; packets already queued keep the departure time netem gave them.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from wearlab.errors import Problem
from wearlab.model import quantities, unit_input
from wearlab.model.shape import ShapeSpec
from wearlab.model.topology import Topology
from wearlab.model.yamlsrc import YamlPath, YamlSource, did_you_mean, dotted, problems_from_validation

STATIC = "static"                  # the built-in timeline without events
MTU_BITS = 1500 * 8                # a Mahimahi delivery opportunity carries one MTU-sized packet
TRACE_FORMATS = ("csv", "mahimahi")
TRACE_COLUMNS = ("rate", "delay", "jitter", "loss")


class EventSpec(BaseModel):
    """One timeline entry as written in YAML."""

    model_config = ConfigDict(extra="forbid")

    at: Annotated[float, BeforeValidator(lambda v: unit_input.parse_duration(v, bare_unit="s"))]
    link: str
    direction: str | None = None
    set: ShapeSpec | None = None
    state: Literal["up", "down"] | None = None
    reset: bool = False
    trace: str | None = None
    format: Literal["csv", "mahimahi"] | None = None
    bin: Annotated[float, BeforeValidator(lambda v: unit_input.parse_duration(v, bare_unit="ms")), Field(gt=0)] = 0.1
    loop: bool = False

    @model_validator(mode="after")
    def _one_action(self) -> EventSpec:
        actions = [k for k in ("set", "state", "trace") if getattr(self, k) is not None] + (["reset"] if self.reset else [])
        if len(actions) != 1:
            raise ValueError("an event does exactly one of set:, state: (up/down), reset: true or trace:"
                             + (f"; this one has {' and '.join(actions)}" if actions else ""))
        return self


@dataclass(frozen=True)
class LinkChange:
    """One change to apply: to directions (src, dst) of one link. action: set (with spec),
    down, up, reset."""

    at_s: float
    link: tuple[str, str]
    directions: tuple[tuple[str, str], ...]
    action: str
    spec: ShapeSpec | None = None
    origin: str = ""               # file:line of the event (or trace row) it came from

    def describe(self) -> str:
        dirs = ",".join(f"{s}->{d}" for s, d in self.directions)
        if self.action == "set":
            what = " ".join(f"{k}={_shown(getattr(self.spec, k))}" for k in sorted(self.spec.written()))
            return f"{dirs} set {what}"
        return f"{dirs} {self.action}"


def _shown(v: Any) -> str:
    return v.model_dump_json(exclude_none=True) if isinstance(v, BaseModel) else str(v)


@dataclass
class Trace:
    """A trace's changes relative to its start, and how long it lasts (for looping)."""

    changes: list[tuple[float, ShapeSpec, str]]
    length_s: float
    loop: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class Timeline:
    name: str
    changes: list[LinkChange]
    traces: list[tuple[LinkChange, Trace]] = field(default_factory=list)  # (anchor, trace)
    notes: list[str] = field(default_factory=list)

    def schedule(self, horizon_s: float) -> list[LinkChange]:
        """Every change up to `horizon_s`, traces expanded (looped ones repeated), in time order
        (stable: events at the same time apply in the order written)."""
        out = list(self.changes)
        for anchor, trace in self.traces:
            start = anchor.at_s
            while start < horizon_s:
                for t, spec, origin in trace.changes:
                    if start + t < horizon_s:
                        out.append(LinkChange(start + t, anchor.link, anchor.directions, "set", spec, origin))
                if not trace.loop or trace.length_s <= 0:
                    break
                start += trace.length_s
        return sorted(out, key=lambda c: c.at_s)

    def __len__(self) -> int:
        return len(self.changes) + len(self.traces)


# ---------------------------------------------------------------------------------------------


def resolve_link(topo: Topology, text: str) -> tuple[str, str] | None:
    """'watch-phone' (node names may hold '-': every split is tried) -> the link's ends as written."""
    for i, ch in enumerate(text):
        if ch == "-":
            a, b = text[:i], text[i + 1:]
            link = topo.link_between(a, b)
            if link is not None and a in topo.nodes and b in topo.nodes:
                return (link.a, link.b)
    return None


def load_timeline(src: YamlSource, at: YamlPath, name: str, raw: Any, topo: Topology,
                  horizon_s: float | None) -> tuple[Timeline, list[Problem]]:
    """Resolve the events at `at` in `src`. `horizon_s` is the longest a run can last (events at or
    after it can never happen: an error)."""
    problems: list[Problem] = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(at + path), dotted(at + path), message))

    tl = Timeline(name, [])
    if raw is None:
        return tl, problems
    if not isinstance(raw, list):
        problem((), "a timeline is a list of events, e.g. [{at: 5s, link: watch-phone, set: {delay: 60ms}}]")
        return tl, problems
    link_names = [f"{l.a}-{l.b}" for l in topo.links]
    for i, item in enumerate(raw):
        try:
            ev = EventSpec.model_validate(item)
        except ValidationError as e:
            problems += problems_from_validation(e, src.lines, src.file, EventSpec, at + (i,))
            continue
        link = resolve_link(topo, ev.link)
        if link is None:
            problem((i, "link"), f"no link '{ev.link}'{did_you_mean(ev.link, link_names)} "
                                 f"(links: {', '.join(link_names)})")
            continue
        directions = ((link[0], link[1]), (link[1], link[0]))
        if ev.direction is not None:
            parts = ev.direction.split("->")
            if len(parts) != 2 or (parts[0].strip(), parts[1].strip()) not in directions:
                problem((i, "direction"), f"'{ev.direction}' is not a direction of {ev.link}; write "
                                          f"{link[0]}->{link[1]} or {link[1]}->{link[0]}")
                continue
            directions = ((parts[0].strip(), parts[1].strip()),)
        if horizon_s is not None and ev.at >= horizon_s:
            problem((i, "at"), f"{quantities.format_duration(ev.at)} is after the end of the run "
                               f"({quantities.format_duration(horizon_s)}): it would never happen")
            continue
        origin = f"{src.file}:{src.line(at + (i,))}"
        if ev.set is not None:
            tl.changes.append(LinkChange(ev.at, link, directions, "set", ev.set, origin))
        elif ev.state is not None:
            tl.changes.append(LinkChange(ev.at, link, directions, ev.state, None, origin))
        elif ev.reset:
            tl.changes.append(LinkChange(ev.at, link, directions, "reset", None, origin))
        else:
            path = Path(ev.trace)
            if not path.is_absolute():
                path = Path(src.file).parent / path
            fmt = ev.format or ("mahimahi" if path.suffix in (".trace", ".up", ".down") else "csv")
            trace, found = load_trace(path, fmt, ev.bin, ev.loop)
            if found:
                problems += found
                continue
            if not path.exists():
                continue
            anchor = LinkChange(ev.at, link, directions, "trace", None, origin)
            tl.traces.append((anchor, trace))
            tl.notes += [f"{ev.trace}: {n}" for n in trace.notes]
    return tl, problems


def load_trace(path: Path, fmt: str, bin_s: float = 0.1, loop: bool = False) -> tuple[Trace, list[Problem]]:
    if not path.exists():
        return Trace([], 0.0), [Problem(str(path), None, None, "trace file not found")]
    if fmt == "mahimahi":
        return _mahimahi(path, bin_s, loop)
    return _csv_trace(path, loop)


def _csv_trace(path: Path, loop: bool) -> tuple[Trace, list[Problem]]:
    problems: list[Problem] = []
    file = str(path)
    changes: list[tuple[float, ShapeSpec, str]] = []
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        if not header or header[0] != "time":
            return Trace([], 0.0), [Problem(file, 1, None, "the first column must be `time`, e.g. "
                                                           "'time,rate,delay' (then rows like '0,1Mbit,20ms')")]
        for h in header[1:]:
            if h not in TRACE_COLUMNS:
                problems.append(Problem(file, 1, h, f"unknown column{did_you_mean(h, TRACE_COLUMNS)} "
                                                    f"(columns: time, {', '.join(TRACE_COLUMNS)})"))
        if len(header) < 2:
            problems.append(Problem(file, 1, None, f"no column to change; add any of {', '.join(TRACE_COLUMNS)}"))
        if problems:
            return Trace([], 0.0), problems
        last = -1.0
        for row in reader:
            line = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(row) != len(header):
                problems.append(Problem(file, line, None, f"{len(row)} values for {len(header)} columns"))
                continue
            cells = dict(zip(header, (c.strip() for c in row), strict=True))
            try:
                t = float(cells["time"]) if _is_number(cells["time"]) else unit_input.parse_duration(cells["time"], bare_unit="s")
            except ValueError as e:
                problems.append(Problem(file, line, "time", str(e)))
                continue
            if t < 0 or not math.isfinite(t):
                problems.append(Problem(file, line, "time", f"{cells['time']} is negative; times count from the trace's start"))
                continue
            if t <= last:
                problems.append(Problem(file, line, "time", f"{cells['time']} does not come after the previous row's time"))
                continue
            last = t
            values: dict[str, Any] = {}
            for k in header[1:]:
                if cells[k] == "":
                    problems.append(Problem(file, line, k, f"gap: no {k} at time {cells['time']}; every row gives "
                                                           "every column (repeat the previous value to keep it)"))
                    continue
                if cells[k].startswith("-"):
                    problems.append(Problem(file, line, k, f"{cells[k]} is negative"))
                    continue
                values[k] = cells[k]
            try:
                spec = ShapeSpec.model_validate(values)
            except ValidationError as e:
                for err in e.errors(include_url=False):
                    problems.append(Problem(file, line, ".".join(map(str, err["loc"])) or None, err["msg"]))
                continue
            changes.append((t, spec, f"{file}:{line}"))
    if not changes and not problems:
        problems.append(Problem(file, None, None, "the trace has no rows"))
    length = changes[-1][0] if changes else 0.0
    return Trace(changes, length, loop), problems


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _mahimahi(path: Path, bin_s: float, loop: bool) -> tuple[Trace, list[Problem]]:
    file = str(path)
    stamps: list[int] = []
    problems: list[Problem] = []
    prev = 0
    for line_no, text in enumerate(path.read_text().splitlines(), 1):
        text = text.strip()
        if not text:
            problems.append(Problem(file, line_no, None, "empty line; a Mahimahi trace has one timestamp (ms) per line"))
            continue
        if not text.isdigit():
            problems.append(Problem(file, line_no, None, f"'{text}' is not a non-negative whole number of ms"))
            continue
        ms = int(text)
        if ms < prev:
            problems.append(Problem(file, line_no, None, f"{ms} ms comes before the previous line's {prev} ms"))
            continue
        prev = ms
        stamps.append(ms)
    if not stamps and not problems:
        problems.append(Problem(file, None, None, "the trace has no delivery opportunities"))
    if problems:
        return Trace([], 0.0), problems
    # mm-link: the trace's period is its last timestamp (it loops after that).
    length_s = max(stamps[-1] / 1000, bin_s)
    n_bins = max(1, math.ceil(length_s / bin_s - 1e-9))
    counts = [0] * n_bins
    for ms in stamps:
        counts[min(n_bins - 1, int(ms / 1000 / bin_s))] += 1
    empty = sum(1 for c in counts if c == 0)
    changes = []
    prev_rate = None
    for i, c in enumerate(counts):
        rate = round(max(c, 1) * MTU_BITS / bin_s)
        if rate != prev_rate:
            changes.append((i * bin_s, ShapeSpec.model_validate({"rate": f"{rate}bit"}), f"{file}:bin {i}"))
            prev_rate = rate
    notes = [f"{len(stamps)} opportunities in {n_bins} bins of {quantities.format_duration(bin_s)} -> {len(changes)} rate changes"]
    if empty:
        notes.append(f"{empty} bins without opportunities run at one packet per bin (netem cannot shape at 0 bit/s)")
    return Trace(changes, length_s, loop, notes), []
