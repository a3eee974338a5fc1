"""The dashboards against a real Prometheus (Debian's package): it scrapes `wearlab exporter`
serving a live run, and every query of every dashboard panel returns at least one series."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import need_tool
from synthetic_results import LIVE_NODES
from wearlab.report import dashboards, exporter
from wearlab.report.results import RunsCsv



@pytest.fixture(autouse=True, scope="module")
def _tools():
    need_tool("prometheus")

LIVE = {
    "experiment": "demo", "run_s": 12.5,
    "progress": {"total": 4, "done": 1, "failed": 0, "run": 2, "cell": "pattern=cbr"},
    "workload": {"streams": [{"role": "main", "direction": "down", "owd_s": 0.5, "owd_max_s": 0.9, "goodput_bps": 1.0e6,
                              "messages": 10, "owd_hist": {"le": [0.1, 1.0], "counts": [3, 9], "sum": 4.2, "count": 10,
                                                           "bytes": 10000}}],
                 "phone_queues": {"receive_bytes": 1000, "send_bytes": 20},
                 "delay_split": {"drain_bytes_per_s": 131250, "d1_bytes": 1000, "d2_bytes": 1000000, "d3_bytes": 30000,
                                 "d4_bytes": 70000, "d1_s": 0.0076, "d2_s": 7.62, "d3_s": 0.23, "d4_s": 0.53},
                 "virtual_queue": {"queue_bytes": 5e4, "bt_rate_bps": 1.05e6, "upper_bound_bytes": 9e4, "throttled": True}},
    "nodes": LIVE_NODES,
    "links": [{"src": "watch", "dst": "phone", "shape": {"rate_bps": 1_100_000, "delay_s": 0.015, "loss": {"p": 1.0}},
               "counters": {"bytes": 5000, "packets": 5, "drops": 1, "backlog_bytes": 300}}],
    "changes": {"changes": [{"link": "watch-phone", "source": "live", "count": 2}],
                "last_change_ns": {"watch-phone": time.time_ns()}},
}
METRICS = {"wire_connect_s": {"unit": "s", "better": "lower"}, "handover_p1_s": {"unit": "s", "better": "lower"},
           "down_gap_max_s": {"unit": "s", "better": "lower"}, "energy_j": {"unit": "J", "better": "lower"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port: int, expr: str) -> list:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


@pytest.fixture
def live_run(tmp_path):
    d = tmp_path / "results" / "demo" / "20261122T000000Z"
    (d / "control").mkdir(parents=True)
    (d / "metadata.json").write_text(json.dumps({"experiment": "demo", "columns": {"params": ["size"], "metrics": METRICS}}))
    runs = RunsCsv(d / "runs.csv", ["run", "size", "status", *METRICS])
    for i in range(3):
        runs.append({"run": i, "size": "10KB", "status": "ok", "wire_connect_s": 0.03 + i / 1000,
                     "handover_p1_s": 12.9, "down_gap_max_s": 38.6, "energy_j": 0.3 + i / 100})
    runs.close()
    (d / "control" / "live.json").write_text(json.dumps(LIVE))
    stop = threading.Event()

    def write_beat():
        # Replaced whole, as run/control.py writes it: a scrape that read a half-written heartbeat
        # would drop every live series, and Prometheus marks them stale until the next scrape.
        tmp = d / "control" / "heartbeat.tmp"
        tmp.write_text(json.dumps({"t_ns": time.time_ns(), "pid": 1}))
        tmp.replace(d / "control" / "heartbeat")

    def beat():
        while not stop.wait(0.5):
            write_beat()
    write_beat()
    t = threading.Thread(target=beat, daemon=True)
    t.start()
    yield tmp_path / "results"
    stop.set()


def test_every_dashboard_query_returns_series(tmp_path, live_run):
    exp_port, prom_port = free_port(), free_port()
    server, _ = exporter.serve(live_run, "127.0.0.1", exp_port)
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 2s, scrape_timeout: 2s, evaluation_interval: 2s}\n"
        f"scrape_configs:\n  - job_name: wearlab\n    static_configs: [{{targets: ['127.0.0.1:{exp_port}']}}]\n")
    prom = subprocess.Popen(["prometheus", f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def last_scrape_up() -> bool:
        try:
            return any(r["value"][1] == "1" for r in query(prom_port, 'up{job="wearlab"}'))
        except OSError:
            return False

    def wait_up() -> None:
        deadline = time.monotonic() + 60
        while not last_scrape_up():
            assert time.monotonic() < deadline, "Prometheus never scraped the exporter"
            time.sleep(0.5)

    def empty_queries() -> list[str]:
        empty = []
        for name, doc in dashboards.all_dashboards().items():
            for p in doc["panels"]:
                for t in p["targets"]:
                    expr = t["expr"].replace("$experiment", ".*")
                    if not query(prom_port, expr):
                        empty.append(f"{name} / {p['title']}: {expr}")
        return empty

    try:
        wait_up()
        time.sleep(12)   # enough scrapes for rate()/increase() windows ([10s] at a 2 s interval)
        # A scrape that fails (in CI the exporter shares two cores with two guests: one once took
        # longer than the scrape timeout) marks every series stale until the next one succeeds:
        # only an empty answer while the latest scrape was up counts against the dashboards.
        for _ in range(3):
            wait_up()
            empty = empty_queries()
            if not empty or last_scrape_up():
                break
        assert not empty, "queries without a series:\n" + "\n".join(empty)
    finally:
        prom.terminate()
        prom.wait(timeout=20)
        server.shutdown()
