"""What makes a result reproducible: kernel, runtime, versions, qdiscs, sysctls, seeds, inputs.

`RunRecord` is the one place metadata.json is built: the runner hands it facts as the
experiment proceeds and it writes the file atomically at each checkpoint, so an interrupted or
killed run still leaves everything known so far.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from importlib import metadata as importlib_metadata
from pathlib import Path

from wearlab import __version__
from wearlab.nodes import devicecpu

TOOL_VERSION_COMMANDS = {
    "curl": ["curl", "--version"],
    "nginx": ["nginx", "-v"],
    "openssl": ["openssl", "version"],
    "iproute2": ["ip", "-V"],
    "tcpdump": ["tcpdump", "--version"],
    "ethtool": ["ethtool", "--version"],
}
PY_PACKAGES = ("pydantic", "ruamel.yaml", "rich", "dpkt", "pycurl", "cryptography")


def _first_line(argv: list[str]) -> str:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable: {e}"
    text = (res.stdout or res.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def git_commit(start: Path) -> str | None:
    """The checkout's commit, read from .git directly (the UML guest has no git binary)."""
    for d in [start, *start.parents]:
        head = d / ".git" / "HEAD"
        if head.is_file():
            ref = head.read_text().strip()
            if not ref.startswith("ref: "):
                return ref
            f = d / ".git" / ref[5:]
            if f.is_file():
                return f.read_text().strip()
            packed = d / ".git" / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref[5:]):
                        return line.split()[0]
            return None
    return None


def sha256(path: str | None) -> str | None:
    if not path or not Path(path).is_file():
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def versions() -> dict[str, str]:
    out = {"wearlab": __version__, "python": sys.version.split()[0]}
    for name, argv in TOOL_VERSION_COMMANDS.items():
        out[name] = _first_line(argv)
    for pkg in PY_PACKAGES:
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = "missing"
    try:
        from mininet.net import VERSION as mn_version
        out["mininet"] = mn_version
    except ImportError:
        out["mininet"] = "missing"
    return out


def machine(runtime: str) -> dict[str, object]:
    uname = platform.uname()
    facts: dict[str, object] = {
        "runtime": runtime,
        "kernel": f"{uname.system} {uname.release} {uname.version} {uname.machine}",
        "kernel_release": uname.release,
        "hostname": uname.node,
        "cpus": os.cpu_count(),
    }
    if os.environ.get("WEARLAB_IN_GUEST") == "1":
        facts["uml_guest"] = True
        facts["host_kernel_release"] = os.environ.get("WEARLAB_HOST_KERNEL")
        facts["uml_rootfs"] = os.environ.get("WEARLAB_GUEST_ROOTFS")
        facts["uml_kernel_build"] = os.environ.get("WEARLAB_GUEST_KERNEL")
        facts["uml_extra_kernel_args"] = os.environ.get("WEARLAB_UML_ARGS", "")
        facts["uml_host_cpu"] = os.environ.get("WEARLAB_GUEST_CPU_PIN")
        facts["uml_host_idle"] = os.environ.get("WEARLAB_HOST_IDLE")
    try:
        facts["mem_total_kb"] = int(next(l for l in Path("/proc/meminfo").read_text().splitlines()
                                         if l.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    return facts


class RunRecord:
    """metadata.json of one experiment run."""

    def __init__(self, path: Path, plan, *, run_id: str, started: str, host_plan_sha256: str | None = None):
        """`plan`: the run's wearlab.plan.plan.RunPlan; `host_plan_sha256`: in a UML guest, the
        digest of the plan the host made (the guest ran only because it equals its own)."""
        self.path = path
        self.doc: dict[str, object] = {
            "experiment": plan.name, "experiment_file": plan.file, "experiment_sha256": sha256(plan.file),
            "topology_file": plan.topology.file, "topology_sha256": sha256(plan.topology.file),
            "workload": plan.workload.name, "seed": plan.seed, "repetitions": plan.repetitions,
            "plan_sha256": plan.digest(), **({"host_plan_sha256": host_plan_sha256} if host_plan_sha256 else {}),
            "shaper": plan.network.shaper.value, "kernel_features": sorted(f.value for f in plan.features),
            "started_utc": started, "run_id": run_id, "command": os.environ.get("WEARLAB_ARGV"),
            "git_commit": git_commit(Path(__file__).resolve().parent),
            "machine": machine(plan.runtime.value), "versions": versions(),
            # What compare and plots need to read runs.csv without knowing the workload.
            "columns": {"params": list(plan.columns.params),
                        "metrics": {m.name: m.describe() for m in plan.columns.metrics},
                        "series": {s.name: list(s.columns) for s in plan.columns.series}},
            # Each node's device and how its time is made (empty: every node computes at this
            # machine's speed, nothing slowed down).
            "devices": {n: {**{k: v for k, v in d.summary().items() if k != "costs"},
                            "mechanism": devicecpu.mechanism_facts()} for n, d in sorted(plan.devices.items())},
            "notes": [], "status": "running",
        }
        self.save()

    def __getitem__(self, key: str):
        return self.doc[key]

    def set(self, **facts) -> None:
        self.doc.update(facts)
        self.save()

    def note(self, text: str) -> None:
        self.doc["notes"].append(text)  # type: ignore[union-attr]

    def save(self) -> None:
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.doc, indent=2, default=str) + "\n")
        tmp.replace(self.path)
