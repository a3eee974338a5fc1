"""Run every benchmark; each prints its table and writes bench/results/<name>.json.

On the host (normal use; `make bench`):   .venv/bin/python bench/run_all.py
    link, connect and scale run where netem lives (`wearlab runtime-exec`: a UML guest when the host
    lacks netem); overhead runs its in-guest part through `wearlab runtime-exec` and its host part here;
    guest (kernel build, boot), clock (real vs virtual) and setup boot guests themselves.
Inside a guest (`wearlab runtime-exec -- .venv/bin/python bench/run_all.py`): the netem parts run
    directly; the host-only ones are skipped (said so).

Options: --only link,connect,scale,overhead,guest,clock,container,exporter,tcpcrypt,shard,setup (default: all but
         setup, which clones the checkout and builds a guest from nothing, ~12 min)
         --quick (a smoke run: fewer points; writes *-quick / reduced-name results)
Exit status: 1 when any benchmark missed a target (each prints its targets at the end).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "src"))

from wearlab.runtime import probe  # noqa: E402

BENCHES = ("link", "connect", "relay", "bufferbloat", "timeline", "scale", "overhead", "guest", "clock", "container",
           "exporter", "tcpcrypt", "shard", "exec", "setup")
# `setup` clones the checkout and builds a guest from nothing (~12 min): only when asked for.
DEFAULT = tuple(b for b in BENCHES if b != "setup")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(DEFAULT), help="comma-separated subset of " + ",".join(BENCHES))
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer points, shorter runs")
    a = ap.parse_args()
    chosen = [b.strip() for b in a.only.split(",") if b.strip()]
    unknown = set(chosen) - set(BENCHES)
    if unknown:
        sys.exit(f"unknown benchmark(s): {', '.join(sorted(unknown))}; known: {', '.join(BENCHES)}")
    in_guest = probe.in_uml_guest()
    wearlab_exec = [str(ROOT / ".venv" / "bin" / "wearlab"), "runtime-exec", "--"]
    where = [] if in_guest else wearlab_exec  # exec runs on this kernel when it has netem
    venv_py = str(ROOT / ".venv" / "bin" / "python")
    commands = {
        "link": [*where, venv_py, str(BENCH / "bench_link.py"), *(["--quick"] if a.quick else [])],
        "scale": [*where, venv_py, str(BENCH / "bench_scale.py"),
                  *(["--wearables", "10", "--phones", "2", "--servers", "1", "--rounds", "1"] if a.quick else [])],
        "connect": [*where, venv_py, str(BENCH / "bench_connect.py"), *(["--quick"] if a.quick else [])],
        "relay": [*where, venv_py, str(BENCH / "bench_relay.py"), *(["--reps", "1"] if a.quick else [])],
        "timeline": [*where, venv_py, str(BENCH / "bench_timeline.py")],
        "bufferbloat": [*where, venv_py, str(BENCH / "bench_bufferbloat.py"), *(["--duration", "60s"] if a.quick else [])],
        # Decides by itself what runs where (in-guest part via wearlab runtime-exec, host part here).
        "overhead": [venv_py, str(BENCH / "bench_overhead.py"), *(["--repetitions", "1"] if a.quick else [])],
        # On the host: they boot guests themselves.
        "guest": [venv_py, str(BENCH / "bench_guest.py"), *(["--no-build", "--boots", "3"] if a.quick else [])],
        "clock": [venv_py, str(BENCH / "bench_clock.py"), *(["--mptcp-runs", "3"] if a.quick else [])],
        "setup": [venv_py, str(BENCH / "bench_setup.py")],
        # On the host: Docker starts the container there (needs `make images`).
        "container": [venv_py, str(BENCH / "bench_container.py"), *(["--quick"] if a.quick else [])],
        "exporter": [venv_py, str(BENCH / "bench_exporter.py"), *(["--seconds", "15"] if a.quick else [])],
        # On the host (its namespaces need no netem); its key-exchange part runs itself in the guest.
        "tcpcrypt": [venv_py, str(BENCH / "bench_tcpcrypt.py")],
        # On the host: its shards boot guests side by side (~6 min; no shorter form: its runs must
        # be long enough that link time, not boots, dominates).
        "shard": [venv_py, str(BENCH / "bench_shard.py")],
        # On the host: it deploys a topology (a guest of its own without netem here).
        "exec": [venv_py, str(BENCH / "bench_exec.py"), *(["--reps", "5"] if a.quick else [])],
    }
    if in_guest:
        for host_only in ("guest", "clock", "container", "tcpcrypt", "shard", "setup", "exec"):
            if host_only in chosen:
                print(f"skipping {host_only}: it boots guests itself, run it on the host")
                chosen.remove(host_only)
    status = {}
    for name in chosen:
        print(f"\n=== {name}: {' '.join(commands[name])}", flush=True)
        t0 = time.monotonic()
        host_load = {"WEARLAB_BENCH_HOST_LOADAVG": " ".join(Path("/proc/loadavg").read_text().split()[:3])}
        env = {**os.environ, **({} if in_guest else host_load)}
        rc = subprocess.run(commands[name], cwd=ROOT, env=env, check=False).returncode
        status[name] = (rc, time.monotonic() - t0)
    print("\n=== summary")
    for name, (rc, s) in status.items():
        print(f"{name:9s} exit {rc}  {s:6.0f} s")
    print(f"results: {BENCH / 'results'}/")
    if in_guest and "overhead" in chosen:
        print("note: inside the guest, overhead measured only its in-guest part; run bench/run_all.py "
              "on the host for the host-launched wall time")
    return 0 if all(rc == 0 for rc, _ in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
