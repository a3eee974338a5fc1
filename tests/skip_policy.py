"""Which tests skip where, and which skips CI accepts: a pytest plugin (tests/conftest.py takes its
hooks; tests/test_skip_policy.py loads it with `-p skip_policy`).

Tests marked `netem` need root and a kernel with sch_netem, `root` needs root: elsewhere they skip,
which is what `make test`'s host step wants (the netem tests run in its second step, inside the
runtime that has netem). But a probe that misfires in the guest would turn the whole guest suite
into skips and leave `make test` green. So in CI (`CI=true`: CI services set it, and so does
.ci/run) a skipped test marked netem, guest, compose or shipped fails the run, naming the test and
its reason, unless ALLOWED_SKIPS names it. Every run prints what it collected, ran and skipped
("wearlab: collected N, selected S, ran R, skipped K"), and in CI a selected test that neither ran
nor skipped fails the run too.

WEARLAB_TEST_BREAK_NETEM_PROBE=1 breaks the netem probe on purpose (it reaches the guest like every
WEARLAB_ variable): `WEARLAB_TEST_BREAK_NETEM_PROBE=1 CI=true make test` must fail at the guest step.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

CHECKED_MARKS = ("netem", "guest", "compose", "shipped")   # what the CI steps after the host step are for
# The skips CI accepts: test (file::function, any parameters) -> how its reason starts.
ALLOWED_SKIPS = {
    # Grafana's image absent: tests never pull, and its provisioning and dashboards are checked without it.
    "test_compose.py::test_grafana_serves_the_provisioned_dashboards": "Grafana container skipped: its image",
}
# And one rule: a `guest` test outside a guest on a host whose kernel has netem - there `make test`'s
# second step runs on the host (`wearlab runtime-exec` picks it) and no guest is built.
BREAK_NETEM_PROBE = "WEARLAB_TEST_BREAK_NETEM_PROBE"
SHOWN = 40                  # refused skips named one by one; the rest counted

_results: dict[str, tuple[str, str, tuple[str, ...]]] = {}   # nodeid -> (ran/skipped/error, reason, marks)
_summary: list[str] = []
_deselected: list[int] = [0]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def netem_works() -> bool:
    """The netem probe as the tests see it (broken on purpose by WEARLAB_TEST_BREAK_NETEM_PROBE=1)."""
    if os.environ.get(BREAK_NETEM_PROBE) == "1":
        return False
    from wearlab.runtime import probe
    return probe.netem_works()


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root")
        for item in items:
            if "netem" in item.keywords or "root" in item.keywords:
                item.add_marker(skip)
        return
    if any("netem" in i.keywords for i in items) and not netem_works():
        why = "the netem probe was broken on purpose (WEARLAB_TEST_BREAK_NETEM_PROBE=1)" \
            if os.environ.get(BREAK_NETEM_PROBE) == "1" else "this kernel lacks sch_netem"
        skip = pytest.mark.skip(reason=f"{why}: run via `wearlab runtime-exec -- pytest -m netem`")
        for item in items:
            if "netem" in item.keywords:
                item.add_marker(skip)


def pytest_sessionstart(session):
    _results.clear()
    _summary.clear()
    _deselected[0] = 0


def pytest_deselected(items):
    _deselected[0] += len(items)


def pytest_runtest_logreport(report):
    marks = tuple(m for m in CHECKED_MARKS if m in report.keywords)
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _results[report.nodeid] = ("skipped", reason.removeprefix("Skipped: "), marks)
    elif report.when == "call":
        _results[report.nodeid] = ("ran", "", marks)
    elif report.when == "setup" and report.failed:
        _results[report.nodeid] = ("error", "", marks)


def _allowed(nodeid: str, reason: str, marks: tuple[str, ...]) -> bool:
    name = nodeid.rsplit("/", 1)[-1].split("[", 1)[0]
    if name in ALLOWED_SKIPS and reason.startswith(ALLOWED_SKIPS[name]):
        return True
    if "guest" in marks and "netem" not in marks:
        from wearlab.runtime import probe
        return not probe.in_uml_guest() and probe.netem_works()
    return False


def pytest_sessionfinish(session, exitstatus):
    results = _results
    selected = len(getattr(session, "items", ()))
    collected = selected + _deselected[0]
    state = Counter(s for s, _, _ in results.values())
    not_run = selected - sum(state.values())
    line = f"wearlab: collected {collected}, selected {selected}, ran {state['ran']}, skipped {state['skipped']}"
    if state["error"]:
        line += f", errors in set-up {state['error']}"
    if not_run:
        line += f", neither ran nor skipped {not_run}"
    lines = [line]
    reasons = Counter(r for s, r, _ in results.values() if s == "skipped")
    lines += [f"  skipped {n}: {r}" for r, n in reasons.most_common()]
    if in_ci():
        hidden = sorted((nodeid, r) for nodeid, (s, r, marks) in results.items()
                        if s == "skipped" and marks and not _allowed(nodeid, r, marks))
        problems = []
        if hidden:
            problems.append(f"CI: {len(hidden)} test(s) marked {'/'.join(CHECKED_MARKS)} skipped; in CI they must "
                            "run (the skips CI accepts are tests/skip_policy.py's ALLOWED_SKIPS):")
            problems += [f"  {nodeid}: {r}" for nodeid, r in hidden[:SHOWN]]
            if len(hidden) > SHOWN:
                problems.append(f"  ... and {len(hidden) - SHOWN} more (every reason is counted above)")
        if not_run and not session.shouldfail and not session.shouldstop:
            problems.append(f"CI: {not_run} of the {selected} selected tests neither ran nor skipped")
        if problems:
            lines += problems
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _summary[:] = lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in _summary:
        terminalreporter.write_line(line, red=line.startswith("CI:"), bold=line.startswith("CI:"))
