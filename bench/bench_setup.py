"""`make experiment` on a fresh checkout: the first time (venv, guest kernel, guest root
filesystem, then the quickstart) and the second time (everything cached).

On the host:  .venv/bin/python bench/bench_setup.py

A clean clone of this checkout's HEAD goes to a temporary directory, with its own empty kernel
and root-filesystem caches, so nothing of this machine's own set-up is reused or touched. What
is not fresh: Debian packages already installed here stay installed (their download and install
time is the machine's, a minute or two; CI's log shows it on a truly fresh machine).
Targets: first <= 12 min, second <= the quickstart's own run time + 30 s.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, environment, table, verdict, write_result

FIRST_TARGET_S = 12 * 60
SECOND_OVERHEAD_TARGET_S = 30.0


def make_experiment(checkout: Path, caches: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    res = subprocess.run(["make", "experiment", f"ROOTFS={caches / 'rootfs'}", f"KERNEL_CACHE={caches / 'kernel'}"],
                         cwd=checkout, capture_output=True, text=True, check=False,
                         env={**os.environ, "WEARLAB_ROOTFS": str(caches / "rootfs"),
                              "WEARLAB_UML_KERNEL": str(caches / "kernel" / "linux.uml")})
    wall = time.monotonic() - t0
    if res.returncode != 0:
        raise RuntimeError(f"make experiment failed: {res.stdout[-2000:]} {res.stderr[-2000:]}")
    return wall, res.stdout


def main() -> int:
    if os.geteuid() != 0:
        sys.exit("needs root")
    with tempfile.TemporaryDirectory(prefix="wearlab-setup-bench-", dir="/var/tmp") as d:
        checkout, caches = Path(d) / "wearlab", Path(d) / "caches"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
        first, _ = make_experiment(checkout, caches)
        print(f"first make experiment: {first:.0f} s", flush=True)
        second, _ = make_experiment(checkout, caches)
        print(f"second make experiment: {second:.0f} s", flush=True)
        runs = sorted((checkout / "results" / "quickstart").glob("2*"))
        walls = []
        for r in runs:
            meta = (r / "metadata.json").read_text()
            started = re.search(r'"started_utc": "([^"]+)"', meta).group(1)
            finished = re.search(r'"finished_utc": "([^"]+)"', meta).group(1)
            walls.append((datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds())
        shutil.rmtree(checkout / ".venv", ignore_errors=True)
    experiment_s = walls[-1] if walls else None
    overhead = second - experiment_s if experiment_s is not None else None
    print(table(["", "wall s"], [["first make experiment", first], ["second make experiment", second],
                                 ["  of which the quickstart itself", experiment_s],
                                 ["  of which make and set-up checks", overhead]]))
    doc = {"benchmark": "setup", "environment": environment(),
           "first_s": first, "second_s": second, "quickstart_s": experiment_s, "second_overhead_s": overhead,
           "targets": {"first_s": FIRST_TARGET_S, "second_overhead_s": SECOND_OVERHEAD_TARGET_S},
           "note": "Debian packages were already installed on this machine"}
    print(f"\nwrote {write_result('setup', doc)}")
    return verdict({f"first make experiment <= {FIRST_TARGET_S // 60} min": first <= FIRST_TARGET_S,
                    f"second: <= {SECOND_OVERHEAD_TARGET_S:.0f} s beyond the quickstart itself":
                        overhead is not None and overhead <= SECOND_OVERHEAD_TARGET_S})


if __name__ == "__main__":
    sys.exit(main())
