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

from wearlab.model.timeline import LinkChange, Timeline
from wearlab.realize.changelog import ChangeLog
from wearlab.realize.linkctl import LinkControl

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

    def halt(self) -> None:
        """No more of this run's changes (the links stay as they are until stop())."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def stop(self) -> list[str]:
        """Stop the timeline, put the links back; returns the errors of this run's changes."""
        self.halt()
        for applied in self.control.reset_all():
            self.log.add(applied, applied.change, "reset")
        self.log.t0_ns = None
        return self.errors
