"""Reading an experiment file: YAML -> a checked `Experiment`, every problem located by file,
line and field (and `--set` overrides by their command-line key).

What a workload can be told is declared by its kind, what a node can be told by its node kind;
both come from the catalog handed in. `workload:` holds the kind, its fixed fields (client,
server, ...) and fixed parameters; `nodes:` overrides a node's kind and options for the whole
experiment; `matrix:` varies workload parameters, node settings written `node.option` and a
link's settings written `link.<link>.<field>` (model.link_settings), and `matrix: exclude:` leaves
combinations of them out (model.exclude). A parameter is either fixed (or left to its default) or varied, never both. Values are normalised
once, here. Cross-checks that need the whole experiment resolved are the plan's (wearlab.plan).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ValidationError, create_model

from wearlab.errors import InputError, Problem
from wearlab.model.claims import load_claims
from wearlab.model.declarations import Catalog
from wearlab.model.choices import Runtime
from wearlab.model.columns import Ratio, columns_of
from wearlab.model.experiment import (
    COMMAND_LINE,
    RUNTIMES,
    TIMELINE_KEY,
    Experiment,
    ExperimentSpec,
    split_kind,
)
from wearlab.model import link_settings
from wearlab.model.exclude import EXCLUDE_KEY, load_exclusions
from wearlab.model.link_settings import is_link_key
from wearlab.model.timeline import STATIC, load_timeline
from wearlab.model.topology import DOC_NAME, DOC_NAME_RULE, Topology, load_topology, resolve_kind, topology_from_mapping
from wearlab.model.yamlsrc import (
    Where,
    YamlPath,
    YamlSource,
    did_you_mean,
    dotted,
    load_yaml,
    problems_from_validation,
    sort_problems,
    suggest,
)




def load_experiment(path: str | Path, catalog: Catalog, *, repetitions: int | None = None, runtime: str | None = None,
                    overrides: dict[str, str] | None = None) -> Experiment:
    """Load an experiment and its topology. `repetitions`/`runtime` override the file (CLI flags);
    `overrides` are `--set key=value` (a workload parameter, `node.option` or
    `link.<link>.<field>`), which replace what the file fixes or varies. Raises InputError listing
    every problem found."""
    src = load_yaml(path)
    file = src.file
    if not isinstance(src.data, dict):
        what = "file is empty" if src.data is None else "the file must be a mapping"
        raise InputError([Problem(file, src.line(), None,
                                  f"{what}; an experiment has topology:, workload: and optionally matrix:")])
    problems: list[Problem] = []
    spec: ExperimentSpec | None = None
    try:
        spec = ExperimentSpec.model_validate(src.data)
    except ValidationError as e:
        problems += [p for p in problems_from_validation(e, src.lines, file, ExperimentSpec)
                     if not (p.field or "").startswith("workload.")]
    problems += _check_overrides(repetitions, runtime)

    raw_name = src.data.get("name")
    name = raw_name if isinstance(raw_name, str) else Path(path).stem
    if not DOC_NAME.match(name):
        problems.append(Problem(file, src.line(("name",)), "name" if isinstance(raw_name, str) else None,
                                f"'{name}' is not a usable experiment name; {DOC_NAME_RULE}"))

    topology: Topology | None = None
    if "topology" in src.data:
        topology, topo_problems = _load_topology(src, name, catalog)
        problems += topo_problems

    fields, wclass, found = _workload_fields(src, catalog)
    problems += found
    fixed: dict[str, Any] = {}
    matrix: dict[str, list[Any]] = {}
    nodes: dict[str, dict[str, Any]] = {}
    value_paths: dict[str, YamlPath] = {}
    timeline_choice: dict[str, Any] = {}
    exclusions: tuple = ()
    if wclass is not None:
        data = _apply_overrides(src, overrides or {}, wclass, problems)
        timeline_choice = _timeline_choice(src, data, problems)
        fixed, matrix, nodes, found, value_paths = _resolve_parameters(src, data, wclass, fields, topology, catalog)
        problems += found
        if timeline_choice.get("varied"):
            matrix[TIMELINE_KEY] = timeline_choice["varied"]
        if not problems:
            # Checked against a matrix whose keys and values are all known.
            exclusions, found = load_exclusions(
                src, data["exclude"], matrix, _fixed_value(fixed, nodes, matrix, timeline_choice),
                set(overrides or {}), wclass, catalog, topology)
            problems += found

    ratios: list = []
    claims: list = []
    if spec is not None and wclass is not None:
        ratios, found = _resolve_ratios(src, spec, wclass, matrix, fixed, set(overrides or {}), catalog)
        problems += found
        claims, found = load_claims(src, spec.expect, wclass, matrix, fixed, nodes, set(overrides or {}), catalog)
        problems += found
        if spec.full is not None:
            # The full tier changes durations and sizes, never what a claim reads: both tiers' claims
            # read the same cells.
            selected = {k for c in claims for k in c.keys()}
            problems += [Problem(file, src.line(("full", "set", k)), f"full.set.{k}",
                                 f"a claim selects cells by '{k}': the full tier may not change it")
                         for k in spec.full.set if k in selected]
    if problems or spec is None or topology is None or fields is None:
        raise InputError(sort_problems(problems))
    exp = Experiment(
        catalog=catalog, name=name, description=spec.description, file=file, topology=topology,
        runtime=Runtime(runtime) if runtime is not None else spec.runtime,
        repetitions=repetitions if repetitions is not None else spec.repetitions,
        seed=spec.seed, timeout_s=spec.timeout, workload=fields, fixed=fixed, matrix=matrix, exclusions=exclusions,
        nodes=nodes,
        ratios=tuple(ratios), claims=tuple(claims), timeline=timeline_choice.get("fixed", STATIC), full=spec.full,
        where=Where(file, src.lines), overridden=frozenset(overrides or {}), value_paths=value_paths)
    timelines = _load_timelines(src, exp, timeline_choice)
    return exp.model_copy(update={"timelines": timelines}) if timelines else exp


def _timeline_choice(src: YamlSource, data: dict, problems: list[Problem]) -> dict[str, Any]:
    """Which timelines exist (`timelines:` by name, an inline `timeline:` list, `static`) and which
    the cells run: one fixed name, or the names the matrix's `timeline:` sweeps."""
    named = src.data.get("timelines") if isinstance(src.data.get("timelines"), dict) else {}
    raw = data.get("timeline", src.data.get("timeline"))
    sources: dict[str, tuple] = {n: ("timelines", n) for n in named}
    out: dict[str, Any] = {"sources": sources}
    names = [STATIC, *named]
    if STATIC in named:
        problems.append(Problem(src.file, src.line(("timelines", STATIC)), f"timelines.{STATIC}",
                                f"'{STATIC}' is the built-in timeline without events; give yours another name"))
    if isinstance(raw, list):
        sources["timeline"] = ("timeline",)
        out["fixed"] = "timeline"
    elif isinstance(raw, str):
        if raw not in names:
            where = (COMMAND_LINE, None, "--set timeline") if "timeline" in data.get("overridden", ()) else \
                (src.file, src.line(("timeline",)), "timeline")
            problems.append(Problem(*where, f"no timeline '{raw}'{did_you_mean(raw, names)} (timelines: {', '.join(names)})"))
        else:
            out["fixed"] = raw
    elif raw is not None:
        problems.append(Problem(src.file, src.line(("timeline",)), "timeline",
                                "timeline is a list of events or the name of one under timelines:"))
    varied = data["matrix"].pop(TIMELINE_KEY, None)
    if varied is not None:
        if "fixed" in out:
            problems.append(Problem(src.file, src.line(("matrix", TIMELINE_KEY)), f"matrix.{TIMELINE_KEY}",
                                    "the timeline is both fixed (timeline:) and varied here; remove one of them"))
        elif not isinstance(varied, list) or not varied:
            problems.append(Problem(src.file, src.line(("matrix", TIMELINE_KEY)), f"matrix.{TIMELINE_KEY}",
                                    f"a non-empty list of timeline names ({', '.join(names)})"))
        else:
            for i, v in enumerate(varied):
                if v not in names:
                    problems.append(Problem(src.file, src.line(("matrix", TIMELINE_KEY, i)), dotted(("matrix", TIMELINE_KEY, i)),
                                            f"no timeline '{v}'{did_you_mean(str(v), names)} (timelines: {', '.join(names)})"))
            out["varied"] = [str(v) for v in varied]
    return out


def _load_timelines(src: YamlSource, exp: Experiment, choice: dict[str, Any]) -> dict[str, Any]:
    """The timelines the cells use, checked against the topology and the runs' lengths."""
    used = set(choice.get("varied") or []) | ({choice["fixed"]} if "fixed" in choice else set())
    problems: list[Problem] = []
    out = {}
    for name, at in choice.get("sources", {}).items():
        if name not in used:
            continue
        cells = [c for c in exp.cells() if c.get(TIMELINE_KEY, exp.timeline) == name]
        lengths = [exp.workload_class.run_length(c) for c in cells]
        horizon = exp.timeout_s if not lengths or None in lengths else min(max(lengths), exp.timeout_s)
        raw = src.data.get(at[0]) if len(at) == 1 else src.data["timelines"][at[1]]
        tl, found = load_timeline(src, at, name, raw, exp.topology, horizon)
        problems += found
        out[name] = tl
    if problems:
        raise InputError(sort_problems(problems))
    return out


def _resolve_ratios(src: YamlSource, spec: ExperimentSpec, wclass, matrix: dict[str, list[Any]],
                    fixed: dict[str, Any], overridden: set[str], catalog: Catalog) -> tuple[list, list[Problem]]:
    """`ratios:` name matrix keys, their values, and the workload's metrics. A
    key a `--set` fixed no longer varies: its ratio is left out, not an error (the user narrowed
    the experiment on purpose)."""
    problems: list[Problem] = []
    # Any kind's metric may be named: which kinds the cells run is the plan's to resolve.
    metrics = [m.name for m in columns_of(wclass, catalog.node_kinds.values(), matrix).metrics]
    out = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    for i, r in enumerate(spec.ratios):
        at = ("ratios", i)
        if r.param in overridden:
            continue
        if r.param not in matrix:
            problem(at + ("param",), f"'{r.param}' is not varied in matrix:{did_you_mean(r.param, list(matrix))} "
                                     f"(matrix keys: {', '.join(matrix) or 'none'})")
            continue
        values = {}
        for side in ("numerator", "denominator"):
            raw = getattr(r, side)
            match = [v for v in matrix[r.param] if str(v) == str(raw) or _same_value(r.param, raw, v, wclass)]
            if not match:
                problem(at + (side,), f"{raw!r} is not one of the values of {r.param}: "
                                      f"{', '.join(map(str, matrix[r.param]))}")
            else:
                values[side] = match[0]
        for j, m in enumerate(r.metrics):
            if m not in metrics:
                problem(at + ("metrics", j), f"unknown metric '{m}'{did_you_mean(m, metrics)}")
        if len(values) == 2:
            out.append(Ratio(str(r.param), values["numerator"], values["denominator"], tuple(r.metrics),
                             title=r.title))
    return out, problems


def _same_value(param: str, raw: Any, value: Any, wclass) -> bool:
    """Whether a value as written in `ratios:` means the matrix value (e.g. '8MB' and 8000000)."""
    try:
        if param in wclass.params:
            return wclass.params[param].normalize(raw) == value
        if is_link_key(param):
            return link_settings.canonical(param.rsplit(".", 1)[1], raw) == value
    except ValueError:
        return False
    return False


def _check_overrides(repetitions: Any, runtime: Any) -> list[Problem]:
    problems = []
    if repetitions is not None and (isinstance(repetitions, bool) or not isinstance(repetitions, int)
                                    or repetitions < 1):
        problems.append(Problem(COMMAND_LINE, None, "--repetitions",
                                f"{repetitions!r} is impossible: must be a whole number, at least 1"))
    if runtime is not None and runtime not in RUNTIMES:
        problems.append(Problem(COMMAND_LINE, None, "--runtime",
                                f"'{runtime}' is not one of: {', '.join(RUNTIMES)}{did_you_mean(runtime, RUNTIMES)}"))
    return problems


def _load_topology(src: YamlSource, experiment_name: str, catalog: Catalog) -> tuple[Topology | None, list[Problem]]:
    """The experiment's topology, by path (relative to the experiment file) or inline."""
    value = src.data["topology"]
    here = ("topology",)
    if isinstance(value, str) and value.strip():
        ref = value.strip()
        # Relative to the experiment file, so experiments work from any working directory; shown
        # normalised ("experiments/../topologies/x.yaml" -> "topologies/x.yaml").
        target = ref if os.path.isabs(ref) else os.path.normpath(os.path.join(os.path.dirname(src.file), ref))
        if os.path.isdir(target):
            return None, [Problem(src.file, src.line(here), "topology", f"'{ref}' is a directory ({target}); "
                                  "name a topology YAML file")]
        if not os.path.exists(target):
            return None, [Problem(src.file, src.line(here), "topology",
                                  f"topology file '{ref}' not found (looked for {target}; paths are "
                                  "relative to the experiment file)")]
        try:
            return load_topology(target, catalog), []
        except InputError as e:
            return None, e.problems
    if isinstance(value, dict):
        try:
            return topology_from_mapping(value, src.file, src.lines, catalog, at=here,
                                         default_name=f"{experiment_name}-topology"), []
        except InputError as e:
            return None, e.problems
    return None, [Problem(src.file, src.line(here), "topology",
                          "topology must be a path to a topology file or an inline mapping with nodes: "
                          "and links:")]


def _workload_fields(src: YamlSource, catalog: Catalog):
    """Validate `workload:` against its kind's Fields plus parameters. Returns (fields or None,
    workload class or None, problems). An unknown kind with a close match is validated as that
    kind, so the rest of the file still gets checked."""
    kinds = catalog.workloads
    wl = src.data.get("workload")
    at = ("workload",)
    if not isinstance(wl, dict):
        return None, None, []  # missing or not a mapping: ExperimentSpec reported it
    kind = wl.get("kind")
    problems: list[Problem] = []
    wclass = kinds.get(kind) if isinstance(kind, str) else None
    if wclass is None:
        if "kind" not in wl:
            message = f"missing required key 'kind' (workload kinds: {', '.join(kinds)})"
        else:
            message = (f"{kind!r} is not one of: {', '.join(kinds)}{did_you_mean(kind, kinds)}"
                       if isinstance(kind, str) else f"kind must be one of: {', '.join(kinds)}")
        problems.append(Problem(src.file, src.line(at + ("kind",)), "workload.kind", message))
        close = suggest(kind, kinds)
        if close is None:
            return None, None, problems
        wclass = kinds[close]
        wl = {**wl, "kind": close}
    model = _spec_model(wclass)
    try:
        spec = model.model_validate(wl)
    except ValidationError as e:
        return None, wclass, problems + problems_from_validation(e, src.lines, src.file, model, at)
    fields = wclass.Fields.model_validate({k: getattr(spec, k) for k in wclass.Fields.model_fields})
    return (fields if not problems else None), wclass, problems


def _spec_model(wclass) -> type[BaseModel]:
    """The workload's Fields plus each parameter as an optional key with its normaliser, so unknown
    keys get "did you mean" against both and every value error comes out located."""
    extra = {p.name: (Annotated[Any, BeforeValidator(p.normalize)], None) for p in wclass.params}
    return create_model(f"{wclass.__name__}Spec", __base__=wclass.Fields, **extra)


def _apply_overrides(src: YamlSource, overrides: dict[str, str], wclass, problems: list[Problem]) -> dict:
    """The experiment's workload/nodes/matrix with `--set key=value` applied (a set key leaves
    the matrix and becomes fixed)."""
    wl = dict(src.data.get("workload") or {}) if isinstance(src.data.get("workload"), dict) else {}
    nodes = {k: dict(v) for k, v in (src.data.get("nodes") or {}).items() if isinstance(v, dict)} \
        if isinstance(src.data.get("nodes"), dict) else {}
    matrix = dict(src.data.get("matrix") or {}) if isinstance(src.data.get("matrix"), dict) else {}
    out: dict[str, Any] = {"exclude": matrix.pop(EXCLUDE_KEY, None)}
    for key, value in overrides.items():
        matrix.pop(key, None)
        if key == EXCLUDE_KEY:
            problems.append(Problem(COMMAND_LINE, None, f"--set {key}",
                                    "matrix.exclude is no parameter: it names combinations to leave out, in the file"))
        elif key == TIMELINE_KEY:
            out[TIMELINE_KEY] = value
        elif is_link_key(key):
            matrix[key] = [value]    # a link has no fixed-settings section: one value, every cell
        elif "." in key:
            node, opt = key.split(".", 1)
            nodes.setdefault(node, {})[opt] = value
        elif key in wclass.params:
            wl[key] = value
        else:
            problems.append(Problem(COMMAND_LINE, None, f"--set {key}",
                                    f"unknown parameter '{key}'{did_you_mean(key, wclass.params.names())} "
                                    f"({wclass.name} parameters: {', '.join(wclass.params.names())}; node settings "
                                    "are written node.option, link settings link.<link>.<field>)"))
    return {"workload": wl, "nodes": nodes, "matrix": matrix, "overridden": set(overrides), **out}


def _fixed_value(fixed: dict[str, Any], nodes: dict[str, dict[str, Any]], matrix: dict[str, list[Any]],
                 timeline_choice: dict[str, Any]):
    """key -> the value a key that is not swept has in every cell (None: not known here), for
    `exclude:` entries that name a key `--set` fixed (model.exclude)."""
    def value(key: str) -> Any:
        if key == TIMELINE_KEY:
            return timeline_choice.get("fixed", STATIC)
        if is_link_key(key):
            return matrix[key][0] if len(matrix.get(key, [])) == 1 else None   # `--set` gives a link one value
        if "." in key:
            node, opt = key.split(".", 1)
            return nodes.get(node, {}).get(opt)
        return fixed.get(key)
    return value


def _resolve_parameters(src: YamlSource, data: dict, wclass, fields, topo: Topology | None, catalog: Catalog):
    """Split workload parameters and node settings into fixed and matrix, and check them against
    each other, the node kinds and the topology. Works on the raw YAML; malformed parts are
    skipped (pydantic reported them)."""
    problems: list[Problem] = []
    overridden = data["overridden"]

    def problem(path: YamlPath, message: str) -> None:
        key = path[1] if len(path) > 1 else None
        if key in overridden:
            problems.append(Problem(COMMAND_LINE, None, f"--set {key}", message))
        else:
            problems.append(Problem(src.file, src.line(path), dotted(path), message))

    params = wclass.params
    wl, raw_matrix = data["workload"], data["matrix"]
    written: dict[str, Any] = {}  # valid parameters fixed under workload:
    for p in params:
        if p.name in wl:
            try:
                written[p.name] = p.normalize(wl[p.name])
            except ValueError as e:
                if p.name in overridden:
                    problem(("workload", p.name), str(e))
                # else: reported by pydantic

    # Node settings: `nodes:` (fixed for the experiment) and `node.option` matrix keys.
    nodes, node_problems = _node_overrides(data["nodes"], topo, overridden, src, catalog)
    problems += node_problems

    matrix: dict[str, list[Any]] = {}
    where: dict[tuple[str, Any], YamlPath] = {}  # (param, value) -> where it was written
    link_keys: dict[Any, str] = {}   # a link setting (model.link_settings.LinkKey) -> its matrix key
    for key, values in raw_matrix.items():
        at = ("matrix", key)
        if is_link_key(key):
            clean = _link_matrix(key, values, at, topo, problem, link_keys)
            if clean is not None:
                matrix[key] = clean
            continue
        if isinstance(key, str) and "." in key:
            clean = _node_matrix(key, values, at, topo, nodes, problem, catalog)
            if clean is not None:
                matrix[key] = clean
            continue
        if key not in params:
            fixed_fields = [k for k in wclass.Fields.model_fields]
            if key in fixed_fields:
                problem(at, f"{key} cannot be varied; write one experiment per {key}")
            else:
                problem(at, f"unknown parameter '{key}'{did_you_mean(key, params.names())} "
                            f"({wclass.name} parameters: {', '.join(params.names())}; node settings are "
                            f"written node.option, e.g. phone.kind; link settings {link_settings.SPELLING})")
            continue
        if key in wl:
            problem(at, f"'{key}' is both fixed under workload: (line {src.line(('workload', key))}) and "
                        "varied here; remove one of them")
            continue
        clean = _values(values, at, params[key].normalize, problem)
        if clean is not None:
            matrix[key] = clean
            where.update({(key, v): at + (i,) for i, v in enumerate(clean)})

    # Fixed: written under workload:, else the default (a computed default needs the topology).
    fixed: dict[str, Any] = {}
    for p in params:
        if p.name in raw_matrix:
            continue
        if p.name in written:
            fixed[p.name] = written[p.name]
            where[(p.name, fixed[p.name])] = ("workload", p.name)
        elif p.default is not None:
            fixed[p.name] = p.default

    # A varied parameter that applies in no cell at all makes every cell the same.
    for p in params:
        if p.applies is None or p.name not in matrix:
            continue
        others = [k for k in matrix if k != p.name]
        combos = ({**fixed, **dict(zip(others, c, strict=True))} for c in itertools.product(*(matrix[k] for k in others)))
        if not any(p.applies(c) for c in combos):
            problem(("matrix", p.name), f"varying {p.name} has no effect: it only applies when {p.applies_doc}, "
                                        "and no cell has that")
    if topo is not None and fields is not None:
        problems += _path_of_a_chooser(fields, topo, wl, raw_matrix, nodes, problem, catalog)
        problems += wclass.check(fields, fixed, matrix, where, topo, src)
        if "path" not in written and "path" not in raw_matrix and _chooses_everywhere(fields, topo, raw_matrix, nodes, catalog):
            fixed.pop("path", None)    # not shared by every cell: each gets its client's (Experiment._first_hop)
    # Keep the declared parameter order in `fixed`.
    fixed = {p.name: fixed[p.name] for p in params if p.name in fixed}
    return fixed, matrix, nodes, problems, {f"{k}={v}": path for (k, v), path in where.items()}


def _values(values: Any, at: YamlPath, normalize, problem) -> list[Any] | None:
    """A matrix entry: a non-empty list of valid, distinct values."""
    if not isinstance(values, list):
        return None  # reported by pydantic
    if not values:
        problem(at, f"empty list; give at least one value for {at[-1]} or remove it")
        return None
    clean: list[Any] = []
    for i, raw in enumerate(values):
        try:
            value = normalize(raw)
        except ValueError as e:
            problem(at + (i,), str(e))
            continue
        if value in clean:
            problem(at + (i,), f"{raw!r} is listed twice")
            continue
        clean.append(value)
    return clean


def _node_overrides(raw: dict, topo: Topology | None, overridden: set[str], src: YamlSource, catalog: Catalog
                    ) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    """`nodes:` of the experiment: existing nodes, known kinds for their roles, known options."""
    problems: list[Problem] = []
    out: dict[str, dict[str, Any]] = {}
    if topo is None:
        return out, problems
    for node, settings in raw.items():
        if node not in topo.nodes:
            where = (Problem(COMMAND_LINE, None, f"--set {node}", "") if any(k.startswith(node + ".") for k in overridden)
                     else Problem(src.file, src.line(("nodes", node)), f"nodes.{node}", ""))
            problems.append(Problem(where.file, where.line, where.field,
                                    f"unknown node '{node}'{did_you_mean(node, topo.nodes)} (nodes: {', '.join(topo.nodes)})"))
            continue
        n = topo.nodes[node]
        if "device" in settings:
            problems.append(Problem(src.file, src.line(("nodes", node, "device")), f"nodes.{node}.device",
                                    f"a node's device is part of the topology: write device: under the topology's "
                                    f"nodes.{node} (an experiment's topology may be inline)"))
            settings = {k: v for k, v in settings.items() if k != "device"}
        kind_value = settings.get("kind", n.kind)
        kind, extra = split_kind(kind_value) if isinstance(kind_value, str) else (kind_value, {})
        given = {**extra, **{k: v for k, v in settings.items() if k != "kind"}}
        options, bad = resolve_kind(catalog, kind, n.role, given, n.options if kind == n.kind else None)
        for key, message in bad:
            field_key = f"{node}.{key}"
            if field_key in overridden or (key == "kind" and f"{node}.kind" in overridden):
                problems.append(Problem(COMMAND_LINE, None, f"--set {field_key}", message))
            else:
                path = ("nodes", node, key if key in settings else "kind")
                problems.append(Problem(src.file, src.line(path), dotted(path), message))
        written = {k: options[k] for k in settings if k in options}
        out[node] = ({"kind": kind_value} if "kind" in settings else {}) | written
    return out, problems


def _node_matrix(key: str, values: Any, at: YamlPath, topo: Topology | None,
                 nodes: dict[str, dict[str, Any]], problem, catalog: Catalog) -> list[Any] | None:
    """A `node.option` matrix entry, each value checked against the node's kind(s)."""

    if topo is None:
        return None
    node, opt = key.split(".", 1)
    if node not in topo.nodes:
        hint = f"; a link's setting is written {link_settings.SPELLING}" if node == link_settings.PREFIX else ""
        problem(at, f"unknown node '{node}'{did_you_mean(node, topo.nodes)} (nodes: {', '.join(topo.nodes)}){hint}")
        return None
    n = topo.nodes[node]
    base_kind = split_kind(nodes.get(node, {}).get("kind", n.kind))[0]
    if opt == "kind":
        def normalize(v: Any) -> str:
            if not isinstance(v, str):
                raise ValueError(f"a node kind is a name, got {v!r}")
            kind, extra = split_kind(v.strip())
            options, bad = resolve_kind(catalog, kind, n.role, extra)
            if bad:
                raise ValueError(bad[0][1])
            return v.strip()
        return _values(values, at, normalize, problem)
    kind = catalog.node_kinds.get(base_kind)
    if kind is not None and opt in kind.renamed:
        problem(at, f"kind {base_kind} no longer takes '{opt}': {kind.renamed[opt]}")
        return None
    if kind is None or opt not in kind.options:
        takes = ", ".join(kind.options.names()) if kind else ""
        problem(at, f"kind {base_kind} of node {node} has no option '{opt}'"
                    f"{did_you_mean(opt, kind.options.names()) if kind else ''} (it takes: {takes or 'none'})")
        return None
    return _values(values, at, kind.options[opt].normalize, problem)


def _link_matrix(key: str, values: Any, at: YamlPath, topo: Topology | None, problem,
                 seen: dict[Any, str]) -> list[Any] | None:
    """A `link.<link>.<field>` matrix entry (model.link_settings), each value checked as the
    topology checks that field of that link. `seen`: the link settings of the keys before it (one
    setting under two spellings, `watch-ap` and `ap-watch`, is one key too many)."""
    if topo is None:
        return None
    try:
        k = link_settings.parse_key(key, topo)
    except ValueError as e:
        problem(at, str(e))
        return None
    if k in seen:
        problem(at, f"{key} is the same setting as {seen[k]}; keep one of them")
        return None
    seen[k] = key
    return _values(values, at, lambda v: link_settings.check_value(k, v, topo), problem)


def _path_of_a_chooser(fields, topo: Topology, wl: dict, raw_matrix: dict, nodes: dict[str, dict[str, Any]],
                       problem, catalog: Catalog) -> list[Problem]:
    """`path` written for a client that chooses its own first hop (a wearable: its
    `interface_policy`, one concept): beside a policy it is refused unless it names the policy's
    own first hop, with what to write instead. Alone it is the older spelling of `interface_policy: bt|wifi` by route, and means the same
    (the shipped files and docs use the policy: tests/test_one_name.py)."""
    client = getattr(fields, "client", None)
    written = [("workload", "path")] if "path" in wl else [("matrix", "path")] if "path" in raw_matrix else []
    if not written or client not in topo.nodes:
        return []
    kinds = {split_kind(str(nodes.get(client, {}).get("kind", topo.nodes[client].kind)))[0]}
    kinds |= {split_kind(str(k))[0] for k in raw_matrix.get(f"{client}.kind") or [] if isinstance(k, str)}
    options = {catalog.node_kinds[k].first_hop_option for k in kinds if k in catalog.node_kinds} - {None}
    if not options:
        return []
    option = sorted(options)[0]
    chosen = [v for v in (nodes.get(client, {}).get(option), topo.nodes[client].options.get(option),
                          *(raw_matrix.get(f"{client}.{option}") or [])) if v not in (None, "none")]
    if not chosen:
        return []
    values = wl["path"] if "path" in wl else raw_matrix["path"]
    hops = values if isinstance(values, list) else [values]
    media = {l.other(client): l.medium for l in topo.links if client in (l.a, l.b)}
    # The same first hop written twice is redundant, not wrong; a different one contradicts.
    fixed = {**topo.nodes[client].options, **{k: v for k, v in nodes.get(client, {}).items() if k != "kind"}}
    agree, derived = set(), False
    for kind in kinds & set(catalog.node_kinds):
        for policy in chosen:
            medium = catalog.node_kinds[kind].first_medium({**fixed, option: policy}, catalog)
            derived |= medium is not None
            agree |= {h for h, m in media.items() if medium is not None and m == medium}
    if not derived or (all(h in agree for h in hops) and len(agree) == 1):
        return []    # (an unknown policy is the plan's to report)
    said = [f"path: {h} is {option}: {media[h].value}" for h in hops
            if isinstance(h, str) and media.get(h) is not None]
    problem(written[0], f"{client} chooses its own first hop with its {option} ({', '.join(map(str, chosen))}); "
                        f"path names another: remove path (one name for which interface a wearable uses)"
                        + (f"; {'; '.join(said)}" if said else ""))
    return []


def _chooses_everywhere(fields, topo: Topology, raw_matrix: dict, nodes: dict[str, dict[str, Any]],
                        catalog: Catalog) -> bool:
    """Whether the workload's client chooses its own first hop in every cell (a wearable whose
    `interface_policy` is a known policy in every cell)."""
    client = getattr(fields, "client", None)
    if client not in topo.nodes or f"{client}.kind" in raw_matrix:
        return False
    kind = catalog.node_kinds.get(split_kind(str(nodes.get(client, {}).get("kind", topo.nodes[client].kind)))[0])
    option = kind.first_hop_option if kind is not None else None
    if option is None:
        return False
    values = raw_matrix.get(f"{client}.{option}") or [nodes.get(client, {}).get(
        option, topo.nodes[client].options.get(option, kind.options[option].default))]
    # Only policies the kind can place: an unknown one keeps the default path for the plan's
    # checks, which name it (file, line, field) before anything reads a cell's path.
    return all(kind.first_medium({option: v}, catalog) is not None for v in values)
