"""Every change of a link with its real time: the rows of series/timeline.csv, whoever made the
change - the timeline player, live control (`wearlab link ...`), a wearable's handover - and the
totals the exporter shows."""

from __future__ import annotations

import threading
import time
from typing import Any

from wearlab.model.timeline import LinkChange
from wearlab.realize.linkctl import Applied

COLUMNS = ("t_s", "t_ns", "scheduled_s", "late_ms", "apply_ms", "source", "link", "change", "origin", "error")


class ChangeLog:
    """Rows of series/timeline.csv for the run in progress (and changes between runs)."""

    def __init__(self):
        self.rows: list[dict[str, Any]] = []
        self.t0_ns: int | None = None       # the run's start (time.time_ns: the series' origin too)
        self.lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}    # (link, source) -> changes so far (exporter)
        self.last_ns: dict[str, int] = {}                # link -> time of its last change

    def add(self, applied: Applied | None, change: LinkChange, source: str, *, scheduled_s: float | None = None,
            error: str = "") -> None:
        t_ns = applied.t_ns if applied else time.time_ns()
        t_s = (t_ns - self.t0_ns) / 1e9 if self.t0_ns is not None else None
        with self.lock:
            link = "-".join(change.link)
            self.counts[(link, source)] = self.counts.get((link, source), 0) + 1
            self.last_ns[link] = t_ns
            self.rows.append({
                "t_s": t_s, "t_ns": t_ns,
                "scheduled_s": scheduled_s,
                "late_ms": (t_s - scheduled_s) * 1e3 if scheduled_s is not None and t_s is not None else None,
                "apply_ms": applied.apply_ms if applied else None, "source": source,
                "link": "-".join(change.link), "change": change.describe(), "origin": change.origin,
                "error": error})

    def note(self, link: str, change: str, origin: str, source: str = "live") -> None:
        """A live action that is not a link change (wearlab radio, wearlab handover)."""
        t_ns = time.time_ns()
        with self.lock:
            self.rows.append({"t_s": (t_ns - self.t0_ns) / 1e9 if self.t0_ns is not None else None, "t_ns": t_ns,
                              "scheduled_s": None, "late_ms": None, "apply_ms": None, "source": source,
                              "link": link, "change": change, "origin": origin, "error": ""})

    def totals(self) -> dict[str, Any]:
        with self.lock:
            return {"changes": [{"link": l, "source": s, "count": n} for (l, s), n in self.counts.items()],
                    "last_change_ns": dict(self.last_ns)}

    def take(self) -> list[dict[str, Any]]:
        with self.lock:
            rows, self.rows = self.rows, []
        return rows
