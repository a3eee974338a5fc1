"""Shared fixtures. Tests marked `netem` need a kernel with sch_netem: `make test` runs them
inside the runtime that has it (`wearlab runtime-exec`, a UML guest on kernels without netem).
Which tests skip where, and the skips CI refuses (CI=true), are tests/skip_policy.py's."""

from __future__ import annotations

import csv

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

# The skip policy's hooks (a plugin module, so tests/test_skip_policy.py can load it on its own).
from skip_policy import (  # noqa: F401
    pytest_collection_modifyitems,
    pytest_deselected,
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
)
# Two workers sharing the guest step module by module (WEARLAB_TEST_CLAIMS; tests/work_sharing.py).
from work_sharing import pytest_runtestloop  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
WEARLAB = [sys.executable, "-m", "wearlab"]


def wearlab(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*WEARLAB, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=kw.pop("cwd", ROOT), **kw)


def run_rows(experiment: Path, out: Path, name: str, timeout: float = 400, all_ok: bool = True):
    """`wearlab run EXPERIMENT --out OUT`: its results directory (OUT/NAME/latest) and runs.csv's
    rows, every run `ok` unless all_ok is False."""
    res = wearlab("run", str(experiment), "--out", str(out), timeout=timeout)
    assert res.returncode == 0, res.stdout + res.stderr
    latest = out / name / "latest"
    with (latest / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    if all_ok:
        assert rows and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    return latest, rows


@pytest.fixture
def write_yaml(tmp_path):
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return _write


def need_tool(name: str) -> str:
    """The path of a program a test uses. Missing, the test fails naming it - never skips, never
    asserts on an empty output: `make test` installs every program its tests use (Makefile
    APT_PACKAGES on the host, images/uml/build-rootfs.sh in the guest; tests/test_setup_tools.py
    audits both)."""
    path = shutil.which(name)
    if path is None:
        where = "the guest's root filesystem (images/uml/build-rootfs.sh)" if os.environ.get("WEARLAB_IN_GUEST") \
            else "the host (Makefile APT_PACKAGES)"
        pytest.fail(f"{name} is not installed in {where}: `make test` installs it; a machine set up by hand "
                    "is missing it", pytrace=False)
    return path


def package_list() -> list[tuple[str, set[str], list[str]]]:
    """images/packages.txt, the one list: (package, where it goes, the programs it provides) per
    line. A line is `package place... [programs=a,b]`; the installers (the Makefile, build-rootfs.sh,
    the testbed's Dockerfile) read only the places."""
    out = []
    for line in (ROOT / "images" / "packages.txt").read_text().splitlines():
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        places = {f for f in fields[1:] if "=" not in f}
        programs = [p for f in fields[1:] if f.startswith("programs=") for p in f.split("=", 1)[1].split(",") if p]
        out.append((fields[0], places, programs))
    return out


def packages(where: str) -> set[str]:
    """The Debian packages images/packages.txt (the one list) installs in `where`: host, guest,
    testbed, kernel, rust or docker (or `required`: Debian's required set, installed by nobody)."""
    return {name for name, places, _ in package_list() if where in places}


def programs() -> dict[str, tuple[str, set[str]]]:
    """program -> (its Debian package, where that package goes), from images/packages.txt's
    `programs=` fields."""
    return {prog: (name, places) for name, places, progs in package_list() for prog in progs}


# wearlab's accuracy goal for every timing it reports, max(0.3 ms, 2 %), is a quiet machine's:
# the benchmarks (bench/bench_link.py, bench_connect.py, ...) hold it there and fail when it is
# missed. Tests must also pass beside a busy CPU (`make test` next to `stress-ng --cpu 1`): there
# the median one-way delay of a 20 ms link measured 1.8-4.2 ms high on this 2-vCPU VM, whether the
# hog shared the guest's CPU or not (and a guest niced to -10 did no better), so tests allow the
# goal plus BUSY_SLACK_S. Their lower bounds stay the physics: nothing arrives early.
BUSY_SLACK_S = 0.005


def timing_goal(seconds: float) -> float:
    """The quiet-machine goal: max(0.3 ms, 2 %)."""
    return max(0.0003, 0.02 * seconds)


def timing_bound(seconds: float) -> float:
    """What a test allows above the physics: the goal plus a busy machine's scheduling slack."""
    return timing_goal(seconds) + BUSY_SLACK_S


def yaml_load(text):
    """YAML as plain data (ruamel, wearlab's own YAML library: PyYAML is on the host only, and
    the guest step collects every test module)."""
    return YAML(typ="safe", pure=True).load(text)


def yaml_dump(data, sort_keys=True, allow_unicode=True) -> str:
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.allow_unicode = allow_unicode
    if sort_keys and isinstance(data, dict):
        data = dict(sorted(data.items()))
    buf = io.StringIO()
    y.dump(data, buf)
    return buf.getvalue()
