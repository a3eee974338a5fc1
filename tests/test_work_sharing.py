"""tests/work_sharing.py: two pytest workers on one claims directory run every test exactly once,
each module wholly in one worker, a SOLO module only after both are done with the others, and
each counts only its own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULES, TESTS = 6, 3


def test_two_workers_split_the_suite_by_module(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    log = tmp_path / "ran.log"
    names = [f"test_m{m}.py" for m in range(MODULES - 1)] + ["test_page_load.py"]   # the last: SOLO
    for m in range(MODULES):
        body = ["import os", "import pytest", "",
                "@pytest.fixture(scope='module')",
                "def once():",
                f"    with open({str(log)!r}, 'a') as f: f.write(f'setup m{m} {{os.getpid()}}\\n')", ""]
        for t in range(TESTS):
            body += [f"def test_{t}(once):",
                     f"    with open({str(log)!r}, 'a') as f: f.write(f'test m{m}::{t} {{os.getpid()}}\\n')", ""]
        (suite / names[m]).write_text("\n".join(body))
    claims = tmp_path / "claims"
    claims.mkdir()
    env = {**os.environ, "WEARLAB_TEST_CLAIMS": str(claims), "PYTHONPATH": str(HERE)}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "work_sharing", "-p", "no:cacheprovider",
            "--rootdir", str(suite), str(suite)]
    workers = [subprocess.Popen(argv, cwd=suite, env={**env, "WEARLAB_TEST_WORKER": f"{i}/2"},
                                stdout=subprocess.PIPE, text=True) for i in (1, 2)]
    outs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outs
    lines = [ln.split() for ln in log.read_text().splitlines()]
    tests = [(what, pid) for kind, what, pid in lines if kind == "test"]
    assert sorted(w for w, _ in tests) == sorted(f"m{m}::{t}" for m in range(MODULES) for t in range(TESTS))
    setups = [(what, pid) for kind, what, pid in lines if kind == "setup"]
    assert sorted(w for w, _ in setups) == [f"m{m}" for m in range(MODULES)]   # each module's fixture once
    owner = dict(setups)
    assert all(pid == owner[w.split("::")[0]] for w, pid in tests)             # a module in one worker
    # The SOLO module last: after every other module's last test, on either worker.
    last = max(i for i, (kind, what, _) in enumerate(lines) if kind == "test" and not what.startswith(f"m{MODULES - 1}:"))
    assert all(i > last for i, (kind, what, _) in enumerate(lines) if what.startswith(f"m{MODULES - 1}"))
    assert sorted((claims).iterdir()) == sorted([claims / "_solo", claims / "finished-1", claims / "finished-2",
                                                  *(claims / n for n in names[:-1])])
    # Each worker counts its own tests as passed and the other's as deselected: together the suite.
    passed = [int(o.split(" passed")[0].split()[-1]) if " passed" in o else 0 for o in outs]
    assert sum(passed) == MODULES * TESTS, outs
    assert all(f"{MODULES * TESTS - p} deselected" in o for p, o in zip(passed, outs) if 0 < p < MODULES * TESTS), outs
