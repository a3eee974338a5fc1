"""Container links: how true is a link to a container node, against the same link to a namespace node?

Runs on the host (wearlab starts the container there; on a kernel without netem the rest of the
network boots in the UML guest and the container's link reaches it through UML's vector driver):

    .venv/bin/python bench/bench_container.py [--quick]

Needs Docker and `wearlab/server-nginx:bookworm` (`make images`).

RTT: a watch fetches 1 KB over HTTP from a server one link away (no rate: RTT = 2 x delay exactly),
REPS times per delay, once with the server as a namespace and once as a container. The TCP handshake
on the wire (`wire_connect_s`, the watch's capture tap) minus the RTT is the error; the container's
link crosses the host veth, the raw socket of UML's vector driver and, for what the container sends,
an ifb in the guest. Target: the container's error within max(0.3 ms, 2 %), like namespace links.

Goodput: 2 MB from the server over `rate: R` (both directions), time from the first to the last
byte of the response on the wire (wire_total_s - wire_starttransfer_s), against the namespace
server's. Target: >= 95 % of the namespace server's goodput at every rate.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, Stopwatch, environment, median, percentile, table, verdict, write_result

IMAGE = "wearlab/server-nginx:bookworm"
DELAYS_MS = [2.5, 10, 50, 100]
RATES_MBIT = [2, 10, 50]
SIZE = 2_000_000

EXPERIMENT = """
name: {name}
topology:
  nodes: {{watch: {{role: wearable}}, ap: {{role: ap}}, server: {{role: server{image}}}}}
  links:
    - {{between: [watch, ap]}}
    - {{between: [ap, server], {shape}}}
repetitions: {reps}
seed: 5
workload: {{kind: http-get, client: watch, server: server, protocol: http}}
matrix: {{size: [{size}]}}
"""


def goal_ms(rtt_ms: float) -> float:
    return max(0.3, 0.02 * rtt_ms)


def run(out: Path, name: str, shape: str, reps: int, size: int, container: bool) -> list[dict]:
    exp = out / f"{name}.yaml"
    exp.write_text(EXPERIMENT.format(name=name, image=f", image: '{IMAGE}'" if container else "", shape=shape,
                                     reps=reps, size=size))
    res = subprocess.run([sys.executable, "-m", "wearlab", "run", str(exp), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"wearlab run {name} failed: {res.stdout[-800:]} {res.stderr[-800:]}")
    with (out / name / "latest" / "runs.csv").open() as f:
        return [r for r in csv.DictReader(f) if r["status"] == "ok"]


def rtt_case(out: Path, delay_ms: float, reps: int) -> dict:
    tag = str(delay_ms).replace(".", "p")
    rtt = 2 * delay_ms
    case: dict = {"one_way_ms": delay_ms, "rtt_ms": rtt, "goal_ms": goal_ms(rtt)}
    for where in ("namespace", "container"):
        rows = run(out, f"rtt-{where}-{tag}", f"delay: {delay_ms}ms", reps, 1000, where == "container")
        err = [1000 * float(r["wire_connect_s"]) - rtt for r in rows]
        case[where] = {"runs": len(rows), "median_ms": median(err), "min_ms": min(err), "p95_ms": percentile(err, 95)}
    c = case["container"]
    case["pass"] = c["runs"] == reps and c["min_ms"] >= -0.05 and c["median_ms"] <= case["goal_ms"]
    return case


def rate_case(out: Path, rate: float, reps: int) -> dict:
    case: dict = {"rate_mbit": rate}
    for where in ("namespace", "container"):
        rows = run(out, f"rate-{where}-{rate:g}", f"rate: {rate:g}Mbit, delay: 5ms", reps, SIZE, where == "container")
        gp = [SIZE * 8 / (float(r["wire_total_s"]) - float(r["wire_starttransfer_s"])) / 1e6 for r in rows]
        case[where] = {"runs": len(rows), "goodput_mbit": median(gp)}
    case["share"] = case["container"]["goodput_mbit"] / case["namespace"]["goodput_mbit"]
    case["pass"] = case["container"]["runs"] == reps and case["share"] >= 0.95
    return case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        sys.exit(f"needs Docker and {IMAGE}: make images")
    delays = [10, 50] if a.quick else DELAYS_MS
    rates = [10] if a.quick else RATES_MBIT
    reps = 4 if a.quick else a.reps
    with Stopwatch() as total, tempfile.TemporaryDirectory(prefix="wearlab-bench-") as d:
        rtts = [rtt_case(Path(d), x, reps) for x in delays]
        for c in rtts:
            print(f"  {c['one_way_ms']:5g} ms: namespace {c['namespace']['median_ms'] * 1000:+.0f} us, "
                  f"container {c['container']['median_ms'] * 1000:+.0f} us", flush=True)
        rates_out = [rate_case(Path(d), r, max(3, reps // 2)) for r in rates]
    print(table(["one-way ms", "RTT ms", "ns err med", "ctr err med", "ctr err p95", "goal", "pass"],
                [[c["one_way_ms"], c["rtt_ms"], c["namespace"]["median_ms"], c["container"]["median_ms"],
                  c["container"]["p95_ms"], c["goal_ms"], c["pass"]] for c in rtts],
                title="\nHandshake on the wire minus RTT, ms: namespace server vs container server"))
    print(table(["rate Mbit/s", "namespace Mbit/s", "container Mbit/s", "share", "pass"],
                [[c["rate_mbit"], c["namespace"]["goodput_mbit"], c["container"]["goodput_mbit"], c["share"], c["pass"]]
                 for c in rates_out], title="\nHTTP goodput of a 2 MB response"))
    doc = {"benchmark": "container", "environment": environment(image=IMAGE),
           "parameters": {"delays_ms": delays, "rates_mbit": rates, "reps": reps, "size": SIZE},
           "targets": "container link: handshake error within max(0.3 ms, 2 %) of RTT (median, never below); "
                      "goodput >= 95 % of the namespace server's",
           "rtt": rtts, "goodput": rates_out, "duration_s": total.s}
    path = write_result("container-quick" if a.quick else "container", doc)
    print(f"\nwrote {path}")
    return verdict({"container handshake within max(0.3 ms, 2 %) of RTT at every delay": all(c["pass"] for c in rtts),
                    "container goodput >= 95 % of namespace at every rate": all(c["pass"] for c in rates_out)})


if __name__ == "__main__":
    sys.exit(main())
