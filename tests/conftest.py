"""Shared fixtures. Tests marked `netem` need a kernel with sch_netem: `make test` runs them
inside the runtime that has it (`wearlab exec`, a UML guest on kernels without netem)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEARLAB = [sys.executable, "-m", "wearlab"]


def pytest_collection_modifyitems(config, items):
    from wearlab.runtime import probe

    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root")
        for item in items:
            if "netem" in item.keywords or "root" in item.keywords:
                item.add_marker(skip)
        return
    if any("netem" in i.keywords for i in items) and not probe.netem_works():
        skip = pytest.mark.skip(reason="this kernel lacks sch_netem: run via `wearlab exec -- pytest -m netem`")
        for item in items:
            if "netem" in item.keywords:
                item.add_marker(skip)


def wearlab(*args: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([*WEARLAB, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=kw.pop("cwd", ROOT), **kw)


@pytest.fixture
def write_yaml(tmp_path):
    def _write(name: str, text: str) -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return _write
