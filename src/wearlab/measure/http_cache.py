"""A browser's HTTP cache, as the page agent keeps it between a first view and a repeat view
(RFC 9111, the part a page load meets): what a response lets the client store, and what the
client does when it needs the object again.

- A 200 response is stored unless its Cache-Control says `no-store` (5.2.2.5). Its freshness
  lifetime is its `max-age` (4.2.1); `no-cache` (5.2.2.4), or no max-age at all, makes it stale
  at once. No heuristic freshness (4.2.2): it needs a Last-Modified, which wearlab's servers do
  not send, and the page file states every object's caching anyway.
- Needed again: fresh (its age, the time since the response arrived, below its lifetime) -> no
  request at all; stale with a validator (its ETag) -> a conditional request (If-None-Match,
  RFC 9110 13.1.2), which a 304 answers without the body: the stored body is used and the entry
  freshened with the 304's headers (RFC 9111 4.3.4); stale without a validator, or not stored ->
  the object is fetched again.

Age is this process's monotonic clock; no Age or Date header corrections (the client and the
servers share no clock that matters here: the responses come from the emulated network's
servers, at once). Keyed by URL (one page's requests carry no Vary-relevant headers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What the client does with an object it needs (lookup's answer).
FRESH, REVALIDATE, FETCH = "fresh", "revalidate", "fetch"
Action = Literal["fresh", "revalidate", "fetch"]


def cache_directives(value: str | None) -> dict[str, str | None]:
    """Cache-Control's directives, names lowercased (RFC 9111 5.2): {"max-age": "60", "no-store": None}."""
    out: dict[str, str | None] = {}
    for part in (value or "").split(","):
        name, eq, arg = part.strip().partition("=")
        if name:
            out[name.lower()] = arg.strip().strip('"') if eq else None
    return out


def freshness_s(cache_control: str | None) -> float | None:
    """A response's freshness lifetime in seconds; None when it may not be stored (no-store)."""
    d = cache_directives(cache_control)
    if "no-store" in d:
        return None
    if "no-cache" in d:
        return 0.0
    try:
        return max(0.0, float(d.get("max-age") or 0))
    except ValueError:
        return 0.0   # an invalid max-age makes a response stale (RFC 9111 4.2.1)


@dataclass
class Entry:
    size: int
    etag: str | None
    lifetime_s: float
    stored_at: float


class HttpCache:
    """One client's cache (a browser profile's): entries by URL."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def lookup(self, url: str, now: float) -> tuple[Action, Entry | None]:
        e = self.entries.get(url)
        if e is None:
            return FETCH, None
        if now - e.stored_at < e.lifetime_s:
            return FRESH, e
        if e.etag:
            return REVALIDATE, e
        return FETCH, e

    def store(self, url: str, status: int, headers: dict[str, str], size: int, now: float) -> None:
        """Keep (or forget) what a response says. `headers`: names lowercased."""
        lifetime = freshness_s(headers.get("cache-control"))
        if status == 304:
            e = self.entries.get(url)
            if e is not None:   # freshened: new lifetime and time, the stored body kept (4.3.4)
                e.stored_at, e.etag = now, headers.get("etag", e.etag)
                e.lifetime_s = lifetime if lifetime is not None else e.lifetime_s
            return
        if status != 200 or lifetime is None:
            self.entries.pop(url, None)
            return
        self.entries[url] = Entry(size, headers.get("etag"), lifetime, now)
