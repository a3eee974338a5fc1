"""What the kernel we run on can do, found by trying it (not by reading a config file): a
module may be missing, blacklisted or auto-loadable, and a config option may be set while the
tool that drives it (tc's `seed`, iptables' TPROXY) is too old.

Every probe runs in a throwaway network namespace (`unshare -n`), so nothing on the machine
changes. `model.features.KernelFeature` is the one list of what wearlab may need (one probe each
here); `wearlab doctor` shows it for the
host and for the UML guest kernel, and the guest's feature tests assert it.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from wearlab.model.features import WHY, KernelFeature

# qdisc -> the smallest `tc qdisc add ... root <args>` that exercises it.
QDISC_PROBES: dict[str, list[str]] = {
    "netem": ["netem", "delay", "1ms"],
    "htb": ["htb", "default", "1"],
    "tbf": ["tbf", "rate", "1mbit", "burst", "10kb", "latency", "10ms"],
    "pfifo": ["pfifo", "limit", "10"],
    "bfifo": ["bfifo", "limit", "10000"],
    "fq_codel": ["fq_codel"],
    "fq": ["fq"],
    "cake": ["cake"],
    "plug": ["plug"],
}
QDISCS = tuple(QDISC_PROBES)

# One probe per kernel feature (model.features lists them and says why wearlab needs each): a
# shell script that succeeds only if it works, run as root in a fresh network namespace whose
# loopback is up.
_SCRIPTS: dict[str, str] = {
    **{f"qdisc {q}": "tc qdisc add dev lo root " + " ".join(args) for q, args in QDISC_PROBES.items()},
    "netem seed": "tc qdisc add dev lo root netem delay 1ms loss 1% seed 7 && tc qdisc show dev lo | grep -q 'seed 7'",
    "clsact/ingress": "tc qdisc add dev lo clsact",
    "ifb": "ip link add wlprobe0 type ifb && ip link del wlprobe0",
    "mptcp": f"{sys.executable} -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)'"
             " && sysctl -n net.mptcp.enabled | grep -qx 1",
    "iptables REDIRECT": "iptables-legacy -t nat -A OUTPUT -p tcp --dport 9 -j REDIRECT --to-ports 10",
    "iptables TPROXY": "iptables-legacy -t mangle -A PREROUTING -p tcp --dport 9 -j TPROXY --on-port 10 "
                       "--tproxy-mark 1",
    "iptables NFQUEUE": "iptables-legacy -A OUTPUT -p tcp --dport 9 -j NFQUEUE --queue-num 1",
    "nftables ip family": "nft add table ip wlprobe && nft add table inet wlprobe",
    "bpf sock_ops": "bpftool feature probe kernel 2>/dev/null | grep -q 'program_type sock_ops is available'",
    "cgroup cpu": "grep -qw cpu /sys/fs/cgroup/cgroup.controllers",
}
FEATURE_PROBES: dict[str, tuple[str, str]] = {f.value: (WHY[f], _SCRIPTS[f.value]) for f in KernelFeature}


@dataclass(frozen=True)
class Probe:
    name: str
    works: bool
    detail: str


# Kept for callers that only ask about qdiscs.
QdiscProbe = Probe


def _run_probe(name: str, script: str) -> Probe:
    if os.geteuid() != 0:
        return Probe(name, False, "not root: cannot probe")
    if shutil.which("unshare") is None:
        return Probe(name, False, "unshare missing")
    res = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && " + script],
                         capture_output=True, text=True, check=False, timeout=30)
    detail = (res.stderr or res.stdout).strip().splitlines()
    return Probe(name, res.returncode == 0, detail[0] if detail else ("ok" if res.returncode == 0 else
                                                                      f"exit status {res.returncode}"))


def probe_qdisc(name: str) -> Probe:
    if shutil.which("tc") is None:
        return Probe(name, False, "tc missing")
    # A module kernel may have it unloaded; a built-in kernel ignores this.
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", f"sch_{name}"], capture_output=True, check=False)
    return _run_probe(name, "tc qdisc add dev lo root " + " ".join(QDISC_PROBES[name]))


def probe_feature(name: str) -> Probe:
    why, script = FEATURE_PROBES[name]
    if name.startswith("qdisc "):
        return probe_qdisc(name.removeprefix("qdisc "))
    return _run_probe(name, script)


def features(names: list[str] | None = None) -> dict[str, Probe]:
    """The probes of FEATURE_PROBES (all, or `names`) in one throwaway namespace: one process
    start instead of one per feature (each costs ~0.2 s in a UML guest). Qdisc probes use
    `replace`, so each finds lo as the previous one left it."""
    wanted = list(FEATURE_PROBES) if names is None else list(names)
    if os.geteuid() != 0:
        return {n: Probe(n, False, "not root: cannot probe") for n in wanted}
    if shutil.which("modprobe"):
        for q in QDISCS:
            if names is None or f"qdisc {q}" in wanted:
                subprocess.run(["modprobe", "-q", f"sch_{q}"], capture_output=True, check=False)
    parts = ["ip link set lo up"]
    for name in wanted:
        _, script = FEATURE_PROBES[name]
        script = script.replace("tc qdisc add dev lo root", "tc qdisc replace dev lo root")
        parts.append(f"out=$( ({script}) 2>&1 ); rc=$?; "
                     f"printf '%s\\037%s\\037%s\\036' {shlex.quote(name)} $rc \"$(echo \"$out\" | head -n1)\"")
    res = subprocess.run(["unshare", "-n", "sh", "-c", "\n".join(parts)], capture_output=True, text=True,
                         check=False, timeout=120)
    found: dict[str, Probe] = {}
    for record in res.stdout.split("\x1e"):
        fields = record.split("\x1f")
        if len(fields) == 3:
            name, rc, detail = fields
            found[name] = Probe(name, rc == "0", detail or ("ok" if rc == "0" else f"exit status {rc}"))
    return {n: found.get(n, Probe(n, False, res.stderr.strip()[:200] or "not probed")) for n in wanted}


def netem_works() -> bool:
    return probe_qdisc("netem").works


def kernel_release() -> str:
    return platform.release()


def in_uml_guest() -> bool:
    """True inside a User-Mode Linux guest (its /proc/cpuinfo says so). Only for "where is this
    process" (placement.choose, doctor, this report, clean-up of the host's guest jobs): a run
    branches on its plan's runtime, never on this."""
    try:
        return "User Mode Linux" in Path("/proc/cpuinfo").read_text() or \
            os.environ.get("WEARLAB_IN_GUEST") == "1"
    except OSError:
        return False


TOOLS = ("tc", "ip", "ethtool", "curl", "nginx", "tcpdump", "mnexec", "openssl")


def tool_paths() -> dict[str, str | None]:
    return {t: shutil.which(t) for t in TOOLS}


def report() -> dict[str, object]:
    """Everything doctor shows about this kernel, as JSON-able data."""
    return {
        "kernel": kernel_release(),
        "uml_guest": in_uml_guest(),
        "features": {n: {"works": p.works, "detail": p.detail, "why": FEATURE_PROBES[n][0]}
                     for n, p in features().items()},
        "tc": _first_line(["tc", "-V"]),
    }


def _first_line(argv: list[str]) -> str:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    except OSError as e:
        return f"unavailable: {e}"
    return ((res.stdout or res.stderr).strip().splitlines() or ["?"])[0]


if __name__ == "__main__":
    # `python -m wearlab.runtime.probe`: the report as one JSON line (doctor runs it in the guest).
    print(json.dumps(report()))
