"""Shared helpers for the benchmarks: reproducibility facts, tables, JSON results, topologies.

Benchmarks are plain scripts (not pytest). Each prints a table and writes
bench/results/<name>.json with an `environment` block saying what makes it reproducible.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
sys.path.insert(0, str(ROOT / "src"))  # runnable without the package installed (it is, in .venv)

from wearlab import __version__  # noqa: E402
from wearlab.report.metadata import git_commit  # noqa: E402
from wearlab.runtime import probe  # noqa: E402


HOST_LOADAVG_ENV = "WEARLAB_BENCH_HOST_LOADAVG"  # WEARLAB_* variables cross into the UML guest


def env_with_host_load() -> dict[str, str]:
    """os.environ plus this machine's load average, for a `wearlab runtime-exec` child to record."""
    return {**os.environ, HOST_LOADAVG_ENV: " ".join(Path("/proc/loadavg").read_text().split()[:3])}


def _first_line(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (r.stdout or r.stderr).strip()
    return text.splitlines()[0] if text else None


def git_dirty() -> bool | None:
    """Uncommitted changes in the checkout (None where there is no git binary: the UML guest)."""
    if shutil.which("git") is None:
        return None
    r = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                       capture_output=True, text=True, check=False)
    return bool(r.stdout.strip()) if r.returncode == 0 else None


def environment(**extra) -> dict:
    """What a result depends on: where it ran, which code, which tools, when."""
    in_guest = probe.in_uml_guest()
    env = {
        "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),               # uname -r where this script runs
        "runtime": "uml" if in_guest else "host",
        "in_uml_guest": in_guest,
        "host_kernel": os.environ.get("WEARLAB_HOST_KERNEL") if in_guest else platform.release(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        # Inside a guest the line above is the guest's; run_all/bench_overhead pass the host's in.
        "host_loadavg_at_start": (os.environ.get(HOST_LOADAVG_ENV, "").split() or None) if in_guest
        else Path("/proc/loadavg").read_text().split()[:3],
        "wearlab_version": __version__,
        "wearlab_git_commit": git_commit(ROOT),
        "wearlab_git_dirty": git_dirty(),
        "python": platform.python_version(),
        "iperf3": _first_line(["iperf3", "--version"]),
        "iproute2": _first_line(["ip", "-V"]),
        "ping": _first_line(["ping", "-V"]),
        "argv": sys.argv,
    }
    env.update(extra)
    return env


def write_result(name: str, doc: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)
    return path


def table(headers: list[str], rows: list[list], title: str | None = None) -> str:
    """A plain, aligned text table (also readable in a log or a pipe)."""
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = []
    if title:
        out.append(title)
    out.append("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    out.append(line)
    for r in cells:
        out.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    return "\n".join(out)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1000 else f"{v:.1f}"
    return str(v)


def percentile(xs: list[float], p: float) -> float:
    """Linear-interpolated percentile, p in [0, 100]."""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


class Stopwatch:
    """with Stopwatch() as t: ...; t.s is the elapsed wall time in seconds."""

    def __enter__(self):
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.s = time.monotonic() - self.t0
        return False


def verdict(checks: dict[str, bool | None]) -> int:
    """Print each target's outcome and return the exit status: 1 when any target was missed
    (None = not measured in this run, which is neither)."""
    print("\ntargets:")
    for name, ok in checks.items():
        print(f"  {'pass' if ok else ('-' if ok is None else 'MISS')}  {name}")
    return 1 if any(ok is False for ok in checks.values()) else 0


def require_root_and_netem() -> None:
    """Exit with a hint when this kernel cannot host the network (run via `wearlab runtime-exec`)."""
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, tc)")
    if not probe.netem_works():
        sys.exit(f"this kernel ({platform.release()}) has no sch_netem; run this benchmark via "
                 f"`.venv/bin/wearlab runtime-exec -- .venv/bin/python {sys.argv[0]}`")
