"""Pages as data (issue 23): what a browser fetches to show one page, loaded from YAML and checked.

A page is its objects: each one a path on an origin (a name; each origin becomes a server node
later), its size in bytes, its content type, the object it depends on (the one whose arrival
lets the browser discover it: the HTML that names a script, the script that fetches some JSON)
and the compute time the browser spends on it after it arrives (parsing, running a script: a
duration on the reference machine, scaled later by the client node's device). The first object is
the root (the document); it depends on nothing, and every other object depends on one object
(the root when `depends_on:` is left out), so a page's dependencies are a tree.

A page file holds one page (`objects:`), or several (`pages:`, a mapping name -> page) and may
give them a `session:`: pages fetched in sequence by one client on one connection pool (seed
002's usage session /login -> /display -> /dashboard). `origins:` are the file's, shared by its
pages. The format, with examples, is experiments/pages/README.md.

Checks, each a Problem with file, line and field (InputError, exit 2 through the CLI): unknown
keys and bad units (pydantic), an unknown origin, a dependency on an object the page lacks (or
names ambiguously), a cycle of dependencies, a negative size, a zero size where bytes are needed
(the root; an object others depend on), the same path twice on one origin, an unknown page in
the session. Cross-reference checks read the raw data, so they are reported together with type
and unit errors, as `model/topology.py` does.

Nothing here times a page load: that is the workload's (it comes later). `critical_path` and
`http1_connections` are the two facts of a page's shape the workload's tests will want.
"""

from __future__ import annotations

import io
import mimetypes
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator

from wearlab.errors import InputError, Problem
from wearlab.model.quantities import format_duration, format_size
from wearlab.model.topology import DOC_NAME, DOC_NAME_RULE, NODE_NAME
from wearlab.model.unit_input import parse_duration, parse_size
from wearlab.model.yamlsrc import (
    LocatedProblems as _Report,
    LineMap,
    Where,
    YamlPath,
    did_you_mean,
    line_of,
    load_yaml,
    problems_from_validation,
    sort_problems,
)

ORIGIN_RULE = ("an origin's name becomes a server node's name, so it is 1-12 lowercase letters or digits, "
               "starting with a letter (e.g. 'www', 'cdn1'); its real host name goes in `host:`")
MEDIA_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$")
# Chromium's (and Firefox's) HTTP/1.1 connection pool: at most 6 connections per origin.
HTTP1_CONNECTIONS_PER_ORIGIN = 6

# An object's cacheability (`cache:`), as the Cache-Control its server sends (RFC 9111 5.2.2):
# no-store: never kept, fetched again on every view; no-cache: kept, revalidated on every view (a
# conditional request, answered 304 without the body); a max-age: fresh that long (a repeat view
# within it makes no request), then revalidated. The default, when neither the object, its page
# nor its file says: no-store - a page file that says nothing about caching invents none, and its
# loads stay what they were before caching existed (every object fetched on every view).
CACHE_DEFAULT = "no-store"
CACHE_RULE = ("no-store (fetched again on every view), no-cache (kept, revalidated on every view: a 304) or a "
              "max-age as a duration (e.g. 7d, 1h, 30s, 0s: fresh that long, then revalidated)")


_CACHE_UNITS = {"d": 86400, "h": 3600}


def cache_control(value: Any) -> str:
    """`cache:` as the Cache-Control header its server sends: no-store, no-cache or max-age=N
    (a duration: s, ms, or whole hours and days, 1h, 7d; a bare number is seconds, as
    Cache-Control's delta-seconds)."""
    if isinstance(value, str) and value.strip().lower() in ("no-store", "no-cache"):
        return value.strip().lower()
    text = value.strip().lower().removeprefix("max-age=").strip() if isinstance(value, str) else value
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return f"max-age={text}"
    if isinstance(text, str) and text.isdigit():
        return f"max-age={int(text)}"
    if isinstance(text, str) and text[:-1].strip().isdigit() and text[-1:] in _CACHE_UNITS:
        return f"max-age={int(text[:-1]) * _CACHE_UNITS[text[-1]]}"
    if isinstance(text, bool) or not isinstance(text, str):
        raise ValueError(f"cache {value!r}: {CACHE_RULE}")
    try:
        seconds = parse_duration(text, bare_unit="s")
    except ValueError as e:
        raise ValueError(f"cache {value!r}: {CACHE_RULE} ({e})") from None
    if seconds != int(seconds):
        raise ValueError(f"cache {value!r}: a max-age is whole seconds (Cache-Control's delta-seconds)")
    return f"max-age={int(seconds)}"


_Cache = Annotated[str | None, BeforeValidator(lambda v: None if v is None else cache_control(v))]


def _unit(parser):
    return BeforeValidator(lambda v: None if v is None else parser(v))


def _duration(v: Any) -> float:
    return parse_duration(v, bare_unit="ms")


# ---------------------------------------------------------------------------------------------
# YAML-facing models


class OriginSpec(BaseModel):
    """An origin written as a mapping: its name and the host it stands for (a HAR's, for the
    certificate's name and the Host header later)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    host: str | None = None


class ObjectSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str
    origin: str | None = None          # default: the file's first origin
    size: Annotated[int, _unit(parse_size)]
    type: str | None = None            # default: from the path's extension (the root: text/html)
    depends_on: str | None = None      # PATH or ORIGIN:PATH; default: the root
    compute: Annotated[float, _unit(_duration)] = 0.0
    server_time: Annotated[float, _unit(_duration)] = 0.0
    cache: _Cache = None               # default: the page's, the file's, else CACHE_DEFAULT

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/") or any(c.isspace() for c in v):
            raise ValueError(f"'{v}' is not a path: it starts with '/' and has no spaces (e.g. /img/logo.png)")
        return v

    @field_validator("type")
    @classmethod
    def _type(cls, v: str | None) -> str | None:
        if v is not None and not MEDIA_TYPE.match(v):
            raise ValueError(f"'{v}' is not a content type (type/subtype, e.g. text/html, image/jpeg)")
        return v


class Observed(BaseModel):
    """What a source saw of this page, kept beside it for checks and reports (not used to load it):
    the connections a browser opened, the servers it talked to, the bytes it downloaded."""

    model_config = ConfigDict(extra="forbid")

    connections: int | None = Field(default=None, ge=1)
    servers: int | None = Field(default=None, ge=1)
    bytes: Annotated[int | None, _unit(parse_size)] = None
    source: str = ""


class PageSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = ""
    cache: _Cache = None
    objects: list[ObjectSpec] = Field(min_length=1)
    observed: Observed | None = None


class SessionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pages: list[str] = Field(min_length=1)
    # shared: one connection pool for the whole session, as a browser keeps its connections;
    # per-page: a fresh client per page (seed 002 ran one curl process per page).
    pool: Literal["shared", "per-page"] = "shared"
    think: Annotated[float, _unit(_duration)] = 0.0   # between one page's end and the next's start


class PageFileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    description: str = ""
    origins: list[str | OriginSpec] = Field(min_length=1)
    cache: _Cache = None               # every object's default
    objects: list[ObjectSpec] | None = None
    observed: Observed | None = None
    pages: dict[str, PageSpec] | None = None
    session: SessionSpec | None = None


# ---------------------------------------------------------------------------------------------
# Resolved models


class Origin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    host: str | None = None


class PageObject(BaseModel):
    """One object of a page. `parent`: the index of the object it depends on (None: the root)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int
    origin: str
    path: str
    size: int                 # bytes of the response body
    type: str
    parent: int | None
    compute_s: float = 0.0    # after it arrives, on the reference machine (scaled by the device)
    server_s: float = 0.0     # the origin's time before its first byte
    cache: str = CACHE_DEFAULT   # the Cache-Control its server sends (cache_control)
    line: int | None = None

    @property
    def ref(self) -> str:
        """How `depends_on:` names it unambiguously: ORIGIN:PATH."""
        return f"{self.origin}:{self.path}"


class Page(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str = ""
    origins: tuple[Origin, ...]
    objects: tuple[PageObject, ...]
    observed: Observed | None = None
    where: Where = Field(default_factory=lambda: Where(None), exclude=True)

    @property
    def root(self) -> PageObject:
        return self.objects[0]

    @property
    def total_bytes(self) -> int:
        return sum(o.size for o in self.objects)

    def children(self, index: int) -> list[PageObject]:
        return [o for o in self.objects if o.parent == index]

    def origins_used(self) -> list[str]:
        """Origins with at least one object, in the order of `origins:`."""
        used = {o.origin for o in self.objects}
        return [o.name for o in self.origins if o.name in used]

    def chain(self, index: int) -> list[PageObject]:
        """The root ... this object, along the dependencies."""
        out = []
        i: int | None = index
        while i is not None:
            out.append(self.objects[i])
            i = self.objects[i].parent
        return out[::-1]


class Session(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    pages: tuple[str, ...]
    pool: Literal["shared", "per-page"] = "shared"
    think_s: float = 0.0


class PageFile(BaseModel):
    """A loaded page file: its pages by name (in the file's order) and its session, if any."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    file: str | None = None
    origins: tuple[Origin, ...]
    pages: dict[str, Page]
    session: Session | None = None

    def sequence(self) -> list[Page]:
        """The pages as a client fetches them: the session's order, else the file's."""
        names = self.session.pages if self.session else tuple(self.pages)
        return [self.pages[n] for n in names]

    @property
    def page(self) -> Page:
        """The page of a one-page file."""
        if len(self.pages) != 1:
            raise ValueError(f"{self.file or self.name} holds {len(self.pages)} pages, not one")
        return next(iter(self.pages.values()))


# ---------------------------------------------------------------------------------------------
# Facts of a page's shape


def critical_path(page: Page) -> list[PageObject]:
    """The longest dependency chain by bytes, root first: the chain whose objects' sizes add up
    to the most (ties: more compute time, then the earlier leaf). A page loads no faster than
    this chain fetched object after object, each after its parent's arrival and compute time."""
    best: tuple[int, float, int] | None = None
    leaf = 0
    for obj in page.objects:
        if page.children(obj.index):
            continue
        chain = page.chain(obj.index)
        key = (sum(o.size for o in chain), sum(o.compute_s for o in chain), -obj.index)
        if best is None or key > best:
            best, leaf = key, obj.index
    return page.chain(leaf)


def http1_connections(page: Page, per_origin: int = HTTP1_CONNECTIONS_PER_ORIGIN) -> dict[str, int]:
    """Per origin, the connections an HTTP/1.1 browser opens for this page, estimated from its
    shape: objects that depend on one object are requested together when it has arrived (and
    its compute time passed), each on an idle connection or a new one, at most `per_origin`;
    connections persist, so the most objects of an origin requested together - its largest group
    of siblings, the root counted alone - is how many it needs. The estimate assumes one origin's
    sibling groups do not overlap in time (a group is done before the next is requested); where
    they do, a browser opens more (up to `per_origin`). The workload measures the real count."""
    need: dict[str, int] = {page.root.origin: 1}
    groups: dict[tuple[int, str], int] = {}
    for obj in page.objects[1:]:
        groups[(obj.parent, obj.origin)] = groups.get((obj.parent, obj.origin), 0) + 1  # type: ignore[index]
    for (_, origin), n in groups.items():
        need[origin] = max(need.get(origin, 0), n)
    return {o: min(per_origin, n) for o, n in need.items()}


# ---------------------------------------------------------------------------------------------
# Loading


def load_page_file(path: str | Path) -> PageFile:
    """Load and check a page file. Raises InputError listing every problem found."""
    src = load_yaml(path)
    if src.data is None:
        raise InputError([Problem(src.file, None, None, "file is empty; a page file needs origins: and objects: "
                                                        "(or pages:)")])
    return page_file_from_mapping(src.data, src.file, src.lines, default_name=Path(path).stem)


def load_pages(path: str | Path) -> list[Page]:
    """The validated page(s) of a page file, in the order a client fetches them."""
    return load_page_file(path).sequence()


def page_file_from_mapping(data: Any, file: str | None, lines: LineMap, *, at: YamlPath = (),
                           default_name: str | None = None) -> PageFile:
    """Check and resolve a page file given as plain data (`at`: where it sits in `file`)."""
    shown = file or "<pages>"
    report = _Report(shown, lines, at)
    if not isinstance(data, dict):
        report((), "a page file is a mapping with origins: and objects: (or pages:)")
        raise InputError(report.problems)
    _check_raw(data, report, default_name)
    try:
        spec = PageFileSpec.model_validate(data)
    except ValidationError as e:
        raise InputError(sort_problems(report.problems + problems_from_validation(
            e, lines, shown, PageFileSpec, at))) from None
    if report.problems:
        raise InputError(sort_problems(report.problems))
    origins = tuple(Origin(name=o) if isinstance(o, str) else Origin(name=o.name, host=o.host) for o in spec.origins)
    where = Where(file, lines, tuple(at))
    name = spec.name if spec.name is not None else (default_name or "page")
    if spec.objects is not None:
        pages = {name: _resolve_page(name, spec.description, spec.objects, spec.observed, origins, where, (),
                                     spec.cache or CACHE_DEFAULT)}
    else:
        assert spec.pages is not None
        pages = {n: _resolve_page(n, p.description, p.objects, p.observed, origins, where, ("pages", n),
                                  p.cache or spec.cache or CACHE_DEFAULT)
                 for n, p in spec.pages.items()}
    session = None
    if spec.session is not None:
        session = Session(pages=tuple(spec.session.pages), pool=spec.session.pool, think_s=spec.session.think)
    return PageFile(name=name, description=spec.description, file=file, origins=origins, pages=pages, session=session)


def _resolve_page(name: str, description: str, objects: list[ObjectSpec], observed: Observed | None,
                  origins: tuple[Origin, ...], where: Where, at: YamlPath, cache: str = CACHE_DEFAULT) -> Page:
    index = {(o.origin or origins[0].name, o.path): i for i, o in enumerate(objects)}
    resolved = []
    for i, o in enumerate(objects):
        origin = o.origin or origins[0].name
        parent = None if i == 0 else (0 if o.depends_on is None else _find(o.depends_on, index)[0])
        resolved.append(PageObject(
            index=i, origin=origin, path=o.path, size=o.size, type=o.type or guess_type(o.path, root=i == 0),
            parent=parent, compute_s=o.compute, server_s=o.server_time, cache=o.cache or cache,
            line=line_of(where.lines, tuple(where.at) + at + ("objects", i))))
    return Page(name=name, description=description, origins=origins, objects=tuple(resolved), observed=observed,
                where=Where(where.file, where.lines, tuple(where.at) + at))


def guess_type(path: str, *, root: bool = False) -> str:
    """A content type from the path's extension; the root (a document) is text/html."""
    guessed, _ = mimetypes.guess_type(path.split("?", 1)[0])
    if guessed:
        return guessed
    return "text/html" if root else "application/octet-stream"


def _find(ref: str, index: dict[tuple[str, str], int]) -> tuple[int | None, str]:
    """The object `ref` (PATH or ORIGIN:PATH) names: (its index, "") or (None, why not)."""
    m = re.fullmatch(r"([a-z][a-z0-9]*):(/.*)", ref)
    if m and (m.group(1), m.group(2)) in index:
        return index[(m.group(1), m.group(2))], ""
    if m:
        return None, f"no object {m.group(2)} on origin {m.group(1)}"
    hits = [(o, i) for (o, p), i in index.items() if p == ref]
    if len(hits) == 1:
        return hits[0][1], ""
    if hits:
        return None, (f"'{ref}' is on several origins ({', '.join(o for o, _ in hits)}); "
                      f"name one as ORIGIN:PATH (e.g. '{hits[0][0]}:{ref}')")
    paths = sorted({p for _, p in index})
    return None, f"no object has the path '{ref}'{did_you_mean(ref, paths)}"



def _check_raw(data: dict, report: _Report, default_name: str | None) -> None:
    """Names, origins, references, cycles and sizes, on the raw data; tolerant of malformed parts
    (pydantic reports those)."""
    name = data.get("name", default_name or "page")
    if isinstance(name, str) and not DOC_NAME.match(name):
        report(("name",) if "name" in data else (), f"'{name}' is not a usable page name; {DOC_NAME_RULE}")
    origins: list[str] = []
    raw_origins = data.get("origins")
    for i, o in enumerate(raw_origins if isinstance(raw_origins, list) else ()):
        oname = o if isinstance(o, str) else o.get("name") if isinstance(o, dict) else None
        if not isinstance(oname, str):
            continue
        path = ("origins", i) if isinstance(o, str) else ("origins", i, "name")
        if not NODE_NAME.match(oname):
            report(path, f"bad origin name '{oname}': {ORIGIN_RULE}")
        if oname in origins:
            report(path, f"origin '{oname}' is listed twice")
        origins.append(oname)
    has_objects, has_pages = "objects" in data, "pages" in data
    if has_objects and has_pages:
        report(("pages",), "a page file holds either objects: (one page) or pages: (several), not both")
    elif not has_objects and not has_pages:
        report((), "no objects: (one page) and no pages: (several); a page file needs one of them")
    if has_objects and isinstance(data.get("objects"), list):
        _check_objects(data["objects"], origins, report, ("objects",))
    pages = data.get("pages")
    if isinstance(pages, dict):
        if not pages:
            report(("pages",), "no pages; write at least one (name: {objects: [...]})")
        for pname, page in pages.items():
            if isinstance(pname, str) and not DOC_NAME.match(pname):
                report(("pages", pname), f"'{pname}' is not a usable page name; {DOC_NAME_RULE}")
            if isinstance(page, dict) and isinstance(page.get("objects"), list):
                _check_objects(page["objects"], origins, report, ("pages", pname, "objects"))
    session = data.get("session")
    if isinstance(session, dict) and isinstance(session.get("pages"), list):
        known = list(pages) if isinstance(pages, dict) else ([str(name)] if has_objects else [])
        for i, p in enumerate(session["pages"]):
            if isinstance(p, str) and p not in known:
                report(("session", "pages", i),
                       f"unknown page '{p}'{did_you_mean(p, known)} (pages: {', '.join(map(str, known)) or 'none'})")


def _check_objects(objects: list, origins: list[str], report: _Report, at: YamlPath) -> None:
    first_origin = origins[0] if origins else None
    index: dict[tuple[str, str], int] = {}
    parents: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            continue
        origin = obj.get("origin", first_origin)
        if "origin" in obj and isinstance(origin, str) and origins and origin not in origins:
            report(at + (i, "origin"),
                   f"unknown origin '{origin}'{did_you_mean(origin, origins)} (origins: {', '.join(origins)})")
        path = obj.get("path")
        if isinstance(origin, str) and isinstance(path, str):
            if (origin, path) in index:
                first = index[(origin, path)]
                line = report.line(at + (first,))
                report(at + (i, "path"), f"{path} on origin {origin} is already objects[{first}]"
                                         + (f" (line {line})" if line else "") + "; a path appears once per origin")
            else:
                index[(origin, path)] = i
        try:
            sizes[i] = parse_size(obj.get("size")) if "size" in obj else None  # type: ignore[assignment]
        except ValueError:
            pass   # pydantic words it
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict):
            continue
        ref = obj.get("depends_on")
        if i == 0:
            if ref is not None:
                report(at + (0, "depends_on"), "the first object is the page's root (its document) and depends on "
                                               "nothing; move the object it names first, or remove depends_on")
            continue
        if ref is None:
            parents[i] = 0
            continue
        if not isinstance(ref, str):
            continue   # pydantic: expected text
        j, why = _find(ref, index)
        if j is None:
            report(at + (i, "depends_on"), f"depends on an object the page does not have: {why}")
        elif j == i:
            report(at + (i, "depends_on"), f"objects[{i}] depends on itself: a cycle")
        else:
            parents[i] = j
    _check_cycles(parents, objects, report, at)
    needed = {0} | set(parents.values())
    for i, size in sizes.items():
        if size == 0 and i in needed:
            what = "the page's root (its document)" if i == 0 else "an object others depend on"
            report(at + (i, "size"), f"0 bytes is impossible here: {what} must carry the bytes that name "
                                     "what depends on it")


def _check_cycles(parents: dict[int, int], objects: list, report: _Report, at: YamlPath) -> None:
    """Each object has one parent, so following parents either reaches the root (0) or loops."""
    reported: set[int] = set()
    for start in sorted(parents):
        seen: list[int] = []
        i: int | None = start
        while i is not None and i != 0 and i not in seen and i in parents:
            seen.append(i)
            i = parents.get(i)
        if i is None or i == 0 or i not in seen:
            continue
        loop = seen[seen.index(i):]
        if reported & set(loop):
            continue
        reported |= set(loop)
        first = min(loop)
        order = loop[loop.index(first):] + loop[:loop.index(first)] + [first]

        def shown(k: int) -> str:
            o = objects[k]
            return str(o.get("path", f"objects[{k}]")) if isinstance(o, dict) else f"objects[{k}]"

        report(at + (first, "depends_on"), "a cycle of dependencies: " + " -> ".join(shown(k) for k in order)
               + " (each depends on the next); no object in it could ever be requested")


# ---------------------------------------------------------------------------------------------
# Writing


def page_document(page: Page, *, name: str | None = None, description: str | None = None) -> dict[str, Any]:
    """A one-page file's YAML document (loadable again): origins, then objects, units as text;
    keys at their defaults are left out."""
    index_paths: dict[str, list[str]] = {}
    for o in page.objects:
        index_paths.setdefault(o.path, []).append(o.origin)
    doc: dict[str, Any] = {"name": name or page.name}
    if description or page.description:
        doc["description"] = description if description is not None else page.description
    doc["origins"] = [{"name": o.name, "host": o.host} if o.host else o.name for o in page.origins]
    objects = []
    for o in page.objects:
        item: dict[str, Any] = {"path": o.path}
        if o.origin != page.origins[0].name:
            item["origin"] = o.origin
        item["size"] = format_size(o.size)
        if o.type != guess_type(o.path, root=o.index == 0):
            item["type"] = o.type
        if o.parent not in (None, 0):
            parent = page.objects[o.parent]
            item["depends_on"] = parent.path if len(index_paths[parent.path]) == 1 else parent.ref
        if o.compute_s:
            item["compute"] = format_duration(o.compute_s)
        if o.server_s:
            item["server_time"] = format_duration(o.server_s)
        if o.cache != CACHE_DEFAULT:
            item["cache"] = cache_spelled(o.cache)
        objects.append(item)
    doc["objects"] = objects
    if page.observed is not None:
        doc["observed"] = page.observed.model_dump(exclude_defaults=True)
    return doc


def cache_spelled(header: str) -> str:
    """A Cache-Control value as `cache:` is written: no-store, no-cache or a duration."""
    if header.startswith("max-age="):
        seconds = int(header.removeprefix("max-age="))
        for unit, n in _CACHE_UNITS.items():
            if seconds and seconds % n == 0:
                return f"{seconds // n}{unit}"
        return f"{seconds}s"
    return header


def dump_page_yaml(doc: dict[str, Any], header: str = "") -> str:
    """YAML text of a page document: each object on one line (flow style), `header` as comments."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    def flow(d: dict) -> CommentedMap:
        m = CommentedMap(d)
        m.fa.set_flow_style()
        return m

    out = CommentedMap()
    for k, v in doc.items():
        if k == "objects":
            out[k] = CommentedSeq([flow(o) for o in v])
        elif k == "origins":
            out[k] = CommentedSeq([flow(o) if isinstance(o, dict) else o for o in v])
        else:
            out[k] = v
    yaml = YAML()
    yaml.width = 4096
    buf = io.StringIO()
    yaml.dump(out, buf)
    lines = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return lines + buf.getvalue()


def write_page_file(path: str | Path, doc: dict[str, Any], header: str = "") -> None:
    Path(path).write_text(dump_page_yaml(doc, header), encoding="utf-8")
