"""How fast and how exactly links change: a timeline's event timing error and live control's
request-to-kernel latency.

Runs where netem lives:  .venv/bin/wearlab runtime-exec -- .venv/bin/python bench/bench_timeline.py

1. A 12 s CBR stream over one link whose delay the timeline toggles 20 <-> 25 ms every 250 ms
   (44 changes): late_ms of every change (kernel has it minus its scheduled time) and apply_ms
   (the tc round trip).
2. The same stream while `wearlab link set` requests arrive from outside every 300 ms (the
   control channel the CLI uses): request -> kernel latency.
Targets (issue 7): event timing error <= 5 ms (every change); live control <= 100 ms (every request).
"""

from __future__ import annotations

import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, Stopwatch, environment, median, percentile, require_root_and_netem, table, verdict, \
    write_result

from wearlab.run import control  # noqa: E402

EXPERIMENT = """
name: {name}
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 10Mbit, delay: 20ms}}]
repetitions: 1
workload: {{kind: stream, client: watch, server: server, direction: down, pattern: cbr, rate: 80kbit,
           message_size: 100, duration: 12s}}
{timeline}
"""


def timeline_case(d: Path) -> dict:
    events = "\n".join(f"  - {{at: {0.5 + 0.25 * i:g}s, link: watch-server, set: {{delay: {25 if i % 2 == 0 else 20}ms}}}}"
                       for i in range(44))
    (d / "tl.yaml").write_text(EXPERIMENT.format(name="bench-timeline", timeline="timeline:\n" + events))
    res = subprocess.run([sys.executable, "-m", "wearlab", "run", str(d / "tl.yaml"), "--out", str(d)],
                         capture_output=True, text=True, cwd=ROOT, check=False)
    if res.returncode != 0:
        raise RuntimeError(res.stdout[-1000:] + res.stderr[-1000:])
    with (d / "bench-timeline" / "latest" / "series" / "timeline.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["source"] == "timeline"]
    late = [float(r["late_ms"]) for r in rows]
    apply = [float(r["apply_ms"]) for r in rows]
    return {"changes": len(rows), "late_ms": {"median": median(late), "p95": percentile(late, 95), "max": max(late),
                                              "min": min(late)},
            "apply_ms": {"median": median(apply), "max": max(apply)}}


def live_case(d: Path) -> dict:
    (d / "live.yaml").write_text(EXPERIMENT.format(name="bench-live", timeline=""))
    out = d / "live"
    run = subprocess.Popen([sys.executable, "-m", "wearlab", "run", str(d / "live.yaml"), "--out", str(out)],
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latencies = []
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("bench-live/*/control/heartbeat")):
            if time.monotonic() > deadline or run.poll() is not None:
                raise RuntimeError("the run did not start")
            time.sleep(0.05)
        time.sleep(3.0)
        for i in range(20):
            ans = control.request(out, {"action": "set", "link": "watch-server",
                                        "set": {"delay": "25ms" if i % 2 == 0 else "20ms"}})
            latencies.append(ans["latency_ms"])
            time.sleep(0.3)
    finally:
        run.wait(timeout=120)
    return {"requests": len(latencies), "latency_ms": {"median": median(latencies), "p95": percentile(latencies, 95),
                                                        "max": max(latencies)}}


def main() -> int:
    require_root_and_netem()
    with Stopwatch() as total, tempfile.TemporaryDirectory(prefix="wearlab-bench-", dir=ROOT / "build") as tmp:
        tl = timeline_case(Path(tmp))
        live = live_case(Path(tmp))
    print(table(["case", "n", "median ms", "p95 ms", "max ms"],
                [["timeline lateness", tl["changes"], tl["late_ms"]["median"], tl["late_ms"]["p95"], tl["late_ms"]["max"]],
                 ["tc apply (round trip)", tl["changes"], tl["apply_ms"]["median"], "", tl["apply_ms"]["max"]],
                 ["live request -> kernel", live["requests"], live["latency_ms"]["median"], live["latency_ms"]["p95"],
                  live["latency_ms"]["max"]]], title="\nLink changes"))
    doc = {"benchmark": "timeline", "environment": environment(), "timeline": tl, "live": live,
           "targets": "every timeline change <= 5 ms late; every live request applied <= 100 ms", "duration_s": total.s}
    print(f"\nwrote {write_result('timeline', doc)}")
    return verdict({"timeline changes <= 5 ms late": tl["late_ms"]["max"] <= 5.0 and tl["late_ms"]["min"] >= 0,
                    "live control <= 100 ms": live["latency_ms"]["max"] <= 100.0})


if __name__ == "__main__":
    sys.exit(main())
