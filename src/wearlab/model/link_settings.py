"""A link's settings as matrix keys: `link.<link>.<field>`, so a matrix can sweep a link's rate,
delay, loss or band the way it sweeps a workload parameter or a node's option.

    matrix:
      link.watch-ap.band: [2.4GHz, 5GHz]          # both directions (band: the link's own)
      link.watch-ap.rate: [1Mbit, 5Mbit]
      link.watch-ap.forward.delay: [5ms, 20ms]    # one direction: forward is between[0] -> between[1]
      link.watch-ap.profile: [wifi-2g4-good, wifi-2g4-fair]   # a profile of the link's own medium

The spelling: `link.` then the link's name as timelines write it (its two ends, `watch-ap`), then
a field a topology link takes (topology.LINK_SETTINGS), under `forward.`/`reverse.` for one
direction as a topology link writes them. It cannot be read as a node setting (`node.option`):
node names and options hold no '.', so a node setting has two dot-separated parts and a link
setting three or four; and a link's name holds a '-', which no node name does.

Values are checked as the topology checks a link's field (`Topology.with_link_settings`: the same
`LinkSpec` validation, the same fold, `band` only on a WiFi link, a `profile` only of the link's
medium, the interference rule resolved again). A cell's `profile` takes the place of the link's
`profile:` under the fields the topology writes beside it, and the cell's other link keys go on
top: explicit beats preset, as in a topology (the rule is Topology.with_link_settings'). A cell's value is kept as a topology document writes it ('5Mbit', '20ms', '1%', '5GHz'),
so runs.csv, `compare` and claims show and select it as written; the plan turns each cell's
values into the cell's links (plan.plan), and a run reads them from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from wearlab.model.shape import Shape
from wearlab.model.timeline import resolve_link
from wearlab.model.topology import LINK_DIRECTIONS, LINK_SETTINGS, LINK_WIDE_SETTINGS, LinkSpec, Topology
from wearlab.model.yamlsrc import did_you_mean

PREFIX = "link"
SPELLING = "link.<link>.<field> (e.g. link.watch-ap.rate, link.watch-ap.forward.delay)"


def is_link_key(key: Any) -> bool:
    """Whether a matrix key names a link's setting (three or four dot-separated parts after `link`)."""
    return isinstance(key, str) and key.startswith(PREFIX + ".") and key.count(".") in (2, 3)


@dataclass(frozen=True)
class LinkKey:
    """A parsed `link.<link>.[forward.|reverse.]<field>`: the link's ends as the topology writes them."""

    ends: tuple[str, str]
    direction: str | None
    field: str

    def written(self, value: Any) -> dict[str, Any]:
        """The value as a topology link writes it (`{rate: 5Mbit}`, `{forward: {delay: 20ms}}`)."""
        return {self.direction: {self.field: value}} if self.direction else {self.field: value}


def parse_key(key: str, topo: Topology) -> LinkKey:
    """The key's link, direction and field; ValueError says what is wrong with it."""
    parts = key.split(".")
    name, rest = parts[1], parts[2:]
    links = [l.name for l in topo.links]
    ends = resolve_link(topo, name)
    if ends is None:
        raise ValueError(f"no link '{name}'{did_you_mean(name, links)} (links: {', '.join(links) or 'none'}; "
                         f"a link setting is written {SPELLING})")
    direction = rest[0] if len(rest) == 2 else None
    field = rest[-1]
    if direction is not None:
        if direction not in LINK_DIRECTIONS:
            raise ValueError(f"'{direction}' is no direction of a link: forward ({ends[0]}->{ends[1]}) or reverse "
                             f"({ends[1]}->{ends[0]})")
        if name != f"{ends[0]}-{ends[1]}":
            # forward is between[0] -> between[1]: under the other spelling it would read backwards.
            raise ValueError(f"the topology writes this link {ends[0]}-{ends[1]} (forward is {ends[0]}->{ends[1]}); "
                             f"write link.{ends[0]}-{ends[1]}.{direction}.{field}")
    fields = [f for f in LINK_SETTINGS if direction is None or f not in LINK_WIDE_SETTINGS]
    if field not in fields:
        raise ValueError(f"a link has no setting '{field}'{did_you_mean(field, fields)} "
                         f"({'one direction' if direction else 'a link'} takes: {', '.join(fields)})")
    return LinkKey(ends, direction, field)


def canonical(field: str, raw: Any) -> Any:
    """`raw` as a topology document writes the field ('5000kbit' -> '5Mbit'); ValueError if it is
    no value of the field (validated as a topology link's field: topology.LinkSpec)."""
    try:
        spec = LinkSpec.model_validate({"between": ["a", "b"], field: raw})
    except ValidationError as e:
        raise ValueError("; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors(include_url=False))) \
            from None
    if field == "band":
        return spec.band.value
    if field == "profile":
        return spec.profile   # a name: which names, and of which medium, is the link's check (check_value)
    return spec.over(Shape()).to_document()[field]


def cell_settings(cell: Mapping[str, Any], topo: Topology) -> dict[tuple[str, str], dict[str, Any]]:
    """A cell's link keys as the topology writes links: ends -> {field: value, forward: {...}}."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for key, value in cell.items():
        if not is_link_key(key):
            continue
        k = parse_key(key, topo)
        mine = out.setdefault(k.ends, {})
        if k.direction:
            mine.setdefault(k.direction, {})[k.field] = value
        else:
            mine[k.field] = value
    return out


def check_value(k: LinkKey, value: Any, topo: Topology) -> Any:
    """`value` of a link key, canonical, checked against the topology's link (band only on WiFi,
    a profile of the link's medium, jitter <= delay, the interference rule); ValueError names the
    first problem."""
    value = canonical(k.field, value)
    said: list[str] = []
    topo.with_link_settings({k.ends: k.written(value)}, lambda path, message: said.append(message))
    if said:
        raise ValueError(said[0])
    return value
