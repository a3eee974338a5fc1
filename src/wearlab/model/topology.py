"""Topologies: which hosts exist and how their links are shaped, loaded from YAML and resolved.

Three checks, all reported together with their lines: `_check_graph` reads the raw data for what
spans the document (node names, links naming real nodes, one link per pair, known profiles);
pydantic checks types, units and unknown keys; `_resolve_link` folds profile -> link -> direction
into one `Shape` per direction and checks jitter <= delay on the result.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from wearlab.errors import InputError, Problem
from wearlab.model.declarations import Catalog
from wearlab.model.devices import DEVICE_NAME, DEVICE_NAME_RULE, Device, builtin_devices, resolve_devices, specs_from_mapping
from wearlab.model.interference import Interference, InterferenceSpec, couplings_of
from wearlab.model.media import BANDS, MEDIA, Band, Medium
from wearlab.model.profiles import PROFILES
from wearlab.model.roles import ROLES, Role
from wearlab.model.shape import Shape, ShapeSpec
from wearlab.model.quantities import format_duration
from wearlab.model.yamlsrc import (
    LocatedProblems as _Report,
    LineMap,
    Where,
    YamlPath,
    did_you_mean,
    dotted,
    line_of,
    load_yaml,
    problems_from_validation,
    sort_problems,
)


# Node names become network-namespace and interface-name parts; Linux caps interface names at 15
# characters, and wearlab needs room for a suffix, hence 12 lowercase letters/digits.
NODE_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
NODE_NAME_RULE = ("node names are used for network namespaces and interface names, so they must be "
                  "1-12 lowercase letters or digits, starting with a letter (e.g. 'watch', 'ap1')")

# Names end up in result directory names; keep them to one safe path component.
DOC_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DOC_NAME_RULE = "names must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"

# A Docker image reference: [registry/]name[:tag] (lowercase path components; no digests needed).
IMAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9._/-]{0,127}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")

# Only the net.* tree is per network namespace; anything else would change the host itself.
SYSCTL_NAME = re.compile(r"^net(\.[A-Za-z0-9_\-]+)+$")


def _role(value: Any) -> Role:
    if isinstance(value, str) and value.strip().lower() in ROLES:
        return Role(value.strip().lower())
    shown = f"'{value}'" if isinstance(value, str) else repr(value)
    raise ValueError(f"unknown role {shown}{did_you_mean(value, ROLES)} (roles: {', '.join(ROLES)})")


def _medium(value: Any) -> Medium | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in MEDIA:
        return Medium(value.strip().lower())
    shown = f"'{value}'" if isinstance(value, str) else repr(value)
    raise ValueError(f"unknown medium {shown}{did_you_mean(value, MEDIA)} (media: {', '.join(MEDIA)})")


def _band(value: Any) -> Band | None:
    if value is None:
        return None
    by_key = {b.value.lower(): b for b in Band}
    if isinstance(value, str) and value.strip().lower() in by_key:
        return by_key[value.strip().lower()]
    shown = f"'{value}'" if isinstance(value, str) else repr(value)
    raise ValueError(f"unknown band {shown}{did_you_mean(value, BANDS)} (bands: {', '.join(BANDS)})")


def _sysctl_value(value: Any) -> str:
    # YAML turns `net.ipv4.ip_forward: 1` into an int; sysctl values are text either way.
    if isinstance(value, bool):
        raise ValueError(f"write {int(value)} instead of {str(value).lower()}; sysctl values are numbers or text")
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str) and "\n" not in value:
        return value
    raise ValueError("a sysctl value must be a single line of text or a number")


# ---------------------------------------------------------------------------------------------
# YAML-facing models


class NodeSpec(BaseModel):
    """A node: its role, optionally its kind (what software runs; default from the role), the
    kind's options as further keys, and per-namespace sysctls."""

    model_config = ConfigDict(extra="allow")

    role: Annotated[Role, BeforeValidator(_role)]
    kind: str | None = None
    image: str | None = None
    device: str | None = None   # what hardware its computation runs on (wearlab.model.devices)
    # tcpcrypt on this node (when a workload runs tcpcryptd there; nodes.tcpcrypt): opportunistic
    # (fall back to plain TCP when the peer has no TCP-ENO, RFC 8547 4.6) or require (reset
    # such connections instead: tcpcryptd --require-encryption all)
    tcpcrypt: Literal["opportunistic", "require"] = "opportunistic"
    # RFC 8548 3.5 session resumption between this node's tcpcryptd and its peers' (both ends must
    # have it on). Off by default: resumption skips the key exchange of every connection after
    # the first to a peer, which changes what a tcpcrypt experiment measures (seed 004's numbers
    # are of fresh key exchanges). Off: tcpcryptd --no-resume.
    tcpcrypt_resumption: bool = False
    # An opt-in key log of this node's tcpcryptd (tcpcryptd --key-log, the role SSLKEYLOGFILE
    # plays for TLS): every session's secrets into <results>/keys/<node>.keylog, so `wearlab
    # decrypt` can open the captures' tcpcrypt frames. For teaching and debugging only; off by
    # default, because whoever reads the results can then read every encrypted connection.
    tcpcrypt_key_log: bool = False
    sysctls: dict[str, Annotated[str, BeforeValidator(_sysctl_value)]] = Field(default_factory=dict)

    @field_validator("device")
    @classmethod
    def _device_name(cls, v: str | None) -> str | None:
        if v is not None and not DEVICE_NAME.match(v):
            raise ValueError(f"'{v}' is not a device name: {DEVICE_NAME_RULE} (`wearlab devices` lists them)")
        return v

    @field_validator("image")
    @classmethod
    def _image_name(cls, v: str | None) -> str | None:
        if v is not None and not IMAGE_NAME.match(v):
            raise ValueError(f"'{v}' is not a Docker image reference (e.g. wearlab/server-nginx:latest)")
        return v


class LinkSpec(ShapeSpec):
    """A link: its two ends, an optional profile, what carries it (`medium`: bt, ble, wifi, wired;
    default: the profile's), and shaping overrides (both / per direction)."""

    between: list[str]
    profile: str | None = None
    medium: Annotated[Medium | None, BeforeValidator(_medium)] = None
    band: Annotated[Band | None, BeforeValidator(_band)] = None   # WiFi only: 2.4GHz | 5GHz
    forward: ShapeSpec | None = None
    reverse: ShapeSpec | None = None

    @field_validator("between")
    @classmethod
    def _two_ends(cls, v: list[str]) -> list[str]:
        if len(v) != 2:
            raise ValueError(f"between needs exactly two node names, like [watch, phone]; got {len(v)}")
        return v


class TopologySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    devices: Any = None   # a mapping of device name -> device, or a path to a YAML file of them
    nodes: dict[str, NodeSpec]
    links: list[LinkSpec] = Field(default_factory=list)
    interference: InterferenceSpec | None = None


# The fields of a topology link that a cell may set (`link.<link>.<field>` matrix keys,
# model.link_settings): its shaping, in both directions or under `forward`/`reverse`, a WiFi
# link's band, and its profile - one of the link's own medium (Topology.with_link_settings). Not
# its ends or medium: those decide which node checks, radios and energy figures apply, which the
# plan resolves once for the whole experiment.
LINK_WIDE_SETTINGS = ("band", "profile")   # a whole link's, never one direction's
LINK_SETTINGS = (*ShapeSpec.model_fields, *LINK_WIDE_SETTINGS)
LINK_DIRECTIONS = ("forward", "reverse")


class _CellReport:
    """A problem reporter for a cell's links: what `_resolve_link` and `_resolve_interference` call."""

    def __init__(self, problem) -> None:
        self.problem, self.problems = problem, 0

    def __call__(self, path: YamlPath, message: str) -> None:
        self.problems += 1
        self.problem(tuple(path), message)

    def line(self, path: YamlPath) -> int | None:
        return None


# ---------------------------------------------------------------------------------------------
# Resolved models (what the rest of wearlab consumes)


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    role: Role
    kind: str
    options: dict[str, Any] = Field(default_factory=dict)  # the kind's options as written (normalised)
    sysctls: dict[str, str] = Field(default_factory=dict)
    image: str | None = None  # runs as a Docker container of this image (realize.containers)
    device: str | None = None  # a device's name; the plan resolves it (built-in or the topology's)
    tcpcrypt: str = "opportunistic"  # opportunistic | require (NodeSpec.tcpcrypt)
    tcpcrypt_resumption: bool = False  # NodeSpec.tcpcrypt_resumption
    tcpcrypt_key_log: bool = False  # NodeSpec.tcpcrypt_key_log


class Link(BaseModel):
    """A resolved link. forward = a -> b, reverse = b -> a."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    a: str
    b: str
    profile: str | None
    medium: Medium | None = None   # None: neither the link nor a profile says
    band: Band | None = None       # a WiFi link's band (the link's or its profile's); None otherwise
    forward: Shape
    reverse: Shape
    line: int | None = None
    # The link as the topology writes it (its profile and the fields written beside it), so that
    # a cell's profile can take the profile's place under the same explicit fields
    # (Topology.with_link_settings). Not shown: the shapes above are what it resolves to.
    spec: LinkSpec | None = Field(default=None, exclude=True, repr=False)

    def shape(self, src: str, dst: str) -> Shape:
        """Shaping for traffic sent from `src` to `dst` over this link."""
        if (src, dst) == (self.a, self.b):
            return self.forward
        if (src, dst) == (self.b, self.a):
            return self.reverse
        raise KeyError(f"link {self.a}-{self.b} does not join {src} and {dst}")

    def other(self, node: str) -> str:
        return self.b if node == self.a else self.a

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


class Topology(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str = ""
    file: str | None = None
    nodes: dict[str, Node]
    links: list[Link]
    where: Where = Field(default_factory=lambda: Where(None), exclude=True)   # for the plan's problems
    # Devices the topology defines (`devices:`), resolved; the built-in ones are not repeated here.
    devices: dict[str, Device] = Field(default_factory=dict, exclude=True)
    devices_doc: dict[str, Any] = Field(default_factory=dict, exclude=True)   # ... as written, for to_document
    # 2.4 GHz coexistence (model.interference): its couplings are empty when it is off.
    interference: Interference = Field(default_factory=Interference)

    def neighbors(self, node: str) -> list[str]:
        """Nodes linked to `node`, in link order."""
        return [link.other(node) for link in self.links if node in (link.a, link.b)]

    def link_between(self, a: str, b: str) -> Link | None:
        """The link joining a and b (in either direction), or None."""
        for link in self.links:
            if {link.a, link.b} == {a, b}:
                return link
        return None

    def reachable(self, start: str, goal: str, *, avoiding: tuple[str, ...] = ()) -> bool:
        """Whether `goal` can be reached from `start` without passing through `avoiding`."""
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            for nxt in self.neighbors(node):
                if nxt not in seen and nxt not in avoiding:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    def with_link_settings(self, settings: dict[tuple[str, str], dict[str, Any]], problem) -> Topology:
        """This topology with some links' settings replaced (a cell's `link.<link>.<field>` matrix
        keys): `settings` maps a link's ends (as the topology writes them) to a link's fields as
        a topology link writes them (LINK_SETTINGS, `forward:`/`reverse:` for one direction),
        set on top of the resolved link. The same validation and fold as the topology's own links
        (`LinkSpec`, `_resolve_link`), and the interference rule resolved again on the result (a
        band decides the couplings). `problem(path, message)` gets each problem, `path` as in a
        topology (("links", i, "band"), ("interference", "coupled"), ...).

        A cell's `profile` is the one preset, everything written is explicit, and explicit beats
        preset as in a topology: the cell's profile takes the place of the link's `profile:` under
        the fields the topology writes beside it (its rate stays if it writes one), and the cell's
        other fields go on top of that. The profile must be of the link's medium (the medium
        decides radios and energy figures: another medium is another topology)."""
        if not settings:
            return self
        report = _CellReport(problem)
        links = list(self.links)
        for i, link in enumerate(links):
            written = settings.get((link.a, link.b))
            if written is None:
                continue
            written = dict(written)
            profile = written.pop("profile", None)
            try:
                ls = LinkSpec.model_validate({"between": [link.a, link.b], **written})
            except ValidationError as e:
                for err in e.errors(include_url=False):
                    report(("links", i, *err["loc"]), err["msg"].removeprefix("Value error, "))
                continue
            under = link if profile is None else _with_profile(i, link, profile, report)
            if under is not None:
                links[i] = _resolve_link(i, ls, report, under=under)
        written = dict(self.interference.written)
        spec = InterferenceSpec.model_validate(written) if self.interference.declared else None
        interference = _resolve_interference(spec, written, links, report)
        return self.model_copy(update={"links": links, "interference": interference})

    def to_document(self, catalog: Catalog, as_written: frozenset[tuple[str, str]] = frozenset()) -> dict[str, Any]:
        """Resolved topology in the YAML schema (loadable again), units as strings. The links in
        `as_written` (their ends) are written as the topology writes them, profile and the fields
        beside it, not resolved: a cell's profile takes the place of that profile under those
        fields only (with_link_settings), so resolved shapes written out would hide it."""
        nodes: dict[str, Any] = {}
        for node in self.nodes.values():
            nodes[node.name] = {"role": node.role.value}
            if node.kind != catalog.default_kinds[node.role]:
                nodes[node.name]["kind"] = node.kind
            kind = catalog.node_kinds[node.kind]
            nodes[node.name].update({k: kind.options[k].to_doc(v) for k, v in node.options.items()})
            if node.image:
                nodes[node.name]["image"] = node.image
            if node.device:
                nodes[node.name]["device"] = node.device
            if node.tcpcrypt != "opportunistic":
                nodes[node.name]["tcpcrypt"] = node.tcpcrypt
            if node.tcpcrypt_resumption:
                nodes[node.name]["tcpcrypt_resumption"] = True
            if node.tcpcrypt_key_log:
                nodes[node.name]["tcpcrypt_key_log"] = True
            if node.sysctls:
                nodes[node.name]["sysctls"] = dict(node.sysctls)
        links = []
        for link in self.links:
            if (link.a, link.b) in as_written and link.spec is not None:
                links.append(_as_written(link.spec))
                continue
            doc: dict[str, Any] = {"between": [link.a, link.b]}
            if link.profile:
                doc["profile"] = link.profile
            if link.medium is not None:
                doc["medium"] = link.medium.value
            if link.band is not None:
                doc["band"] = link.band.value
            doc["forward"] = link.forward.to_document()
            doc["reverse"] = link.reverse.to_document()
            links.append(doc)
        doc: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.devices_doc:
            doc["devices"] = self.devices_doc
        out = {**doc, "nodes": nodes, "links": links}
        if self.interference.written:
            out["interference"] = dict(self.interference.written)
        return out


# ---------------------------------------------------------------------------------------------
# Loading


def load_topology(path: str | Path, catalog: Catalog) -> Topology:
    """Load and resolve a topology file. Raises InputError listing every problem found."""
    src = load_yaml(path)
    if src.data is None:
        raise InputError([Problem(src.file, None, None, "file is empty; a topology needs nodes: and links:")])
    return topology_from_mapping(src.data, src.file, src.lines, catalog, default_name=Path(path).stem)


def topology_from_mapping(
    data: Any,
    file: str | None,
    linemap: LineMap,
    catalog: Catalog,
    *,
    at: YamlPath = (),
    default_name: str | None = None,
) -> Topology:
    """Validate and resolve a topology given as plain data. `at` is where the mapping sits in
    `file` (e.g. ("topology",) when inline in an experiment), for lines and field names."""
    shown = file or "<topology>"
    if not isinstance(data, dict):
        raise InputError([Problem(shown, line_of(linemap, at), dotted(at) or None,
                                  "a topology is a mapping with nodes: and links:")])
    report = _Report(shown, linemap, at)
    # Cross-reference checks read the raw data, so they are reported together with any type or
    # unit errors instead of only after those are fixed.
    _check_graph(data, report, default_name)
    try:
        spec = TopologySpec.model_validate(data)
    except ValidationError as e:
        raise InputError(sort_problems(report.problems + problems_from_validation(
            e, linemap, shown, TopologySpec, at))) from None
    links = [_resolve_link(i, ls, report) for i, ls in enumerate(spec.links)]
    nodes = {n: _resolve_node(n, s, report, catalog) for n, s in spec.nodes.items()}
    devices, devices_doc = _load_devices(data.get("devices"), report)
    interference = _resolve_interference(spec.interference, data.get("interference"), links, report)
    if report.problems:
        raise InputError(sort_problems(report.problems))
    name = spec.name if spec.name is not None else (default_name or "topology")
    return Topology(name=name, description=spec.description, file=file, nodes=nodes, links=links,
                    where=Where(file, linemap, tuple(at)), devices=devices, devices_doc=devices_doc,
                    interference=interference)


def _resolve_interference(spec: InterferenceSpec | None, raw: Any, links: list[Link], problem: _Report) -> Interference:
    """The coupling rule once: which (BT/BLE, 2.4 GHz WiFi) pairs share a node, with what losses.
    A topology opts in by writing `interference:` (then on where a node has both, unless
    `coupled: false`): the shipped experiments' calibrations were made without it, and a rule that
    changes rates behind a user's back is one no one asked for. `coupled: true` where no node has
    both is an error (it would silently do nothing)."""
    declared = spec is not None
    if spec is None:
        spec = InterferenceSpec(coupled=False)
    values = {k: v for k, v in (("bt_loss_pct", spec.bt_loss), ("wifi_loss_pct", spec.wifi_loss),
                                ("active_above_bps", spec.active_above), ("window_s", spec.window)) if v is not None}
    for key, field in (("bt_loss", "bt_loss_pct"), ("wifi_loss", "wifi_loss_pct")):
        if values.get(field, 0) >= 100:
            problem(("interference", key), f"{key} must be below 100 % (a link that loses all its capacity is down: "
                                           "use a timeline's `state: down`)")
    couplings, unbanded = couplings_of(links)
    if spec.coupled is True and not couplings:
        why = (f"; WiFi links without a band: {', '.join(unbanded)} (say band: 2.4GHz or 5GHz)" if unbanded else "")
        problem(("interference", "coupled"), "coupled: true, but no node has both a BT/BLE link and a 2.4 GHz WiFi "
                                             f"link{why}")
    if spec.coupled is not False:
        by_ends = {(l.a, l.b): l for l in links}
        for ends in sorted({e for c in couplings for e in (c.bt, c.wifi)}):
            link = by_ends[ends]
            if link.forward.rate_bps is None or link.reverse.rate_bps is None:
                problem(("links", link.index), f"{link.a}-{link.b} shares 2.4 GHz with another link on one node, and "
                                               "interference lowers its rate while both carry traffic: give it a rate "
                                               "(or interference: {coupled: false})")
    written = dict(raw) if isinstance(raw, dict) else {}
    return Interference(**values, couplings=() if spec.coupled is False else tuple(couplings), written=written,
                        declared=declared)


def _load_devices(raw: Any, report: _Report) -> tuple[dict[str, Device], dict[str, Any]]:
    """`devices:` - a mapping of name -> device inline, or a path (relative to this file) to a YAML
    file holding one. Problems are located in whichever file holds the device."""
    if raw is None:
        return {}, {}
    builtin = builtin_devices()
    try:
        if isinstance(raw, str) and raw.strip():
            from wearlab.model.devices import load_device_file
            base = os.path.dirname(report.file) if report.file != "<topology>" else "."
            path = raw.strip() if os.path.isabs(raw.strip()) else os.path.normpath(os.path.join(base, raw.strip()))
            if not os.path.isfile(path):
                report(("devices",), f"devices file '{raw.strip()}' not found (looked for {path}; paths are relative "
                                     "to the file that names them)")
                return {}, {}
            devices = load_device_file(path, builtin)
            return devices, load_yaml(path).data
        at = report.at + ("devices",)
        specs = specs_from_mapping(raw, report.file, report.lines, at)
        for n in specs:
            if n in builtin:
                report(("devices", n), f"'{n}' is a built-in device; give yours another name (like: {{device: {n}, "
                                       "scale: 1, derived: ...}} starts from it)")
        if report.problems:
            return {}, {}
        return resolve_devices(specs, builtin, report.file, report.lines, at), raw
    except InputError as e:
        report.problems.extend(e.problems)
        return {}, {}



def _check_graph(data: dict, problem: _Report, default_name: str | None) -> None:
    """Names, links naming real nodes, one link per pair, known profiles. Tolerates malformed
    parts (pydantic reports those); checks whatever is well-formed enough to check."""
    name = data.get("name", default_name or "topology")
    if isinstance(name, str) and not DOC_NAME.match(name):
        problem(("name",) if "name" in data else (), f"'{name}' is not a usable topology name; {DOC_NAME_RULE}")

    nodes = data.get("nodes")
    names = [n for n in nodes if isinstance(n, str)] if isinstance(nodes, dict) else None
    if isinstance(nodes, dict):
        if not nodes:
            problem(("nodes",), "no nodes; a topology needs at least one (e.g. watch: {role: wearable})")
        for node_name, node in nodes.items():
            if isinstance(node_name, str) and not NODE_NAME.match(node_name):
                problem(("nodes", node_name), f"bad node name '{node_name}': {NODE_NAME_RULE}")
            sysctls = node.get("sysctls") if isinstance(node, dict) else None
            for key in sysctls if isinstance(sysctls, dict) else ():
                if isinstance(key, str) and not SYSCTL_NAME.match(key):
                    problem(("nodes", node_name, "sysctls", key),
                            f"'{key}' is not a per-namespace sysctl; only net.* sysctls can be set per "
                            "node (others would change the host)")

    links = data.get("links")
    pairs: dict[frozenset[str], int] = {}
    for i, link in enumerate(links if isinstance(links, list) else ()):
        if not isinstance(link, dict):
            continue
        profile = link.get("profile")
        if isinstance(profile, str) and profile not in PROFILES:
            problem(("links", i, "profile"),
                    f"unknown profile '{profile}'{did_you_mean(profile, PROFILES)} (profiles: {', '.join(PROFILES)})")
        ends = link.get("between")
        if not (isinstance(ends, list) and len(ends) == 2 and all(isinstance(e, str) for e in ends)):
            continue
        a, b = ends
        ok = True
        if names is not None:
            for j, end in enumerate(ends):
                if end not in names:
                    problem(("links", i, "between", j),
                            f"unknown node '{end}'{did_you_mean(end, names)} (nodes: {', '.join(names) or 'none'})")
                    ok = False
        if a == b:
            problem(("links", i, "between"), f"a link cannot join '{a}' to itself")
            continue
        pair = frozenset(ends)
        if pair in pairs:
            first = pairs[pair]
            first_line = problem.line(("links", first))
            where = f"links[{first}]" + (f" (line {first_line})" if first_line else "")
            problem(("links", i, "between"),
                    f"{a} and {b} are already linked by {where}; wearlab supports one link per pair of nodes")
        elif ok:
            pairs[pair] = i


def _resolve_node(name: str, spec: NodeSpec, problem: _Report, catalog: Catalog) -> Node | None:
    """The node's kind (written, or its role's default) and that kind's options."""
    kinds = catalog.node_kinds
    kind_name = spec.kind if spec.kind is not None else catalog.default_kinds[spec.role]
    options, bad = resolve_kind(catalog, kind_name, spec.role, spec.model_extra or {})
    for key, message in bad:
        problem(("nodes", name, key), message)
    if kind_name not in kinds:
        return None
    if spec.image is not None and not kinds[kind_name].in_container:
        able = [k for k, c in kinds.items() if c.in_container and spec.role in c.roles]
        problem(("nodes", name, "image"),
                f"kind {kind_name} cannot run in a container: its software is wearlab's own and runs in the "
                f"node's namespace (kinds that can: {', '.join(able) or 'none for this role'})")
    return Node(name=name, role=spec.role, kind=kind_name, options=options, sysctls=dict(spec.sysctls),
                image=spec.image, device=spec.device, tcpcrypt=spec.tcpcrypt,
                tcpcrypt_resumption=spec.tcpcrypt_resumption, tcpcrypt_key_log=spec.tcpcrypt_key_log)


def resolve_kind(catalog: Catalog, kind_name: str, role: Role, given: dict[str, Any],
                 normalised: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Check a kind name against a role and normalise its options. `normalised`: options already
    normalised (the topology's, under an experiment's overrides), taken as they are. Returns
    (options, normalised; [(key, problem)])."""
    kinds = catalog.node_kinds
    if kind_name not in kinds:
        return {}, [("kind", f"unknown kind '{kind_name}'{did_you_mean(kind_name, kinds)} (kinds: {', '.join(kinds)})")]
    kind = kinds[kind_name]
    problems: list[tuple[str, str]] = []
    if role not in kind.roles:
        problems.append(("kind", f"kind {kind_name} runs on {', '.join(r.value for r in sorted(kind.roles))} "
                                 f"nodes, not on a {role.value}"))
    options: dict[str, Any] = {k: v for k, v in (normalised or {}).items() if k in kind.options}
    for key, value in given.items():
        if key in kind.renamed:
            problems.append((key, f"kind {kind_name} no longer takes '{key}': {kind.renamed[key]}"))
            continue
        if key not in kind.options:
            allowed = ["role", "kind", "image", "device", "tcpcrypt", "tcpcrypt_resumption", "tcpcrypt_key_log", "sysctls", *kind.options.names()]
            hint = did_you_mean(key, allowed) or f" (kind {kind_name} takes: {', '.join(kind.options.names()) or 'no options'})"
            problems.append((key, f"unknown key '{key}'{hint}"))
            continue
        try:
            options[key] = kind.options[key].normalize(value)
        except ValueError as e:
            problems.append((key, str(e)))
    for p in kind.options:
        if p.required and p.name not in options:
            problems.append(("kind", f"kind {kind_name} needs '{p.name}' ({p.doc})"))
    return options, problems


def _as_written(ls: LinkSpec) -> dict[str, Any]:
    """A link as its topology wrote it, units as strings (Topology.to_document)."""
    doc: dict[str, Any] = {"between": list(ls.between)}
    if ls.profile is not None:
        doc["profile"] = ls.profile
    if ls.medium is not None:
        doc["medium"] = ls.medium.value
    if ls.band is not None:
        doc["band"] = ls.band.value
    both = ls.over(Shape()).to_document()
    doc.update({k: both[k] for k in ShapeSpec.model_fields if k in ls.written()})
    for direction in LINK_DIRECTIONS:
        own: ShapeSpec | None = getattr(ls, direction)
        if own is not None and own.written():
            shown = own.over(Shape()).to_document()
            doc[direction] = {k: shown[k] for k in ShapeSpec.model_fields if k in own.written()}
    return doc


def _with_profile(i: int, link: Link, profile: str, problem) -> Link | None:
    """`link` resolved again as the topology writes it with `profile` in its profile's place
    (Topology.with_link_settings); None, with the problem reported, if `profile` is unknown or of
    another medium than the link's."""
    path = ("links", i, "profile")
    if profile not in PROFILES:
        problem(path, f"unknown profile '{profile}'{did_you_mean(profile, PROFILES)} (profiles: {', '.join(PROFILES)})")
        return None
    theirs = PROFILES[profile].medium
    if theirs != link.medium:
        mine = link.medium.value if link.medium else "not given"
        same = [p.name for p in PROFILES.values() if p.medium == link.medium]
        problem(path, f"profile {profile} is a {theirs.value} link's and {link.name}'s medium is {mine}: a cell "
                      f"keeps its links' media, which decide radios and energy figures (profiles of this medium: "
                      f"{', '.join(same) or 'none'}; for another medium, change the topology)")
        return None
    spec = link.spec if link.spec is not None else LinkSpec(between=[link.a, link.b], medium=link.medium)
    resolved = _resolve_link(i, spec.model_copy(update={"profile": profile}), problem)
    return resolved.model_copy(update={"line": link.line})


def _resolve_link(i: int, ls: LinkSpec, problem, under: Link | None = None) -> Link:
    """Fold profile -> link -> direction into one Shape per direction; check jitter <= delay.
    `under`: the link already resolved, which `ls` (a cell's link settings, LINK_SETTINGS) sets
    on top of, instead of the profile: one fold and one set of checks for both."""
    a, b = ls.between
    # An unknown profile is already reported; resolving without it still finds other problems.
    profile = PROFILES.get(ls.profile) if ls.profile is not None else None
    shapes: dict[str, Shape] = {}
    clipped: dict[YamlPath, list[tuple[str, str, str]]] = {}
    for direction, src_node, dst_node in (("forward", a, b), ("reverse", b, a)):
        own: ShapeSpec | None = getattr(ls, direction)
        if under is not None:
            base = getattr(under, direction)
        else:
            base = getattr(profile, direction) if profile else Shape()
        shape = ls.over(base)
        if own is not None:
            shape = own.over(shape)
        shapes[direction] = shape
        if shape.jitter_s > shape.delay_s:
            # Point at the most specific place that set jitter or delay for this direction.
            if own is not None and own.written() & {"jitter", "delay"}:
                path: YamlPath = ("links", i, direction, "jitter" if "jitter" in own.written() else "delay")
            elif ls.written() & {"jitter", "delay"}:
                path = ("links", i, "jitter" if "jitter" in ls.written() else "delay")
            else:
                path = ("links", i, "profile")
            numbers = f"jitter {format_duration(shape.jitter_s)} > delay {format_duration(shape.delay_s)}"
            clipped.setdefault(path, []).append((numbers, src_node, dst_node))
    for path, cases in clipped.items():
        if len(cases) == 2 and cases[0][0] == cases[1][0]:
            what = f"{cases[0][0]} in both directions"
        else:
            what = " and ".join(f"{n} for {s} -> {d}" for n, s, d in cases)
        problem(path, f"{what}; jitter must not exceed delay, or netem clips the negative delays to 0 "
                      "and skews the distribution: lower jitter or raise delay")
    if under is not None:
        medium, band = under.medium, under.band
    else:
        medium = ls.medium if ls.medium is not None else (profile.medium if profile else None)
        band = None
    if ls.band is not None:
        if medium != Medium.WIFI:
            problem(("links", i, "band"), f"band is a WiFi link's (2.4GHz or 5GHz); this link's medium is "
                                          f"{medium.value if medium else 'not given (say medium: wifi)'}")
        else:
            band = ls.band
    elif under is None and medium == Medium.WIFI and profile is not None and profile.medium == Medium.WIFI:
        band = profile.band
    if under is not None:
        return under.model_copy(update={"band": band, "forward": shapes["forward"], "reverse": shapes["reverse"]})
    return Link(index=i, a=a, b=b, profile=ls.profile, medium=medium, band=band, forward=shapes["forward"],
                reverse=shapes["reverse"], line=problem.line(("links", i)), spec=ls)
