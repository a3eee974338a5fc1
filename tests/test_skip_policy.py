"""CI fails on hidden skips (tests/skip_policy.py): pytest run on a tiny test file, in a
subprocess, with the netem probe broken on purpose. With CI=true a skipped netem/guest/compose
test fails the run naming the test and its reason; without CI it only skips; the one accepted skip
(Grafana's image absent) passes; every run prints what it collected, ran and skipped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from skip_policy import ALLOWED_SKIPS, BREAK_NETEM_PROBE
from wearlab.runtime import uml

TINY = '''
import pytest

@pytest.mark.netem
def test_delay_becomes_netem():
    pass

def test_parses_yaml():
    pass
'''


def run_pytest(tmp_path, files: dict[str, str], *, ci: bool, broken: bool = True, args=()) -> tuple[int, str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  netem: x\n  guest: x\n  compose: x\n  root: x\n")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", BREAK_NETEM_PROBE, "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT / "tests")
    if ci:
        env["CI"] = "true"
    if broken:
        env[BREAK_NETEM_PROBE] = "1"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "skip_policy", "-p", "no:cacheprovider", "-q",
                        *args, *files], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def _reason() -> str:
    return "broken on purpose" if os.geteuid() == 0 else "needs root"


def test_in_ci_a_skipped_netem_test_fails_the_run_naming_it_and_why(tmp_path):
    rc, out = run_pytest(tmp_path, {"test_tiny.py": TINY}, ci=True)
    assert rc != 0, out
    assert "CI: 1 test(s) marked netem" in out, out
    assert "test_tiny.py::test_delay_becomes_netem: " in out and _reason() in out, out
    assert "wearlab: collected 2, selected 2, ran 1, skipped 1" in out, out


def test_outside_ci_it_only_skips(tmp_path):
    rc, out = run_pytest(tmp_path, {"test_tiny.py": TINY}, ci=False)
    assert rc == 0, out
    assert "wearlab: collected 2, selected 2, ran 1, skipped 1" in out, out
    assert "skipped 1: " in out and _reason() in out and "CI:" not in out, out


def test_deselected_tests_are_counted_apart(tmp_path):
    rc, out = run_pytest(tmp_path, {"test_tiny.py": TINY}, ci=True, args=("-m", "not netem"))
    assert rc == 0, out
    assert "wearlab: collected 2, selected 1, ran 1, skipped 0" in out, out


GRAFANA = f'''
import pytest

@pytest.mark.compose
def test_grafana_serves_the_provisioned_dashboards():
    pytest.skip("{ALLOWED_SKIPS["test_compose.py::test_grafana_serves_the_provisioned_dashboards"]} grafana/grafana:x is not here")

@pytest.mark.compose
def test_container_server_answers_over_shaped_links():
    pytest.skip("needs Docker's daemon")
'''


def test_in_ci_only_the_listed_skip_passes(tmp_path):
    rc, out = run_pytest(tmp_path, {"test_compose.py": GRAFANA}, ci=True, broken=False)
    assert rc != 0, out
    assert "CI: 1 test(s)" in out and "test_container_server_answers_over_shaped_links: needs Docker's daemon" in out, out
    assert "test_grafana_serves_the_provisioned_dashboards:" not in out.split("CI:", 1)[1], out


def test_in_ci_an_unmarked_skip_is_the_host_steps_business(tmp_path):
    rc, out = run_pytest(tmp_path, {"test_host.py": "import pytest\n\ndef test_x():\n    pytest.skip('this kernel has netem')\n"},
                         ci=True, broken=False)
    assert rc == 0, out
    assert "skipped 1: this kernel has netem" in out, out


def test_ci_reaches_the_guest_step():
    """`make test`'s second step runs in the guest: CI must be passed in (and the probe's breaker,
    a WEARLAB_ variable), and the CI script sets CI itself."""
    assert "CI" in uml.PASS_ENV and BREAK_NETEM_PROBE.startswith(uml.PASS_ENV_PREFIXES)
    assert "export CI=" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.parametrize("name", sorted(ALLOWED_SKIPS))
def test_the_allowed_skips_exist(name):
    path, func = name.split("::")
    assert f"def {func}(" in (ROOT / "tests" / path).read_text(), f"ALLOWED_SKIPS names {name}, which is gone"
