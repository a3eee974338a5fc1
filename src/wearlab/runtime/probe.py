"""What this kernel and machine can do: the facts `doctor` prints and `auto` decides on.

Each qdisc is probed for real (added to the loopback of a throwaway network namespace made with
`unshare -n`, which vanishes with the probe) rather than guessed from config files, because a
module may be missing, blacklisted or auto-loadable.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# qdisc -> the smallest `tc qdisc add ... root <args>` that exercises it.
QDISC_PROBES: dict[str, list[str]] = {
    "netem": ["netem", "delay", "1ms"],
    "htb": ["htb", "default", "1"],
    "tbf": ["tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms"],
    "pfifo": ["pfifo", "limit", "10"],
    "bfifo": ["bfifo", "limit", "10000"],
    "fq_codel": ["fq_codel"],
    "fq": ["fq"],
}

TOOLS = ("tc", "ip", "ethtool", "curl", "nginx", "tcpdump", "mnexec", "openssl", "linux.uml")


@dataclass(frozen=True)
class QdiscProbe:
    name: str
    works: bool
    detail: str


def probe_qdisc(name: str) -> QdiscProbe:
    if os.geteuid() != 0:
        return QdiscProbe(name, False, "not root: cannot probe")
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        return QdiscProbe(name, False, "unshare or tc missing")
    subprocess.run(["modprobe", "-q", f"sch_{name}"], capture_output=True, check=False)
    script = "ip link set lo up && tc qdisc add dev lo root " + " ".join(QDISC_PROBES[name])
    res = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True,
                         check=False, timeout=20)
    detail = (res.stderr or res.stdout).strip().splitlines()
    return QdiscProbe(name, res.returncode == 0, detail[0] if detail else "ok")


def netem_works() -> bool:
    return probe_qdisc("netem").works


def kernel_release() -> str:
    return platform.release()


def in_uml_guest() -> bool:
    """True inside a User-Mode Linux guest (its /proc/cpuinfo says so)."""
    try:
        return "User Mode Linux" in Path("/proc/cpuinfo").read_text() or \
            os.environ.get("WEARLAB_IN_GUEST") == "1"
    except OSError:
        return False


def tool_paths() -> dict[str, str | None]:
    return {t: shutil.which(t) for t in TOOLS}
