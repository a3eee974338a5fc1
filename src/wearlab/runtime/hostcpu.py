"""The host CPU a UML guest runs on, and how fast that CPU wakes up.

A UML guest is one host process per guest process, traced by the guest kernel's own process:
every guest system call is a round trip between the two. Measured on a 2-vCPU Firecracker VM
(docs/fidelity.md):

- Unpinned, the two ends of that round trip sit on different CPUs and every system call costs
  ~100 us (cross-CPU wake-ups); pinned to one CPU it costs ~18 us. The guest kernel is
  uniprocessor, so pinning takes nothing away from it.
- Every netem delay ends with a host timer waking the guest. From a halted vCPU that takes
  ~150 us more than from a polling one. While a guest runs, its CPU is told to poll when idle
  (the per-CPU PM QoS resume latency `n/a`), which costs that CPU's idle power, not the other
  CPUs'.

Both are undone when the guest ends; the ledger remembers the CPU's previous setting so that
`wearlab clean` restores it after a `kill -9`, and two wearlab runs sharing a CPU restore it
only when the last one ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
from collections.abc import Iterator
from pathlib import Path

from wearlab.runtime import ledger

KIND = "pmqos"
_holder_ids = itertools.count()
POLL = "n/a"  # "no resume latency is acceptable": the cpuidle governor only polls


def guest_cpu() -> int | None:
    """The CPU to pin a guest to: the highest one we may use, or None when there is only one
    (or WEARLAB_GUEST_CPU=none)."""
    wanted = os.environ.get("WEARLAB_GUEST_CPU", "auto")
    if wanted == "none":
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if wanted != "auto":
        return int(wanted)
    return allowed[-1] if len(allowed) > 1 else None


def _qos_file(cpu: int) -> Path:
    return Path(f"/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us")


@contextlib.contextmanager
def _exclusive() -> Iterator[None]:
    """One wearlab process at a time reads, records, releases or restores a CPU's setting: else a
    run starting while another ends could read the ending run's poll setting as the machine's own
    and put it back for good."""
    ledger.LEDGER.mkdir(parents=True, exist_ok=True)
    with open(ledger.LEDGER / f".{KIND}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _holders(cpu: int) -> list[dict]:
    return [e for e in ledger.entries() if e.get("kind") == KIND and e.get("cpu") == cpu]


def _release(cpu: int, previous: str | None = None) -> str | None:
    """Drop dead holders' entries; if nobody holds the CPU any more, put back its setting from
    before wearlab (recorded by the first holder, else `previous`). Returns the value restored."""
    holders = _holders(cpu)
    live = [e for e in holders if ledger.owner_alive(e)]
    if holders:
        previous = holders[0]["previous"]
    for e in holders:
        if e not in live:
            Path(e["_file"]).unlink(missing_ok=True)
    if live or previous is None:
        return None
    try:
        _qos_file(cpu).write_text(previous)
    except OSError:
        return None
    return previous


def idle_mode() -> str:
    """`poll` (default) or `default` (leave the CPU's idle states alone): WEARLAB_HOST_IDLE."""
    return os.environ.get("WEARLAB_HOST_IDLE", "poll")


@contextlib.contextmanager
def low_latency_idle(cpu: int | None) -> Iterator[str]:
    """While inside, `cpu` polls instead of halting when idle. Yields what was done, for the
    run's metadata."""
    f = None if cpu is None else _qos_file(cpu)
    if cpu is None or idle_mode() != "poll" or f is None or not f.exists() or os.geteuid() != 0:
        yield "unchanged"
        return
    ident = f"cpu{cpu}-{os.getpid()}-{next(_holder_ids)}"
    try:
        with _exclusive():
            earlier = _holders(cpu)
            previous = earlier[0]["previous"] if earlier else f.read_text().strip()
            ledger.record(KIND, ident, cpu=cpu, previous=previous)
            f.write_text(POLL)
    except OSError as e:
        ledger.forget(KIND, ident)
        yield f"unchanged ({e.strerror or e})"
        return
    try:
        yield f"cpu{cpu} polls when idle (pm_qos_resume_latency_us {previous} -> {POLL})"
    finally:
        with _exclusive():
            ledger.forget(KIND, ident)
            _release(cpu, previous)


def clean() -> list[str]:
    """For `wearlab clean`: restore every CPU whose holders are all gone."""
    done = []
    for cpu in sorted({e["cpu"] for e in ledger.entries() if e.get("kind") == KIND}):
        with _exclusive():
            previous = _release(cpu)
        if previous is not None:
            done.append(f"cpu{cpu} idle setting restored ({previous})")
    return done
