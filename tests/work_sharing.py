"""Two pytest processes sharing one suite, module by module, as each becomes free: a pytest plugin
(tests/conftest.py takes its hooks).

`make test`'s guest step runs its tests in two UML guests side by side (the machine has 2 cores;
a guest is one process that mostly waits on its links' timers). Both collect the whole suite and
walk its modules in the same order; before a module, a worker claims it by making a directory
named after it under WEARLAB_TEST_CLAIMS (a host directory both guests see: mkdir is atomic on the
host, so exactly one worker wins each module) and runs it, or leaves it to the worker that did.
Whole modules, because their fixtures (a guest network set up once per module) are the slow part;
claimed as each worker frees up, so no table of durations goes stale. A worker reports the other's
tests as deselected, so its summary counts only what it ran; the step fails when either fails.

SOLO modules time the emulated device's CPU (a cgroup's share of one host core) against a paper's
tables within 1-5 %, or a page's load against its physics: beside a second guest they measured
1-3 % slow (a run of both side by side, 2026-11-26). They run last, one worker alone: the first
worker done with the shared modules claims them, waits until every worker is done
(WEARLAB_TEST_WORKER=I/N: each marks `finished-I`, as does the Makefile when a worker exits, so a
crashed worker never leaves the other waiting), then runs them.

Without WEARLAB_TEST_CLAIMS, pytest runs every test as usual.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

CLAIMS = "WEARLAB_TEST_CLAIMS"
WORKER = "WEARLAB_TEST_WORKER"
SOLO = frozenset({     # module file names
    "test_crypto_ops.py", "test_device_workloads.py", "test_devicecpu.py", "test_devicecpu_node.py",
    "test_page_load.py",
})
WAIT_S = 3600       # for the other workers' shared modules, at most (the guest step's own bound)


def _claim(claims: Path, module: str) -> bool:
    try:
        os.mkdir(claims / re.sub(r"[^A-Za-z0-9_.-]", "_", module))
    except FileExistsError:
        return False
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    claims = os.environ.get(CLAIMS)
    if not claims or session.config.option.collectonly or session.testsfailed:
        return None   # pytest's own loop (and its handling of collection errors)
    claims_dir = Path(claims)
    if not claims_dir.is_dir():
        raise pytest.UsageError(f"{CLAIMS}={claims}: no such directory (make it before the workers start)")
    modules: dict[str, list[pytest.Item]] = {}
    for item in session.items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    shared = iter([(m, items) for m, items in modules.items() if Path(m).name not in SOLO])

    def next_mine() -> list[pytest.Item] | None:
        for module, items in shared:
            if _claim(claims_dir, module):
                return items
        return None

    ran: list[pytest.Item] = []
    current = next_mine()
    while current:
        following = None
        for j, item in enumerate(current):
            if j + 1 < len(current):
                nextitem = current[j + 1]
            else:
                # Claim the next module before the last test here ends, so pytest knows what comes
                # next and keeps the session's fixtures up across the gap.
                following = next_mine()
                nextitem = following[0] if following else None
            _run(session, item, nextitem)
            ran.append(item)
        current = following
    solo = [i for m, items in modules.items() if Path(m).name in SOLO for i in items]
    index, workers = _worker()
    (claims_dir / f"finished-{index}").touch()
    if solo and _claim(claims_dir, "@solo"):
        _wait_for_workers(claims_dir, workers)
        for j, item in enumerate(solo):
            _run(session, item, solo[j + 1] if j + 1 < len(solo) else None)
            ran.append(item)
    mine = {id(i) for i in ran}
    others = [i for i in session.items if id(i) not in mine]
    session.items[:] = ran
    if others:
        session.config.hook.pytest_deselected(items=others)
    return True


def _run(session, item, nextitem) -> None:
    item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
    if session.shouldfail:
        raise session.Failed(session.shouldfail)
    if session.shouldstop:
        raise session.Interrupted(session.shouldstop)


def _worker() -> tuple[int, int]:
    spec = os.environ.get(WORKER, "1/1")
    try:
        index, workers = (int(x) for x in spec.split("/"))
    except ValueError:
        raise pytest.UsageError(f"{WORKER}={spec}: give I/N, e.g. 1/2") from None
    return index, workers


def _wait_for_workers(claims: Path, workers: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(list(claims.glob("finished-*"))) < workers:
        if time.monotonic() > deadline:
            raise pytest.UsageError(f"the other workers did not finish their modules in {WAIT_S} s")
        time.sleep(0.5)   # waiting for a condition (the other guest's files), not for ordering
