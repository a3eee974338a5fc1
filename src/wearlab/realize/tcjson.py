"""`tc -s -j qdisc show` read as data: the qdiscs of an interface or node with their handles,
options and counters (bytes, packets, drops, overlimits, backlog, qlen). One parser for the
snapshots in metadata, the tests and the benchmarks - no scraping of tc's text output."""

from __future__ import annotations

import json
from typing import Any


def parse(text: str) -> list[dict[str, Any]]:
    """tc's JSON (a node's shell may add carriage returns; no qdiscs prints nothing). Text that is
    not JSON comes back as one `unparsed` entry, so a snapshot never fails a run."""
    text = text.replace("\r", "").strip()
    try:
        return json.loads(text or "[]")
    except json.JSONDecodeError:
        return [{"unparsed": text}]


def root(qdiscs: list[dict[str, Any]], dev: str | None = None) -> dict[str, Any]:
    """The root qdisc (of `dev`, when the listing covers several interfaces)."""
    for q in qdiscs:
        if q.get("root") and (dev is None or q.get("dev") == dev):
            return q
    raise ValueError(f"no root qdisc{f' on {dev}' if dev else ''} in {qdiscs}")


def counters(q: dict[str, Any]) -> tuple[int, int, int]:
    """(bytes, packets, drops) a qdisc has passed and dropped."""
    return int(q.get("bytes", 0)), int(q.get("packets", 0)), int(q.get("drops", 0))


def drops(qdiscs: list[dict[str, Any]]) -> int:
    """Packets dropped by all the listed qdiscs together."""
    return sum(int(q.get("drops", 0)) for q in qdiscs)
