"""Experiments: a topology, a workload kind, node settings and the matrix to sweep - the YAML
schema (`ExperimentSpec`) and the resolved, checked experiment (`Experiment`). Reading a file is
model.experiment_file's job; resolving it into runs is the plan's (wearlab.plan).

- `workload:` holds the kind, its fixed fields (client, server, ...) and fixed parameters;
- `nodes:` overrides a node's kind and options for the whole experiment (`phone: {kind: haproxy}`);
- `matrix:` varies workload parameters (`size: [1KB, 1MB]`), node settings, written
  `node.option` (`phone.rmem_max: [8MB, 2MB]`, `phone.kind: [relay, haproxy]`), and a link's
  settings, written `link.<link>.<field>` (`link.watch-ap.band: [2.4GHz, 5GHz]`, model.link_settings);
  its `exclude:` leaves combinations out (model.exclude).

The kinds' declarations come from the catalog the experiment was read with (`catalog`), so
`cells()` and `node_settings()` need no import of what runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from wearlab.model import quantities, unit_input
from wearlab.model import link_settings
from wearlab.model.claims import Claim, ClaimSpec
from wearlab.model.exclude import EXCLUDE_KEY, Exclusion, combinations, excluded_by
from wearlab.model.link_settings import is_link_key
from wearlab.model.declarations import Catalog
from wearlab.model.choices import Runtime, values
from wearlab.model.timeline import STATIC
from wearlab.model.topology import Topology
from wearlab.model.yamlsrc import Where, YamlPath

RUNTIMES = values(Runtime)
TIMELINE_KEY = "timeline"   # matrix key sweeping named timelines
COMMAND_LINE = "command line"
KIND_SHORTHAND = "command:"  # `phone.kind: "command: ./my-proxy {listen} {upstream}"`


class RatioSpec(BaseModel):
    """A ratio of medians between cells that differ in one matrix key (e.g. no mitigation / mitigation)."""

    model_config = ConfigDict(extra="forbid")

    param: str
    numerator: Any
    denominator: Any
    metrics: list[str]
    title: str = ""


class FullTier(BaseModel):
    """`full:` - the papers' own tier of an experiment (`make reproduce FULL=1`, run.reproduce):
    its repetitions, and `set:` overrides applied as `--set KEY=VALUE` would be (durations and
    sizes; never a value a claim selects). Absent: the file's own tier is the full one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repetitions: Annotated[int, Field(ge=1, strict=True)] | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    note: str = ""                          # where the full tier comes from (the paper's section)


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    topology: Any  # a path (str) or an inline mapping; checked by hand for a better message
    runtime: Runtime = Runtime.AUTO
    repetitions: Annotated[int, Field(ge=1, strict=True)] = 5
    seed: Annotated[int, Field(ge=0, strict=True)] = 1
    timeout: Annotated[float, BeforeValidator(lambda v: unit_input.parse_duration(v, bare_unit="s")),
                       Field(gt=0)] = 120.0
    workload: dict[str, Any]
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    matrix: dict[str, list[Any]] = Field(default_factory=dict)
    ratios: list[RatioSpec] = Field(default_factory=list)
    expect: list[ClaimSpec] = Field(default_factory=list)   # claims: model.claims, docs/claims.md
    timeline: Any = None                    # a list of events, or the name of one of `timelines`
    timelines: dict[str, Any] = Field(default_factory=dict)
    full: FullTier | None = None            # the papers' own tier (FULL=1)

    @field_validator("matrix", "nodes", "timelines", mode="before")
    @classmethod
    def _empty_mapping(cls, v: Any) -> Any:
        # `matrix:` with every line commented out is an empty matrix, not an error.
        return {} if v is None else v

    @field_validator("matrix", mode="before")
    @classmethod
    def _without_exclude(cls, v: Any) -> Any:
        # `exclude:` is no list of values to sweep: model.exclude checks it (experiment_file).
        return {k: x for k, x in v.items() if k != EXCLUDE_KEY} if isinstance(v, dict) else v

    @field_validator("expect", mode="before")
    @classmethod
    def _empty_list(cls, v: Any) -> Any:
        return [] if v is None else v


class Experiment(BaseModel):
    """A resolved experiment. `workload` is the kind's Fields (kind, client, server, ...);
    `fixed`/`matrix` hold workload parameters and node settings (`node.option` keys);
    `nodes` the experiment's fixed node overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    catalog: Catalog = Field(exclude=True, repr=False)   # the kinds its names refer to
    name: str
    description: str = ""
    file: str | None = None
    topology: Topology
    runtime: Runtime = Runtime.AUTO
    repetitions: int
    seed: int
    timeout_s: float
    workload: Any
    fixed: dict[str, Any]
    matrix: dict[str, list[Any]]
    exclusions: tuple[Exclusion, ...] = ()     # `matrix: exclude:` (model.exclude), over the matrix's keys
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    ratios: tuple = ()                      # wearlab.workloads.workload.Ratio, beyond the workload's own
    claims: tuple[Claim, ...] = ()          # `expect:`, resolved (model.claims)
    timelines: dict[str, Any] = Field(default_factory=dict)   # name -> model.timeline.Timeline
    timeline: str = STATIC                  # the timeline of every cell, unless the matrix varies it
    full: FullTier | None = None            # `full:`: the papers' own tier (run.reproduce applies it)
    # Where things were written, for the plan's problems: the file, `--set` keys, and the YAML path
    # of every parameter value ("size=1000" -> ("matrix", "size", 0)).
    where: Where = Field(default_factory=lambda: Where(None), exclude=True, repr=False)
    overridden: frozenset[str] = frozenset()
    value_paths: dict[str, YamlPath] = Field(default_factory=dict, exclude=True, repr=False)

    def timeline_of(self, cell: dict[str, Any]):
        """The Timeline a cell runs under."""
        from wearlab.model.timeline import Timeline
        name = cell.get(TIMELINE_KEY, self.timeline)
        return self.timelines.get(name) or Timeline(name, [])

    @property
    def workload_class(self):
        return self.catalog.workloads[self.workload.kind]

    def cells(self) -> list[dict[str, Any]]:
        """Every combination to run: matrix keys first (first key varies slowest), then the fixed
        workload parameters. A parameter that does not apply in a cell (TLS settings of plain
        HTTP) is "" there, and combinations that then coincide collapse into one (first kept).
        Combinations `exclude:` names are left out; the others keep their values (their runs'
        identities, plan.seeds) and their order."""
        return self._cells()[0]

    def excluded_cells(self) -> list[tuple[dict[str, Any], Exclusion]]:
        """The cells `exclude:` left out, each with the first entry that names it (a combination
        that coincides with a cell still run, as above, is run)."""
        return self._cells()[1]

    def _cells(self) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Exclusion]]]:
        params = self.workload_class.params
        out: list[dict[str, Any]] = []
        left_out: dict[tuple, tuple[dict[str, Any], Exclusion]] = {}
        seen: set[tuple] = set()
        for combo in combinations(self.matrix):
            by = excluded_by(combo, self.exclusions)
            cell = dict(combo)
            cell.update({k: v for k, v in self.fixed.items() if k not in cell})
            cell = self._first_hop(self.workload_class.expand_cell(cell))
            for p in params:
                if p.applies is not None and p.name in cell and not p.applies(cell):
                    cell[p.name] = ""
            key = tuple(sorted((k, str(v)) for k, v in cell.items()))
            if by is not None:
                left_out.setdefault(key, (cell, by))
            elif key not in seen:
                seen.add(key)
                out.append(cell)
        return out, [x for key, x in left_out.items() if key not in seen]

    def topology_of(self, cell: dict[str, Any], problem) -> Topology:
        """The topology a cell runs on: the experiment's, with the cell's link settings
        (`link.<link>.<field>`, model.link_settings) set on its links and the interference rule
        resolved again. `problem(key, message)` gets what a combination of values breaks
        (jitter above delay, a coupled link without a rate), with the cell's key that set the link."""
        settings = link_settings.cell_settings(cell, self.topology)
        if not settings:
            return self.topology
        keys = [k for k in cell if is_link_key(k)]

        def located(path: tuple, message: str) -> None:
            # A link's problem at the first key that sets that link; the rule's at the first key.
            if path[:1] == ("links",) and len(path) > 1:
                link = self.topology.links[path[1]]
                mine = [k for k in keys if link_settings.parse_key(k, self.topology).ends == (link.a, link.b)]
                problem((mine or keys)[0], message)
            else:
                problem(keys[0], message)
        return self.topology.with_link_settings(settings, located)

    def _first_hop(self, cell: dict[str, Any]) -> dict[str, Any]:
        """A client that chooses its own first hop (a wearable's `interface_policy`: its kind's
        first_medium) gets the workload's `path` from it: the neighbour across its one link of
        that medium (the plan checks there is one)."""
        client = getattr(self.workload, "client", None)
        if "path" not in self.workload_class.params or client not in self.topology.nodes:
            return cell
        kind, options = self.node_settings(client, cell)
        medium = self.catalog.node_kinds[kind].first_medium(options, self.catalog)
        if medium is None:
            return cell
        ends = [l for l in self.topology.links if client in (l.a, l.b)]
        hops = [l.other(client) for l in ends if l.medium == medium]
        if len(hops) == 1:
            cell["path"] = hops[0]
        elif "path" not in cell and ends:
            # Not one link of that medium: the kind's plan-time check names it (file, line,
            # field); until then the cell keeps the default first hop, the first neighbour.
            cell["path"] = ends[0].other(client)
        return cell

    def _chooses_first_hop(self) -> bool:
        """Whether the client picks its first hop itself in some cell (then `path` is not written)."""
        client = getattr(self.workload, "client", None)
        return client in self.topology.nodes and any(
            self.catalog.node_kinds[k].first_medium(o, self.catalog) is not None
            for k, o in (self.node_settings(client, c) for c in self.cells()))

    def node_settings(self, node: str, cell: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """(kind, options) of `node` in `cell`: the topology's, overridden by the experiment's
        `nodes:`, overridden by the cell's `node.*` values. Options the final kind does not take
        are dropped; defaults are filled in."""
        n = self.topology.nodes[node]
        kind, options = n.kind, dict(n.options)
        layers = [self.nodes.get(node, {})]
        if cell:
            layers.append({k.split(".", 1)[1]: v for k, v in cell.items()
                           if k.startswith(node + ".") and not is_link_key(k)})
        for layer in layers:
            for key, value in layer.items():
                if key == "kind":
                    kind, extra = split_kind(value)
                    options.update(extra)
                else:
                    options[key] = value
        declared = self.catalog.node_kinds[kind].options
        resolved = {p.name: p.default for p in declared}
        resolved.update({k: v for k, v in options.items() if k in declared})
        return kind, resolved

    def to_document(self) -> dict[str, Any]:
        """Resolved experiment in the YAML schema (loadable again), topology inline."""
        def doc(key: str, value: Any) -> Any:
            if key == TIMELINE_KEY or is_link_key(key):
                return value     # a link setting's value is kept as a topology writes it
            if "." in key:
                node, opt = key.split(".", 1)
                if opt == "kind":
                    return value
                kind, _ = self.node_settings(node, {key: value})
                return self.catalog.node_kinds[kind].options[opt].to_doc(value)
            return self.workload_class.params[key].to_doc(value)

        return {
            "name": self.name,
            "description": self.description,
            "topology": self.topology.to_document(self.catalog, as_written=frozenset(
                link_settings.parse_key(k, self.topology).ends for k in self.matrix
                if is_link_key(k) and k.endswith(".profile"))),
            "runtime": self.runtime.value,
            "repetitions": self.repetitions,
            "seed": self.seed,
            "timeout": quantities.format_duration(self.timeout_s),
            "workload": {**self.workload.model_dump(), **{k: doc(k, v) for k, v in self.fixed.items()
                                                          if not (k == "path" and self._chooses_first_hop())}},
            "nodes": {n: {k: v if k == "kind" else doc(f"{n}.{k}", v) for k, v in s.items()}
                      for n, s in self.nodes.items()},
            "matrix": {**{k: [doc(k, v) for v in vs] for k, vs in self.matrix.items()},
                       **({EXCLUDE_KEY: [{k: doc(k, v) for k, v in e.values.items()} for e in self.exclusions]}
                          if self.exclusions else {})},
            **({"ratios": [{"param": r.param, "numerator": doc(r.param, r.numerator),
                            "denominator": doc(r.param, r.denominator), "metrics": list(r.metrics), "title": r.title}
                           for r in self.ratios]} if self.ratios else {}),
            # Claims as written; those on a key `--set` changed no longer load against it.
            **({"expect": [dict(c.written) for c in self.claims if not c.keys() & self.overridden]}
               if self.claims else {}),
            **({"timeline": self.timeline} if self.timeline != STATIC else {}),
            **({"full": self.full.model_dump()} if self.full is not None else {}),
            **({"timelines": {n: [c.describe() + f" at {c.at_s:g}s" for c in t.schedule(self.timeout_s)]
                              for n, t in self.timelines.items()}} if self.timelines else {}),
        }


def split_kind(value: str) -> tuple[str, dict[str, Any]]:
    """"command: ./p {listen} {upstream}" -> ("command", {"command": "./p ..."}); "relay" -> ("relay", {})."""
    if value.startswith(KIND_SHORTHAND):
        return "command", {"command": value[len(KIND_SHORTHAND):].strip()}
    return value, {}
