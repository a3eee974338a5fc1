"""Stepping into a node: how long `wearlab exec NODE -- CMD` takes, and how fast and how surely a
large output comes back, on a deployed topology (topologies/cproxy.yaml; under the UML runtime
on a host without netem, where the channel is the guest's serial line).

On the host:  .venv/bin/python bench/bench_exec.py [--reps N]

- latency: `wearlab exec watch -- true`, REPS times, the whole command as a user types it (the
  CLI's start, finding the deployment, the channel, nsenter/unshare in the node, the exit status
  back). Target: median <= 0.5 s (`docker exec` on this machine: ~0.1-0.2 s; a teacher typing
  commands in front of a class should not wait a second each).
- output: `wearlab exec watch -- seq 1 1000000` (6,888,896 B, worked out by hand in the code),
  REPS times. Targets: every one whole and in time (<= 60 s: a stalled serial line never
  recovers by itself, so a stall shows as a timeout), median rate >= 2 MB/s.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from common import ROOT, environment, median, table, verdict, write_result

TOPOLOGY = ROOT / "topologies" / "cproxy.yaml"
WEARLAB = [sys.executable, "-m", "wearlab"]
LATENCY_TARGET_S = 0.5
RATE_TARGET_BPS = 2e6                       # bytes per second
OUTPUT_TIMEOUT_S = 60.0
# `seq 1 1000000`: 9 one-digit, 90 two-digit, ..., 900,000 six-digit numbers and 1,000,000, each
# with its newline
SEQ_N = 1_000_000
SEQ_BYTES = sum(9 * 10 ** (d - 1) * (d + 1) for d in range(1, 7)) + 8


def wearlab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*WEARLAB, *args], cwd=ROOT, capture_output=True, timeout=timeout, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces)")
    name = f"bench-exec-{os.getpid()}"
    proc = subprocess.Popen([*WEARLAB, "deploy", str(TOPOLOGY), "--name", name], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    latencies: list[float] = []
    outputs: list[dict] = []
    try:
        deadline = time.monotonic() + 180
        while wearlab("exec", "--name", name, "watch", "--", "true").returncode != 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the deployment did not come up (exit {proc.poll()})")
        for _ in range(a.reps):
            t0 = time.monotonic()
            res = wearlab("exec", "--name", name, "watch", "--", "true")
            latencies.append(time.monotonic() - t0)
            assert res.returncode == 0, res.stderr
        for i in range(a.reps):
            t0 = time.monotonic()
            try:
                res = wearlab("exec", "--name", name, "watch", "--", "seq", "1", str(SEQ_N), timeout=OUTPUT_TIMEOUT_S)
                got, rc = len(res.stdout), res.returncode
            except subprocess.TimeoutExpired as e:
                got, rc = len(e.stdout or b""), None
            took = time.monotonic() - t0
            outputs.append({"bytes": got, "exit": rc, "s": took, "whole": rc == 0 and got == SEQ_BYTES})
            print(f"output {i + 1}: {got:,} B in {took:.2f} s{'' if outputs[-1]['whole'] else '  NOT WHOLE'}",
                  flush=True)
    finally:
        subprocess.run([*WEARLAB, "destroy", name], cwd=ROOT, capture_output=True, check=False)
        proc.wait(timeout=120)
    whole = [o for o in outputs if o["whole"]]
    rates = [SEQ_BYTES / o["s"] for o in whole]
    lat_med = median(latencies)
    rate_med = median(rates) if rates else 0.0
    print(table(["what", "median", "min", "max"],
                [["exec -- true (s)", lat_med, min(latencies), max(latencies)],
                 [f"seq 1 {SEQ_N} ({SEQ_BYTES:,} B), MB/s", rate_med / 1e6, min(rates, default=0) / 1e6,
                  max(rates, default=0) / 1e6]],
                title=f"wearlab exec on a deployed {TOPOLOGY.name}, {a.reps} each"))
    checks = {f"exec -- true, median <= {LATENCY_TARGET_S} s": lat_med <= LATENCY_TARGET_S,
              f"{len(whole)}/{len(outputs)} large outputs whole within {OUTPUT_TIMEOUT_S:g} s":
                  len(whole) == len(outputs),
              f"large output, median >= {RATE_TARGET_BPS / 1e6:g} MB/s": rate_med >= RATE_TARGET_BPS}
    write_result("exec", {"environment": environment(), "reps": a.reps, "latency_s": latencies,
                          "latency_median_s": lat_med, "output_bytes": SEQ_BYTES, "outputs": outputs,
                          "rate_median_bytes_per_s": rate_med,
                          "targets": {"latency_median_s": LATENCY_TARGET_S, "rate_bytes_per_s": RATE_TARGET_BPS,
                                      "output_timeout_s": OUTPUT_TIMEOUT_S},
                          "checks": checks})
    return verdict(checks)


if __name__ == "__main__":
    sys.exit(main())
