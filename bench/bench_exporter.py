"""Exporter overhead: CPU share of `wearlab exporter` scraped once a second over a live run with
100 links (200 directions, each with its configured values and qdisc counters).

    .venv/bin/python bench/bench_exporter.py [--seconds 60]

The live run is synthetic (a results directory with control/live.json and a heartbeat, refreshed
every half second like the runner's), so the figure is the exporter's own cost: reading the run's
files and turning them into metrics with prometheus_client on each scrape. The exporter's CPU time
comes from its process's CPU clock over the scraping window. Target: <= 2 % of one core.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from common import ROOT, Stopwatch, environment, table, verdict, write_result

LINKS = 100
TARGET = 0.02


def live_doc(t: float) -> dict:
    """A live record (wearlab.report.live_record.LiveDoc) as the runner writes it."""
    links = [{"src": a, "dst": b, "shape": {"rate_bps": 1_100_000, "delay_s": 0.015, "loss": {"p": 1.0}},
              "down": False, "counters": {"bytes": int(t * 1000), "packets": int(t), "drops": 0, "backlog_bytes": 300}}
             for i in range(LINKS) for a, b in ((f"w{i}", f"p{i}"), (f"p{i}", f"w{i}"))]
    return {"experiment": "bench", "run_s": t,
            "progress": {"total": 100, "done": 10, "failed": 0, "run": 11, "cell": "pattern=cbr"},
            "workload": {"streams": [{"role": "main", "direction": "down", "owd_s": 0.5, "owd_max_s": 0.9,
                                      "goodput_bps": 1.0e6, "messages": 10,
                                      "owd_hist": {"le": [0.1, 1.0, 10.0], "counts": [3, 9, 10], "sum": 4.2,
                                                   "count": 10, "bytes": 10000}}]},
            "nodes": {f"w{i}": {"radio": "active"} for i in range(LINKS)},
            "links": links,
            "changes": {"changes": [], "last_change_ns": {}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    return time.clock_gettime(((~pid) << 3) | 2)  # the process's CPU clock (clock_getcpuclockid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60)
    a = ap.parse_args()
    with Stopwatch() as total, tempfile.TemporaryDirectory(prefix="wearlab-bench-") as d:
        run = Path(d) / "bench" / "20261122T000000Z"
        control = run / "control"
        control.mkdir(parents=True)
        (run / "metadata.json").write_text(json.dumps({"experiment": "bench", "columns": {"params": [], "metrics": {}}}))
        stop = threading.Event()

        def writer() -> None:  # the runner's live.json thread, every half second
            t0 = time.monotonic()
            while not stop.is_set():
                t = time.monotonic() - t0
                tmp = control / "live.json.tmp"
                tmp.write_text(json.dumps(live_doc(t)))
                tmp.replace(control / "live.json")
                (control / "heartbeat").write_text(json.dumps({"t_ns": time.time_ns(), "pid": 1}))
                stop.wait(0.5)

        th = threading.Thread(target=writer, daemon=True)
        th.start()
        port = free_port()
        exporter = subprocess.Popen([sys.executable, "-m", "wearlab", "exporter", "--results", d,
                                     "--listen", f"127.0.0.1:{port}"], cwd=ROOT,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}/metrics"
            deadline = time.monotonic() + 30
            while True:
                try:
                    body = urllib.request.urlopen(url, timeout=2).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or exporter.poll() is not None:
                        raise SystemExit("the exporter did not come up")
                    time.sleep(0.1)
            series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
            c0, w0 = cpu_s(exporter.pid), time.monotonic()
            scrapes, sizes = 0, []
            while time.monotonic() - w0 < a.seconds:
                t = time.monotonic()
                sizes.append(len(urllib.request.urlopen(url, timeout=5).read()))
                scrapes += 1
                time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
            share = (cpu_s(exporter.pid) - c0) / (time.monotonic() - w0)
        finally:
            stop.set()
            exporter.terminate()
            exporter.wait(timeout=10)
    print(table(["links", "series", "scrapes", "bytes/scrape", "CPU share", "target"],
                [[LINKS, series, scrapes, sizes[-1], f"{share * 100:.2f} %", f"{TARGET * 100:.0f} %"]],
                title="wearlab exporter scraped once a second"))
    doc = {"benchmark": "exporter", "environment": environment(), "parameters": {"links": LINKS, "seconds": a.seconds},
           "target": "exporter CPU <= 2 % of one core at a 1 s scrape with 100 links",
           "series": series, "scrapes": scrapes, "bytes_per_scrape": sizes[-1], "cpu_share": share,
           "duration_s": total.s}
    print(f"\nwrote {write_result('exporter', doc)}")
    return verdict({"exporter CPU <= 2 % of one core": share <= TARGET})


if __name__ == "__main__":
    sys.exit(main())
