"""A browser's HAR (HTTP Archive 1.2) as page data (issue 23: `wearlab page import FILE.har`).

Pure: HAR JSON in, a page file's document out (the mapping `model/page.py` loads; check it with
`page_file_from_mapping`), plus the notes a person should read about what was dropped or guessed.
How each part of a page is read from the HAR, and why:

- Objects: every entry with an http(s) URL and a response (status > 0), in the order the
  browser started them; `data:`/`blob:` URLs and failed requests (status 0: blocked, aborted)
  are dropped. A URL fetched twice keeps its first entry (a page has a path once per origin).
  The first entry of a page (its navigation) is the root.
- Origins: one per scheme://host:port of the URLs, named after the host (lowercase letters and
  digits, `www.` and the last label dropped, the port appended when not the scheme's default,
  at most 12 characters, made unique) so that each can become a server node; the real host name
  stays in the origin's `host:` - the name the replay's client and servers use (URL, SNI,
  certificate, Host header) - without the port: a replay serves every origin on its server
  node's standard ports (80, 443), and the page file has no port to give. An IP address is no
  host name (a client connects to it without a lookup, sends no SNI, and here it would be an
  address of the client's own namespace), so such an origin gets no `host:` and is replayed
  under its name. Either change is said in the notes, with the origin as recorded.
- Sizes: the response body as transferred (`response.bodySize`: after content-encoding, without
  headers), falling back to the decoded size (`content.size`) when bodySize is unknown (-1) or 0
  (an entry served from cache, a 304). Transferred, not the larger of the two, because the
  replay's servers send bodies of `size` bytes without content-encoding: the transferred size
  reproduces the bytes the recording put on the wire, which is what seed 000 counts; the decoded
  size would inflate every compressed text object (often 3-5x). What is lost: the client's cost
  of decompressing, which the device model does not price today.
- Content types: `content.mimeType` without parameters (charset), else guessed from the path.
- Dependencies: Chromium's `_initiator` where present - `parser` and others with a `url`: that
  URL's object; `script`: the first call frame with a URL in `stack` (then its `parent` stacks).
  An initiator that is not an object of the page, or that started after the object itself,
  becomes the root. Without `_initiator` (Firefox, Safari, a HAR edited by hand) every object
  depends on the root: document order alone cannot tell which object named which, and chaining
  each object to the last document or script before it would invent serial chains the page may
  not have, lengthening its critical path; depending on the root never does (it shortens it
  when the real page had chains - the notes say so).
- Compute time: for an object whose children came from `_initiator`, the gap between its end
  (startedDateTime + time) and its first child's start, when positive: the browser's parsing or
  running it before asking for what it names (on the recording machine; the client node's
  device scales it later). A parser-discovered child usually starts before its parent has fully
  arrived (the HTML streams): no gap, 0. Otherwise 0.
- Server time: 0. `timings.wait` holds the recorded path's round trip as well as the server's
  time, and the emulated path adds its own round trip.
- Cache (`cache:`, for repeat views): from the recorded response's headers - Cache-Control's
  no-store, no-cache or max-age; without a max-age, a validator (ETag, Last-Modified) makes it
  no-cache (revalidated on every view: browsers' heuristic freshness is not replayed) and no
  validator no-store (see `_cache`).
- `observed:`: the connections the browser opened (distinct `connection` ids), the servers (distinct
  `serverIPAddress`) and the bytes (`_transferSize`, else headersSize + bodySize), for reports.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from wearlab.model.page import CACHE_DEFAULT, MEDIA_TYPE, cache_spelled, guess_type
from wearlab.model.quantities import format_duration, format_size

DEFAULT_PORTS = {"http": 80, "https": 443}


class HarError(ValueError):
    """The JSON is not a HAR a page can be made of; the message says what is missing."""


@dataclass
class HarImport:
    """A page file's document made from a HAR, and what a person should know about it."""

    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)


@dataclass
class _Entry:
    url: str
    origin_key: str
    host: str
    path: str
    start: float           # seconds since the epoch
    end: float
    size: int
    type: str
    initiator: dict | None
    connection: str | None
    server_ip: str | None
    transfer: int | None
    cache: str = CACHE_DEFAULT


def har_page_document(har: Any, *, name: str) -> HarImport:
    """The page file (one page per HAR page; several pages become `pages:` and a `session:` in
    their order) a HAR describes. Raises HarError for JSON that is no HAR."""
    log = har.get("log") if isinstance(har, dict) else None
    if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
        raise HarError("not a HAR: no log.entries (a HAR is JSON {\"log\": {\"entries\": [...]}})")
    notes: list[str] = []
    page_ids = [p.get("id") for p in log.get("pages") or [] if isinstance(p, dict)]
    groups: dict[Any, list[_Entry]] = {}
    dropped = 0
    for i, raw in enumerate(log["entries"]):
        entry = _entry(raw, i)
        if entry is None:
            dropped += 1
            continue
        ref = raw.get("pageref") if raw.get("pageref") in page_ids else (page_ids[0] if page_ids else None)
        groups.setdefault(ref, []).append(entry)
    if dropped:
        notes.append(f"{dropped} entr{'y' if dropped == 1 else 'ies'} dropped: not http(s), or no response (status 0)")
    if not groups:
        raise HarError("no entry with an http(s) URL and a response: nothing to make a page of")
    ordered = sorted(groups, key=lambda ref: page_ids.index(ref) if ref in page_ids else len(page_ids))
    origin_names = _origin_names([e for ref in ordered for e in groups[ref]])
    origins = []
    for e in sorted({e.origin_key: e for ref in ordered for e in groups[ref]}.values(),
                    key=lambda e: min(x.start for ref in ordered for x in groups[ref] if x.origin_key == e.origin_key)):
        oname = origin_names[e.origin_key]
        scheme, rest = e.origin_key.split("://", 1)
        hostname, port = rest.rsplit(":", 1)
        try:
            ipaddress.ip_address(hostname)
            origins.append({"name": oname})
            notes.append(f"origin {oname} was {e.origin_key} (an IP address, no host name): replayed as host {oname}")
            continue
        except ValueError:
            pass
        origins.append({"name": oname, "host": hostname})
        if int(port) != DEFAULT_PORTS[scheme]:
            notes.append(f"origin {oname} was {e.origin_key}: replayed as {hostname} on its server's standard port")
    pages: dict[str, dict] = {}
    for n, ref in enumerate(ordered, 1):
        entries = sorted(groups[ref], key=lambda e: e.start)
        pname = _page_name(entries[0].path, n, pages) if len(ordered) > 1 else name
        pages[pname] = _page(entries, origin_names, notes, pname if len(ordered) > 1 else "")
    doc: dict[str, Any] = {"name": name}
    creator = log.get("creator") if isinstance(log.get("creator"), dict) else {}
    browser = log.get("browser") if isinstance(log.get("browser"), dict) else {}
    doc["description"] = ("imported from a HAR saved by "
                          + " ".join(str(x) for x in (browser.get("name") or creator.get("name"),
                                                      browser.get("version") or creator.get("version")) if x)).strip()
    doc["origins"] = origins
    if len(pages) == 1:
        doc.update(next(iter(pages.values())))
    else:
        doc["pages"] = pages
        doc["session"] = {"pages": list(pages), "pool": "shared"}
    return HarImport(doc, notes)


def _entry(raw: Any, i: int) -> _Entry | None:
    if not isinstance(raw, dict):
        return None
    req, resp = raw.get("request"), raw.get("response")
    if not isinstance(req, dict) or not isinstance(resp, dict) or not isinstance(req.get("url"), str):
        return None
    parts = urlsplit(req["url"])
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    status = resp.get("status")
    if not isinstance(status, int) or status <= 0:
        return None
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    host = parts.hostname if port == DEFAULT_PORTS[parts.scheme] else f"{parts.hostname}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    path = re.sub(r"\s", lambda m: f"%{ord(m.group()):02X}", path)
    start = _time(raw.get("startedDateTime"), i)
    total = raw.get("time") if isinstance(raw.get("time"), (int, float)) and raw["time"] >= 0 else 0
    content = resp.get("content") if isinstance(resp.get("content"), dict) else {}
    body, decoded = resp.get("bodySize"), content.get("size")
    size = body if isinstance(body, int) and body > 0 else decoded if isinstance(decoded, int) and decoded > 0 else 0
    mime = str(content.get("mimeType") or "").split(";", 1)[0].strip().lower()
    kind = mime if MEDIA_TYPE.match(mime) else ""
    transfer = resp.get("_transferSize")
    if not isinstance(transfer, int) or transfer < 0:
        hs = resp.get("headersSize")
        transfer = hs + body if isinstance(hs, int) and hs >= 0 and isinstance(body, int) and body >= 0 else None
    conn = raw.get("connection")
    ip = raw.get("serverIPAddress")
    return _Entry(url=req["url"].split("#", 1)[0], origin_key=f"{parts.scheme}://{parts.hostname}:{port}",
                  host=host, path=path, start=start, end=start + total / 1000, size=size, type=kind,
                  initiator=raw.get("_initiator") if isinstance(raw.get("_initiator"), dict) else None,
                  connection=str(conn) if conn not in (None, "") else None,
                  server_ip=str(ip).strip("[]") if ip else None, transfer=transfer, cache=_cache(resp))


def _cache(resp: dict) -> str:
    """An object's `cache:` from its recorded response headers (RFC 9111): Cache-Control's
    no-store, no-cache or max-age (a private cache's: s-maxage is for shared ones); without a
    max-age, a validator (ETag, Last-Modified) makes it revalidated on every view (no-cache:
    browsers' heuristic freshness, 10 % of the time since Last-Modified, is not replayed), and
    nothing at all makes it no-store (nothing to keep it by)."""
    headers = {str(h.get("name", "")).lower(): str(h.get("value", "")) for h in resp.get("headers") or []
               if isinstance(h, dict)}
    directives = {}
    for part in headers.get("cache-control", "").split(","):
        name, _, arg = part.strip().partition("=")
        directives[name.lower()] = arg.strip().strip('"')
    if "no-store" in directives:
        return "no-store"
    if "no-cache" in directives:
        return "no-cache"
    if directives.get("max-age", "").isdigit():
        return f"max-age={int(directives['max-age'])}"
    return "no-cache" if ("etag" in headers or "last-modified" in headers) else "no-store"


def _time(text: Any, i: int) -> float:
    if not isinstance(text, str):
        raise HarError(f"entries[{i}] has no startedDateTime")
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise HarError(f"entries[{i}].startedDateTime '{text}' is not an ISO 8601 time") from None


def _page(entries: list[_Entry], names: dict[str, str], notes: list[str], label: str) -> dict[str, Any]:
    where = f"page {label}: " if label else ""
    kept: list[_Entry] = []
    seen: dict[tuple[str, str], int] = {}
    for e in entries:
        key = (e.origin_key, e.path)
        if key in seen:
            notes.append(f"{where}{e.url} fetched again; kept its first fetch")
            continue
        seen[key] = len(kept)
        kept.append(e)
    by_url: dict[str, int] = {}
    for i, e in enumerate(kept):
        by_url.setdefault(e.url, i)
    parents: list[int | None] = [None]
    from_initiator = [False]
    no_initiator = 0
    for i, e in enumerate(kept[1:], 1):
        url = _initiator_url(e.initiator)
        j = by_url.get(url) if url else None
        if e.initiator is None:
            no_initiator += 1
        if j is not None and j < i:
            parents.append(j)
            from_initiator.append(True)
        else:
            parents.append(0)
            from_initiator.append(False)
    if no_initiator:
        notes.append(f"{where}{no_initiator} of {len(kept) - 1} objects have no _initiator: they depend on the root "
                     "(chains the page had are lost, so its critical path may be shorter than the recording's)")
    compute = [0.0] * len(kept)
    for i, e in enumerate(kept):
        kids = [kept[k].start for k in range(len(kept)) if parents[k] == i and from_initiator[k]]
        if kids:
            compute[i] = max(0.0, round(min(kids) - e.end, 4))
    zero = [e.url for i, e in enumerate(kept) if e.size == 0 and (i == 0 or i in parents)]
    for url in zero:
        notes.append(f"{where}{url}: no body size in the HAR although others depend on it; set to 1 B")
    paths = {}
    for e in kept:
        paths.setdefault(e.path, set()).add(e.origin_key)
    objects = []
    for i, e in enumerate(kept):
        item: dict[str, Any] = {"path": e.path}
        item["origin"] = names[e.origin_key]   # always: pages of one file share its origins
        size = e.size if e.size > 0 or e.url not in zero else 1
        item["size"] = format_size(size)
        if e.type and e.type != guess_type(e.path, root=i == 0):
            item["type"] = e.type
        if parents[i] not in (None, 0):
            p = kept[parents[i]]  # type: ignore[index]
            item["depends_on"] = p.path if len(paths[p.path]) == 1 else f"{names[p.origin_key]}:{p.path}"
        if compute[i] > 0:
            item["compute"] = format_duration(compute[i])
        if e.cache != CACHE_DEFAULT:
            item["cache"] = cache_spelled(e.cache)
        objects.append(item)
    observed: dict[str, Any] = {"servers": len({e.server_ip or e.origin_key for e in kept})}
    conns = {e.connection for e in kept if e.connection}
    if conns:
        observed["connections"] = len(conns)
    transfers = [e.transfer for e in kept]
    if all(t is not None for t in transfers):
        observed["bytes"] = format_size(sum(transfers))  # type: ignore[arg-type]
    observed["source"] = "the HAR: connection ids, server addresses, transfer sizes"
    return {"objects": objects, "observed": observed}


def _initiator_url(init: dict | None) -> str | None:
    """The URL of the object that caused this request, per Chromium's `_initiator`."""
    if not init:
        return None
    stack = init.get("stack")
    while isinstance(stack, dict):
        for frame in stack.get("callFrames") or []:
            if isinstance(frame, dict) and frame.get("url"):
                return str(frame["url"]).split("#", 1)[0]
        stack = stack.get("parent")
    url = init.get("url")
    return str(url).split("#", 1)[0] if url else None


def _origin_names(entries: list[_Entry]) -> dict[str, str]:
    """scheme://host:port -> a name that can be a node's: see the module's docstring."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for e in sorted(entries, key=lambda e: e.start):
        if e.origin_key in names:
            continue
        scheme, rest = e.origin_key.split("://", 1)
        host, port = rest.rsplit(":", 1)
        try:
            ipaddress.ip_address(host.strip("[]"))
            stem = "ip" + re.sub(r"[^0-9a-f]", "", host.lower())
        except ValueError:
            labels = [x for x in host.lower().split(".") if x]
            if len(labels) > 1:
                labels = labels[:-1]
            if len(labels) > 1 and labels[0] == "www":
                labels = labels[1:]
            stem = re.sub(r"[^a-z0-9]", "", "".join(labels)) or "origin"
        if not stem[0].isalpha():
            stem = "o" + stem
        suffix = "" if int(port) == DEFAULT_PORTS[scheme] else port
        base = (stem[: 12 - len(suffix)] + suffix)[:12]
        name, n = base, 1
        while name in taken:
            n += 1
            name = base[: 12 - len(str(n))] + str(n)
        taken.add(name)
        names[e.origin_key] = name
    return names


def _page_name(path: str, n: int, pages: dict) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", path.split("?", 1)[0].strip("/").split("/")[-1]).strip("-.")
    name = stem if stem and stem not in pages and re.match(r"[A-Za-z0-9]", stem) else f"page{n}"
    return name[:64]
