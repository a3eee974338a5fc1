"""The Compose stack: how long `make up` takes until Prometheus has scraped the testbed, with the
images already built, and how long `make images` takes when nothing changed.

On the host:  .venv/bin/python bench/bench_compose.py [--rounds N]

Each round starts from `make down` (no container, network or volume of the stack) and times
`make up` as a user runs it (its prerequisites `setup` and `images` included), which returns once
Prometheus's `up{job="wearlab"}` is 1; `make up` also reports its own share (from the start of
`python3 images/stack.py up` to the first successful scrape). Ends with `make down`.
Targets: every round's `make up` <= 60 s; `make images` with nothing to build <= 15 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, environment, median, table, verdict, write_result

UP_TARGET_S = 60.0
IMAGES_TARGET_S = 15.0


def make(target: str, env: dict | None = None) -> tuple[float, str]:
    t0 = time.monotonic()
    r = subprocess.run(["make", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, **(env or {})}, check=False)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"make {target} failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return wall, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (Docker)")
    make("images")                       # build whatever is missing, untimed
    images_s, _ = make("images")         # nothing to build: what every `make up` pays
    print(f"make images, nothing to build: {images_s:.1f} s", flush=True)
    rounds = []
    try:
        for i in range(a.rounds):
            make("down")
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                wall, out = make("up", env={"WEARLAB_STACK_TIMING": f.name})
                inner = json.loads(Path(f.name).read_text() or "{}")
            rounds.append({"make_up_s": wall, "stack_up_to_first_scrape_s": inner.get("up_to_first_scrape_s"),
                           "waiting_for_scrape_s": inner.get("waiting_s"),
                           "grafana_started": "Grafana skipped" not in out})
            print(f"round {i + 1}: make up {wall:.1f} s (stack up -> first scrape "
                  f"{inner.get('up_to_first_scrape_s', float('nan')):.1f} s)", flush=True)
    finally:
        make("down")
    ups = [r["make_up_s"] for r in rounds]
    print(table(["round", "make up s", "stack up -> scrape s", "waiting for the scrape s"],
                [[i + 1, r["make_up_s"], r["stack_up_to_first_scrape_s"], r["waiting_for_scrape_s"]]
                 for i, r in enumerate(rounds)], title="\n`make up` (images built) until Prometheus scraped the testbed"))
    docker = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                            text=True, check=False).stdout.strip()
    compose = subprocess.run(["docker-compose", "version", "--short"], capture_output=True, text=True,
                             check=False).stdout.strip()
    doc = {"benchmark": "compose", "environment": environment(docker=docker, docker_compose=compose),
           "make_images_nothing_to_build_s": images_s,
           "rounds": rounds, "make_up_median_s": median(ups), "make_up_max_s": max(ups),
           "targets": {"make_up_s": UP_TARGET_S, "make_images_nothing_to_build_s": IMAGES_TARGET_S}}
    print(f"\nwrote {write_result('compose', doc)}")
    return verdict({f"make up -> first scrape <= {UP_TARGET_S:.0f} s (every round)": max(ups) <= UP_TARGET_S,
                    f"make images with nothing to build <= {IMAGES_TARGET_S:.0f} s": images_s <= IMAGES_TARGET_S})


if __name__ == "__main__":
    sys.exit(main())
