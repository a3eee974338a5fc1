"""Every program wearlab and its tests run comes from a Debian package the project's own set-up
installs (images/packages.txt, the one list), and is installed: on a fresh machine nothing was
installed by hand, so a program that only a developer's machine had fails here, by name.

images/packages.txt says which programs each package provides (`programs=` on its line: the one
home of the program -> package list, read here); `test_every_program_used_is_listed` scans src/,
tests/ and bench/ for the programs they start (subprocess argv heads, shutil.which, need_tool,
shell lines) so a new one cannot slip in unlisted.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from conftest import ROOT, package_list, programs
from wearlab.runtime import probe

PLACES = {"host", "host-tests", "guest", "testbed", "kernel", "rust", "docker", "required"}
PROGRAMS = programs()           # program -> (Debian package, where the package goes)
# The Compose stack's (make test-compose installs them; `make test` never runs them).
COMPOSE = {p for p, (_, places) in PROGRAMS.items() if "docker" in places and "host" not in places}
# A program runs in the guest when its package is in the guest's root filesystem: tagged `guest`,
# or in Debian's required set (debootstrap's tree has it).
IN_GUEST = {p for p, (_, places) in PROGRAMS.items() if places & {"guest", "required"}}

_USES = (
    re.compile(r"""(?:run|Popen|check_output|check_call|call|popen)\(\s*\[\s*["']([A-Za-z][\w.+-]*)["']"""),
    re.compile(r"""(?:shutil\.which|need_tool)\(\s*["']([A-Za-z][\w.+-]*)["']"""),
    # shell lines handed to a node: net.sh(node, "tc qdisc ..."), h.cmd(f"ip link ...")
    re.compile(r"""\b(?:sh|cmd)\(\s*(?:[\w.]+,\s*)?f?["']\(?([a-z][\w-]*) """),
)


def used_programs() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for d in ("src", "tests", "bench"):
        for f in (ROOT / d).rglob("*.py"):
            text = f.read_text()
            for pat in _USES:
                for m in pat.finditer(text):
                    found.setdefault(m.group(1), set()).add(str(f.relative_to(ROOT)))
    for tool in probe.TOOLS:    # what `wearlab doctor` looks for
        found.setdefault(tool, set()).add("src/wearlab/runtime/probe.py (TOOLS)")
    return found


def test_every_program_used_is_listed():
    unlisted = {p: sorted(files) for p, files in used_programs().items() if p not in PROGRAMS}
    assert not unlisted, f"programs started but no package provides them in images/packages.txt (add the " \
                         f"program to its package's `programs=` field, tagged for where it runs): {unlisted}"


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_comes_from_the_set_up(program):
    package, places = PROGRAMS[program]
    assert places & {"host", "host-tests", "docker", "required"}, \
        f"{program}: tag {package} `host` (or `docker`) in images/packages.txt: nothing installs it on the host"


@pytest.mark.skipif(probe.in_uml_guest(), reason="the host's programs")
@pytest.mark.parametrize("program", sorted(set(PROGRAMS) - COMPOSE))
def test_program_is_installed_on_the_host(program):
    assert shutil.which(program), f"{program} is not installed: `make test` installs {PROGRAMS[program][0]} " \
                                  "(images/packages.txt, tag host)"


@pytest.mark.skipif(probe.in_uml_guest(), reason="the host's packages")
@pytest.mark.parametrize("package", sorted({name for name, places, _ in package_list() if "required" in places}))
def test_required_is_debians_required_set(package):
    """`required` means installed by nobody: true only of Debian's required priority."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Priority}", package], capture_output=True, text=True)
    assert r.stdout == "required", f"{package} is not in Debian's required set ({r.stdout or r.stderr.strip()}): " \
                                   "tag it `host` (and `guest`) in images/packages.txt"


@pytest.mark.guest
@pytest.mark.skipif(not probe.in_uml_guest(), reason="the guest's programs")
@pytest.mark.parametrize("program", sorted(IN_GUEST))
def test_program_is_installed_in_the_guest(program):
    assert shutil.which(program), f"{program} is not in the guest's root filesystem: tag {PROGRAMS[program][0]} " \
                                  "`guest` in images/packages.txt (images/uml/build-rootfs.sh installs those)"


def test_package_list_names_real_places_and_each_program_once():
    seen: dict[str, str] = {}
    for name, places, progs in package_list():
        assert places and places <= PLACES, f"images/packages.txt: {name}: places {sorted(places)}, not of {sorted(PLACES)}"
        for prog in progs:
            assert prog not in seen, f"images/packages.txt: {prog} is provided by both {seen[prog]} and {name}"
            seen[prog] = name
    for line in (ROOT / "images" / "packages.txt").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            assert all("=" not in f or f.startswith("programs=") for f in fields[1:]), f"images/packages.txt: {line!r}"
