"""Parent of a linux.uml process: makes sure no part of the guest outlives wearlab.

linux.uml puts itself in its own process group and forks helper processes that survive its
main process, so a parent-death signal on linux.uml alone leaves pieces behind. This watchdog
is started with PR_SET_PDEATHSIG=SIGTERM by wearlab; it becomes a child subreaper (so orphaned
guest helpers are reparented to it and reaped, not left as zombies), runs the guest, and on
SIGTERM/SIGINT/SIGHUP kills the guest's whole process group before exiting.

Usage: python -m wearlab.runtime.watchdog linux.uml ARGS...
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_CHILD_SUBREAPER = 36
PR_SET_TIMERSLACK = 29


def _reap_all() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    # The guest's clock events are host timers: no slack (the default 50 us would delay them).
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    guest = subprocess.Popen(argv)

    def kill_guest(signum, _frame):
        for target in (lambda: os.killpg(guest.pid, signal.SIGKILL), lambda: guest.kill()):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        _reap_all()
        os._exit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, kill_guest)
    rc = guest.wait()
    # The guest powered off; make sure its helpers are gone too, then reap them.
    try:
        os.killpg(guest.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _reap_all()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
