"""Experiments: a topology, a workload, and the parameter matrix to sweep, loaded from YAML.

A workload parameter is either fixed (written under `workload:`, or left to its default) or varied
(a list under `matrix:`), never both. Parameter values are normalised once here (sizes to bytes,
TLS versions to "1.2"-style text) so that `cells()` hands the runner ready-to-use values.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from wearlab.errors import InputError, Problem
from wearlab.model import units
from wearlab.model.topology import DOC_NAME, DOC_NAME_RULE, Topology, load_topology, topology_from_mapping
from wearlab.model.yamlsrc import (
    YamlPath,
    YamlSource,
    did_you_mean,
    dotted,
    load_yaml,
    problems_from_validation,
    sort_problems,
)

RUNTIMES = ("auto", "host", "uml")
COMMAND_LINE = "command line"

# ---------------------------------------------------------------------------------------------
# http-get parameters: one normaliser each, shared by `workload:` (fixed) and `matrix:` (varied).

TLS_VERSIONS = ("1.0", "1.1", "1.2", "1.3")
TLS13_SUITES = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")
CERTS = ("rsa2048", "ecdsa-p256")


def _choice(name: str, choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if isinstance(value, str) and value in choices:
            return value
        shown = f"'{value}'" if isinstance(value, str) else repr(value)
        raise ValueError(f"{name} {shown} is not one of: {', '.join(choices)}{did_you_mean(value, choices)}")
    return check


def _tls_version(value: Any) -> str:
    # YAML reads `1.2` as a float and `1.0` as 1.0; both mean the obvious version.
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = f"{float(value):.1f}"
        if text in TLS_VERSIONS and float(text) == float(value):
            return text
    elif isinstance(value, str):
        text = value.strip()
        if text in TLS_VERSIONS:
            return text
        bare = text.lower().removeprefix("tlsv").removeprefix("tls").strip(" v_-")
        if bare in TLS_VERSIONS:
            raise ValueError(f"write tls_version: '{bare}' (just the number)")
    raise ValueError(f"tls_version {value!r} is not one of: {', '.join(TLS_VERSIONS)}")


def _cipher(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"cipher must be an OpenSSL cipher name or 'default', got {value!r}")
    value = value.strip()
    if value.upper().startswith("TLS_") and value not in TLS13_SUITES:
        raise ValueError(f"unknown TLS 1.3 suite '{value}'{did_you_mean(value, TLS13_SUITES)} "
                         f"(suites: {', '.join(TLS13_SUITES)})")
    if not all(c.isalnum() or c in "_-:+!@=." for c in value):
        raise ValueError(f"'{value}' does not look like an OpenSSL cipher name (e.g. ECDHE-RSA-AES128-SHA)")
    return value


def _path(value: Any) -> str:
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"path is the name of the client's first-hop node (e.g. ap or phone), got {value!r}")


def _protocol(value: Any) -> str:
    if isinstance(value, str) and value.lower() in ("http", "https"):
        return value.lower()
    return _choice("protocol", ("http", "https"))(value)


@dataclass(frozen=True)
class Param:
    name: str
    default: Any  # None: computed from the topology (path)
    normalize: Callable[[Any], Any]
    tls_only: bool = False


PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("protocol", "https", _protocol),
    Param("size", 100_000, units.parse_size),
    Param("path", None, _path),
    Param("tls_version", "1.3", _tls_version, tls_only=True),
    Param("cipher", "default", _cipher, tls_only=True),
    Param("cert", "rsa2048", _choice("cert", CERTS), tls_only=True),
)}
TLS_ONLY = tuple(p.name for p in PARAMS.values() if p.tls_only)


def _param(name: str) -> Any:
    return Annotated[Any, BeforeValidator(PARAMS[name].normalize)]


# ---------------------------------------------------------------------------------------------
# YAML-facing models


class WorkloadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["http-get"]
    client: str
    server: str
    protocol: _param("protocol") = None
    size: _param("size") = None
    path: _param("path") = None
    tls_version: _param("tls_version") = None
    cipher: _param("cipher") = None
    cert: _param("cert") = None


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    topology: Any  # a path (str) or an inline mapping; checked by hand for a better message
    runtime: Literal["auto", "host", "uml"] = "auto"
    repetitions: Annotated[int, Field(ge=1, strict=True)] = 5
    seed: Annotated[int, Field(ge=0, strict=True)] = 1
    timeout: Annotated[float, BeforeValidator(lambda v: units.parse_duration(v, bare_unit="s")),
                       Field(gt=0)] = 120.0
    workload: WorkloadSpec
    matrix: dict[str, list[Any]] = Field(default_factory=dict)

    @field_validator("matrix", mode="before")
    @classmethod
    def _empty_matrix(cls, v: Any) -> Any:
        # `matrix:` with every line commented out is an empty matrix, not an error.
        return {} if v is None else v


# ---------------------------------------------------------------------------------------------
# Resolved models


class HttpGet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["http-get"] = "http-get"
    client: str
    server: str


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    file: str | None = None
    topology: Topology
    runtime: Literal["auto", "host", "uml"] = "auto"
    repetitions: int
    seed: int
    timeout_s: float
    workload: HttpGet
    fixed: dict[str, Any]
    matrix: dict[str, list[Any]]

    def cells(self) -> list[dict[str, Any]]:
        """Every parameter combination to run: matrix keys first (first key varies slowest),
        then the fixed parameters. Plain HTTP has no TLS, so its TLS parameters are "" and the
        combinations that differ only in them collapse into one cell (first occurrence kept)."""
        keys = list(self.matrix)
        out: list[dict[str, Any]] = []
        seen: set[tuple] = set()
        for combo in itertools.product(*(self.matrix[k] for k in keys)):
            cell = dict(zip(keys, combo, strict=True))
            cell.update({k: v for k, v in self.fixed.items() if k not in cell})
            if cell.get("protocol") == "http":
                for k in TLS_ONLY:
                    cell[k] = ""
            key = tuple(sorted(cell.items()))
            if key not in seen:
                seen.add(key)
                out.append(cell)
        return out

    def to_document(self) -> dict[str, Any]:
        """Resolved experiment in the YAML schema (loadable again), topology inline."""
        return {
            "name": self.name,
            "description": self.description,
            "topology": self.topology.to_document(),
            "runtime": self.runtime,
            "repetitions": self.repetitions,
            "seed": self.seed,
            "timeout": units.format_duration(self.timeout_s),
            "workload": {"kind": self.workload.kind, "client": self.workload.client,
                         "server": self.workload.server,
                         **{k: _param_doc(k, v) for k, v in self.fixed.items()}},
            "matrix": {k: [_param_doc(k, v) for v in vs] for k, vs in self.matrix.items()},
        }


def _param_doc(name: str, value: Any) -> Any:
    return units.format_size(value) if name == "size" else value


# ---------------------------------------------------------------------------------------------
# Loading


def load_experiment(path: str | Path, *, repetitions: int | None = None, runtime: str | None = None) -> Experiment:
    """Load an experiment and its topology. `repetitions`/`runtime` override the file (CLI flags).
    Raises InputError listing every problem found, in the experiment and its topology file."""
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
        problems += problems_from_validation(e, src.lines, file, ExperimentSpec)
    problems += _check_overrides(repetitions, runtime)

    raw_name = src.data.get("name")
    name = raw_name if isinstance(raw_name, str) else Path(path).stem
    if not DOC_NAME.match(name):
        problems.append(Problem(file, src.line(("name",)), "name" if isinstance(raw_name, str) else None,
                                f"'{name}' is not a usable experiment name; {DOC_NAME_RULE}"))

    topology: Topology | None = None
    if "topology" in src.data:
        topology, topo_problems = _load_topology(src, name)
        problems += topo_problems

    # Parameter checks read the raw workload/matrix, so they run even when other keys are wrong
    # (and, minus the node checks, even when the topology is).
    fixed, matrix, found = _resolve_parameters(src, topology)
    problems += found

    if problems or spec is None or topology is None:
        raise InputError(sort_problems(problems))
    return Experiment(
        name=name,
        description=spec.description,
        file=file,
        topology=topology,
        runtime=runtime if runtime is not None else spec.runtime,
        repetitions=repetitions if repetitions is not None else spec.repetitions,
        seed=spec.seed,
        timeout_s=spec.timeout,
        workload=HttpGet(kind=spec.workload.kind, client=spec.workload.client, server=spec.workload.server),
        fixed=fixed,
        matrix=matrix,
    )


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


def _load_topology(src: YamlSource, experiment_name: str) -> tuple[Topology | None, list[Problem]]:
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
            return load_topology(target), []
        except InputError as e:
            return None, e.problems
    if isinstance(value, dict):
        try:
            return topology_from_mapping(value, src.file, src.lines, at=here,
                                         default_name=f"{experiment_name}-topology"), []
        except InputError as e:
            return None, e.problems
    return None, [Problem(src.file, src.line(here), "topology",
                          "topology must be a path to a topology file or an inline mapping with nodes: "
                          "and links:")]


def _resolve_parameters(src: YamlSource, topo: Topology | None
                        ) -> tuple[dict[str, Any], dict[str, list[Any]], list[Problem]]:
    """Split parameters into fixed and matrix, and check them against each other and the
    topology. Works on the raw YAML; malformed parts are skipped (pydantic reports them)."""
    problems: list[Problem] = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    wl = src.data.get("workload")
    wl = wl if isinstance(wl, dict) else {}
    raw_matrix = src.data.get("matrix")
    raw_matrix = raw_matrix if isinstance(raw_matrix, dict) else {}

    written: dict[str, Any] = {}  # valid parameters fixed under workload:
    for key in PARAMS:
        if key in wl:
            try:
                written[key] = PARAMS[key].normalize(wl[key])
            except ValueError:
                pass  # reported by pydantic

    # Matrix: known parameter names, not also fixed, non-empty lists of valid, distinct values.
    matrix: dict[str, list[Any]] = {}
    where: dict[tuple[str, Any], YamlPath] = {}  # (param, value) -> where it was written
    for key, values in raw_matrix.items():
        at = ("matrix", key)
        if key not in PARAMS:
            if key in ("kind", "client", "server"):
                problem(at, f"{key} cannot be varied; write one experiment per {key}")
            else:
                problem(at, f"unknown parameter '{key}'{did_you_mean(key, PARAMS)} "
                            f"(http-get parameters: {', '.join(PARAMS)})")
            continue
        if key in wl:
            problem(at, f"'{key}' is both fixed under workload: (line {src.line(('workload', key))}) and "
                        "varied here; remove one of them")
            continue
        if not isinstance(values, list):
            continue  # reported by pydantic
        if not values:
            problem(at, f"empty list; give at least one value for {key} or remove it")
            continue
        clean: list[Any] = []
        for i, raw in enumerate(values):
            try:
                value = PARAMS[key].normalize(raw)
            except ValueError as e:
                problem(at + (i,), str(e))
                continue
            if value in clean:
                problem(at + (i,), f"{raw!r} is listed twice")
                continue
            clean.append(value)
            where[(key, value)] = at + (i,)
        matrix[key] = clean

    # Fixed: written under workload:, else the default (path's default needs the topology).
    fixed: dict[str, Any] = {}
    for key, param in PARAMS.items():
        if key in raw_matrix:
            continue
        if key in written:
            fixed[key] = written[key]
            where[(key, fixed[key])] = ("workload", key)
        elif param.default is not None:
            fixed[key] = param.default

    if fixed.get("protocol") == "http":
        for key in TLS_ONLY:
            if key in matrix:
                problem(("matrix", key), f"varying {key} has no effect: protocol is http (fixed), which has no TLS")
    problems += _check_tls(fixed, matrix, where, src)
    if topo is not None:
        problems += _check_nodes(wl, topo, fixed, matrix, where, src)
    return fixed, matrix, problems


def _check_nodes(wl: dict, topo: Topology, fixed: dict[str, Any], matrix: dict[str, list[Any]],
                 where: dict[tuple[str, Any], YamlPath], src: YamlSource) -> list[Problem]:
    """Client and server exist; every path is a first hop that leads to the server. Fills in
    the default path: the client's first neighbour in link order."""
    problems: list[Problem] = []

    def problem(path: YamlPath, message: str) -> None:
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    client, server = wl.get("client"), wl.get("server")
    if not (isinstance(client, str) and isinstance(server, str)):
        return problems  # reported by pydantic
    nodes = ", ".join(topo.nodes)
    for role_name, node in (("client", client), ("server", server)):
        if node not in topo.nodes:
            problem(("workload", role_name), f"unknown node '{node}'{did_you_mean(node, topo.nodes)} (nodes: {nodes})")
    if client == server:
        problem(("workload", "server"), f"client and server are both '{client}'; they must differ")
    if problems:
        return problems

    neighbors = topo.neighbors(client)
    if "path" not in fixed and "path" not in matrix:
        if not neighbors:
            problem(("workload", "client"), f"client '{client}' has no links, so no path to the server")
            return problems
        fixed["path"] = neighbors[0]
        where[("path", fixed["path"])] = ("workload", "client")
        # Keep the canonical parameter order in `fixed`.
        fixed_order = {k: fixed[k] for k in PARAMS if k in fixed}
        fixed.clear()
        fixed.update(fixed_order)

    # A phone first hop means the phone's TCP proxy relays; either way the server must be
    # reachable from the first hop without coming back through the client.
    for hop in matrix.get("path", []) + ([fixed["path"]] if "path" in fixed else []):
        at = where[("path", hop)]
        if hop not in neighbors:
            problem(at, f"'{hop}' is not next to the client '{client}' (its neighbours: "
                        f"{', '.join(neighbors) or 'none'}){did_you_mean(hop, neighbors)}")
        elif not topo.reachable(hop, server, avoiding=(client,)):
            problem(at, f"the server '{server}' cannot be reached through '{hop}' without passing "
                        f"back through the client '{client}'")
    return problems


def _check_tls(fixed: dict[str, Any], matrix: dict[str, list[Any]],
               where: dict[tuple[str, Any], YamlPath], src: YamlSource) -> list[Problem]:
    """Cipher/version and cipher/certificate pairs that could never complete a handshake. The
    matrix is a full cross product, so one bad pair spoils every cell that contains it."""
    choices = {k: matrix.get(k, [fixed.get(k)]) for k in ("protocol", "tls_version", "cipher", "cert")}
    if "https" not in choices["protocol"]:
        return []
    problems: list[Problem] = []

    def problem(cipher: str, message: str) -> None:
        path = where.get(("cipher", cipher), ("workload", "cipher"))
        problems.append(Problem(src.file, src.line(path), dotted(path), message))

    for cipher in choices["cipher"]:
        if cipher in (None, "default"):
            continue
        for version in choices["tls_version"]:
            if cipher in TLS13_SUITES and version != "1.3":
                problem(cipher, f"{cipher} is a TLS 1.3 suite, so cells with tls_version {version} "
                                "cannot complete a handshake")
            elif cipher not in TLS13_SUITES and version == "1.3":
                problem(cipher, f"{cipher} is a TLS 1.2-and-older cipher, so cells with tls_version 1.3 "
                                f"cannot use it; with TLS 1.3 use a suite ({', '.join(TLS13_SUITES[:3])}) "
                                "or 'default'")
        # Certificate type only constrains pre-1.3 cipher names, and only single names (a cipher
        # list like "HIGH:!aNULL" can match either kind).
        if cipher in TLS13_SUITES or not all(c.isalnum() or c in "-_" for c in cipher):
            continue
        for cert in choices["cert"]:
            if cert == "ecdsa-p256" and "ECDSA" not in cipher.upper():
                problem(cipher, f"{cipher} authenticates with RSA, so cells with cert ecdsa-p256 cannot "
                                "complete a handshake; use an ECDHE-ECDSA-... cipher or cert rsa2048")
            elif cert == "rsa2048" and "ECDSA" in cipher.upper():
                problem(cipher, f"{cipher} needs an ECDSA certificate, so cells with cert rsa2048 cannot "
                                "complete a handshake; use cert ecdsa-p256")
    return problems
