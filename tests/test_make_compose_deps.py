"""The Makefile's Compose targets install Docker themselves (issue 19, item 8).

On a fresh machine `make up` must bring the stack up with no step before it: `up`, `images`,
`experiment-compose`, `test-compose` (and `test-experiments`, whose container-server experiment
needs the images) depend, directly or through another target, on the apt-docker stamp, whose recipe
installs Debian's docker.io and docker-compose. Make itself answers: its database (`make -p -q`, no
recipe runs) for the prerequisites, `make -n` for what the recipes would do. No Docker needed, and
nothing is installed or pulled.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAMP = "build/stamps/apt-docker"
NEEDS_DOCKER = ("up", "images", "experiment-compose", "test-compose", "test-experiments")
PROBE = "__wearlab_deps_probe__"


def make(*args: str) -> str:
    exe = shutil.which("make")
    if exe is None:
        pytest.fail("make is not installed: `make setup` installs it (images/packages.txt)")
    r = subprocess.run([exe, "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                       timeout=60, check=False)
    assert r.returncode == 0, f"make {' '.join(args)} failed (exit {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def prerequisites(tmp_path_factory) -> dict[str, list[str]]:
    """target -> its prerequisites (normal and order-only), from make's own database. The goal is a
    probe target with no recipe, so `-q` runs nothing (the Makefile's $(shell ...)s aside)."""
    probe = tmp_path_factory.mktemp("make") / "probe.mk"
    probe.write_text(f"{PROBE}:\n")
    db = make("-p", "-q", "-f", "Makefile", "-f", str(probe), PROBE)
    files = db[db.index("\n# Files\n"):]
    out: dict[str, list[str]] = {}
    for line in files.splitlines():
        m = re.match(r"^([^#\s:][^:=]*?):(?![:=])\s*(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).extend(p for p in m.group(2).split() if p != "|")
    return out


def reaches(deps: dict[str, list[str]], target: str, goal: str) -> list[str] | None:
    """A chain of prerequisites from target to goal, or None."""
    seen, todo = set(), [[target]]
    while todo:
        chain = todo.pop()
        if chain[-1] == goal:
            return chain
        for p in deps.get(chain[-1], []):
            if p not in seen:
                seen.add(p)
                todo.append([*chain, p])
    return None


@pytest.mark.parametrize("target", NEEDS_DOCKER)
def test_compose_target_depends_on_the_docker_install(prerequisites, target):
    assert target in prerequisites, f"no target {target!r} in the Makefile"
    assert reaches(prerequisites, target, STAMP), \
        f"`make {target}` does not install Docker first: add {STAMP.replace('build/stamps', '$(STAMPS)')} " \
        f"to its prerequisites (it has {prerequisites[target]})"


def test_up_and_images_install_docker_themselves(prerequisites):
    """Directly, not through `images` alone: `make up` must not rely on another target's choice."""
    assert STAMP in prerequisites["images"]
    assert STAMP in prerequisites["up"]


def test_the_docker_stamp_installs_docker_io_and_docker_compose():
    recipe = make("-n", "-B", STAMP)
    m = re.search(r"tr ' ' '\\n' <<<\"([^\"]*)\"", recipe)
    assert m, f"the apt-docker stamp's recipe is not the apt_install one:\n{recipe}"
    assert {"docker.io", "docker-compose"} <= set(m.group(1).split()), m.group(1)


def test_images_installs_docker_before_building():
    """`make images` on a machine without the stamp: apt first, then images/stack.py."""
    lines = make("-n", "-B", "images").splitlines()
    apt = next(i for i, line in enumerate(lines) if "apt-get install" in line)
    build = next(i for i, line in enumerate(lines) if "images/stack.py images" in line)
    assert apt < build


@pytest.mark.parametrize("pull", [None, "1"])
def test_up_pulls_only_when_asked(pull):
    """`make up` runs images/stack.py up without --pull; only `make up PULL=1` asks it to pull.
    (`-o setup`: setup's sub-make is left out; it is not what is checked here.)"""
    lines = make("-n", "-B", "-o", "setup", "up", *([f"PULL={pull}"] if pull else [])).splitlines()
    apt = next(i for i, line in enumerate(lines) if "apt-get install" in line)
    (up,) = [line for line in lines if re.search(r"images/stack\.py up\b", line)]
    assert apt < lines.index(up)
    assert up.split()[-1] == ("--pull" if pull else "up")
