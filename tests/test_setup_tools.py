"""Every program wearlab and its tests run comes from a Debian package the project's own set-up
installs (images/packages.txt, the one list), and is installed: on a fresh machine nothing was
installed by hand, so a program that only a developer's machine had fails here, by name.

PROGRAMS is the list; `test_every_program_used_is_listed` scans src/, tests/ and bench/ for the
programs they start (subprocess argv heads, shutil.which, need_tool, shell lines) so a new one
cannot slip in unlisted.
"""

from __future__ import annotations

import re
import shutil

import pytest

from conftest import ROOT, packages
from wearlab.runtime import probe

ESSENTIAL = "essential"   # Debian's Essential/required set: on every Debian system
# program -> (Debian package, whether it runs inside the UML guest too)
PROGRAMS: dict[str, tuple[str, bool]] = {
    "ip": ("iproute2", True), "tc": ("iproute2", True), "ss": ("iproute2", True),
    "ethtool": ("ethtool", True), "ping": ("iputils-ping", True), "curl": ("curl", True),
    "openssl": ("openssl", True), "nginx": ("nginx-light", True), "haproxy": ("haproxy", True),
    "tcpdump": ("tcpdump", True), "iperf3": ("iperf3", True), "iptables": ("iptables", True),
    "iptables-legacy": ("iptables", True), "bpftool": ("bpftool", True), "modprobe": ("kmod", False),
    "prometheus": ("prometheus", False), "promtool": ("prometheus", False), "stress-ng": ("stress-ng", False),
    "nsenter": (ESSENTIAL, True), "unshare": (ESSENTIAL, True), "nice": (ESSENTIAL, True),
    "sh": (ESSENTIAL, True), "cat": (ESSENTIAL, True), "mount": (ESSENTIAL, True), "stat": (ESSENTIAL, True),
    "dpkg-query": (ESSENTIAL, False),
    # The checkout and its driver: present wherever `make test` can be typed.
    "make": (ESSENTIAL, False), "git": (ESSENTIAL, False),
    # The Compose stack's (make test-compose installs them; `make test` never runs them).
    "docker": ("docker.io", False), "dockerd": ("docker.io", False), "docker-compose": ("docker-compose", False),
}
COMPOSE = {"docker.io", "docker-compose"}

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
    return found


def test_every_program_used_is_listed():
    unlisted = {p: sorted(files) for p, files in used_programs().items() if p not in PROGRAMS}
    assert not unlisted, f"programs started but not in PROGRAMS (add each with its Debian package to PROGRAMS " \
                         f"and the package to images/packages.txt): {unlisted}"


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_comes_from_the_set_up(program):
    package, in_guest = PROGRAMS[program]
    if package == ESSENTIAL:
        return
    where = "docker" if package in COMPOSE else "host"
    assert package in packages(where), f"{program}: tag {package} `{where}` in images/packages.txt"
    if in_guest:
        assert package in packages("guest"), f"{program} runs in the guest: tag {package} `guest` in images/packages.txt"


@pytest.mark.skipif(probe.in_uml_guest(), reason="the host's programs")
@pytest.mark.parametrize("program", sorted(p for p, (pkg, _) in PROGRAMS.items() if pkg not in COMPOSE))
def test_program_is_installed_on_the_host(program):
    assert shutil.which(program), f"{program} is not installed: `make test` installs {PROGRAMS[program][0]} " \
                                  "(images/packages.txt, tag host)"


@pytest.mark.guest
@pytest.mark.skipif(not probe.in_uml_guest(), reason="the guest's programs")
@pytest.mark.parametrize("program", sorted(p for p, (_, in_guest) in PROGRAMS.items() if in_guest))
def test_program_is_installed_in_the_guest(program):
    assert shutil.which(program), f"{program} is not in the guest's root filesystem: tag {PROGRAMS[program][0]} " \
                                  "`guest` in images/packages.txt (images/uml/build-rootfs.sh installs those)"


def test_package_list_names_real_places():
    places = {"host", "guest", "testbed", "kernel", "rust", "docker"}
    for line in (ROOT / "images" / "packages.txt").read_text().splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            assert len(fields) > 1 and set(fields[1:]) <= places, f"images/packages.txt: {line!r}"
