"""Playing a cell's timeline during each run, and logging every link change with its real time.

The player is a thread started just before the workload's run and stopped after it: it sleeps
until each change's time (from the run's start), applies it in place (realize.linkctl) and logs
when the kernel had it. Between runs every link goes back to the topology's shaping, so each
repetition starts from the same state. Live changes (`wearlab link set ...`) go through the same
LinkControl and the same log, marked `live`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from wearlab.model.timeline import LinkChange, Timeline
from wearlab.realize.linkctl import Applied, LinkControl

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


class TimelinePlayer:
    def __init__(self, control: LinkControl, log: ChangeLog):
        self.control, self.log = control, log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def start(self, timeline: Timeline, horizon_s: float, t0_ns: int) -> None:
        """Play `timeline` from `t0_ns` (time.time_ns of the run's start)."""
        self.log.t0_ns = t0_ns
        self._stop.clear()
        self.errors = []
        schedule = timeline.schedule(horizon_s)
        self.control.prepare(schedule)
        if schedule:
            mono0 = time.monotonic_ns() - (time.time_ns() - t0_ns)
            self._thread = threading.Thread(target=self._play, args=(schedule, mono0),
                                            name="timeline", daemon=True)
            self._thread.start()

    def _play(self, schedule: list[LinkChange], t0_ns: int) -> None:
        for change in schedule:
            due = t0_ns + int(change.at_s * 1e9)
            # Sleep to the due time (timer slack is 1 ns in the guest; ~0.1 ms wake-up error).
            while (left := due - time.monotonic_ns()) > 0:
                if self._stop.wait(left / 1e9):
                    return
            if self._stop.is_set():
                return
            try:
                applied = self.control.apply(change)
                self.log.add(applied, change, "timeline", scheduled_s=change.at_s)
            except Exception as e:  # noqa: BLE001 - recorded; the run is marked failed
                self.errors.append(str(e))
                self.log.add(None, change, "timeline", scheduled_s=change.at_s, error=str(e))

    def stop(self) -> list[str]:
        """Stop the timeline, put the links back; returns the errors of this run's changes."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for applied in self.control.reset_all():
            self.log.add(applied, applied.change, "reset")
        self.log.t0_ns = None
        return self.errors
