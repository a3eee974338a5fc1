"""How a run ends when asked to: SIGINT (Ctrl-C), SIGTERM (kill, systemd, docker stop), SIGHUP
(the terminal closed: a closed window, a dropped SSH session, `tmux kill-session`) and SIGQUIT
all end it the way Ctrl-C does - `wearlab.errors.Interrupted` is raised in the main thread, the
run keeps its rows, removes everything it made (guest, namespaces, PM QoS setting, ledger) and
exits with status 130.

After a hang-up the terminal is gone and every write to it fails (EIO), which would break the
clean-up half-way: standard output and error are pointed at /dev/null first. Further signals
while the run cleans up are ignored - a second Ctrl-C must not leave half of the machine set up -
except inside `forceable()`, where waiting may be cut short (the guest's own graceful stop).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

from wearlab.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_state = {"interrupted": None, "forceable": False}


def _detach_from_terminal() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    for fd in (1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    os.close(devnull)


def _handler(signum: int, _frame) -> None:
    name = signal.Signals(signum).name
    if signum == signal.SIGHUP:
        _detach_from_terminal()
    if _state["interrupted"] is None:
        _state["interrupted"] = name
        raise Interrupted(name)
    if _state["forceable"]:
        raise Interrupted(name)
    # Already stopping: let the clean-up finish.


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within: the four signals raise Interrupted once (module doc); the previous handlers after."""
    old = {s: signal.signal(s, _handler) for s in SIGNALS}
    _state["interrupted"] = None
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def forceable() -> Iterator[None]:
    """A wait that a second signal may cut short."""
    before = _state["forceable"]
    _state["forceable"] = True
    try:
        yield
    finally:
        _state["forceable"] = before


def interrupted_by() -> str | None:
    """The signal that interrupted the run, if one did."""
    return _state["interrupted"]
