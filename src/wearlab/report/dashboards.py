"""Grafana dashboards for wearlab's Prometheus metrics, written as JSON into `dashboards/`.

Kept as data here (one place for every panel and its PromQL) and written out by
`python -m wearlab.report.dashboards`; tests check that the files are what this module writes,
that they are valid Grafana JSON (unique panel ids, datasource by uid, schemaVersion), and that
every metric a query names is one the exporter emits.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "wearlab-prometheus"}
SCHEMA_VERSION = 39
E = 'experiment=~"$experiment"'

# Per-run histograms are one family per declared metric (wearlab_run_<metric>_<base unit>, see
# report.exporter); a panel over all of one unit's metrics selects them by name and turns the name
# into a `metric` label with label_replace, so one query still draws every metric by cell.


def per_run(quantile: float, name_regex: str) -> str:
    """The `quantile` of per-run values by metric and cell, over the families whose names match
    `name_regex` (with one group: the metric's part of the name)."""
    return (f'histogram_quantile({quantile}, sum by (le, metric, cell) (label_replace('
            f'{{__name__=~"{name_regex}", {E}}}, "metric", "$1", "__name__", "{name_regex}")))')


RUN_SECONDS_BUCKETS = r"wearlab_run_(.+)_seconds_bucket"

# (uid, title, [(panel title, type, unit, [(expr, legend)])])
DASHBOARDS: list[tuple[str, str, list[tuple[str, str, str, list[tuple[str, str]]]]]] = [
    ("wearlab-overview", "wearlab: overview", [
        ("Experiments running", "stat", "none", [("sum(wearlab_experiment_running)", "running")]),
        ("Runs done / all", "stat", "none", [(f"wearlab_runs_done_total{{{E}}}", "{{experiment}} done"),
                                             (f"wearlab_runs{{{E}}}", "{{experiment}} all")]),
        ("Failed runs", "stat", "none", [(f"wearlab_runs_failed_total{{{E}}}", "{{experiment}}")]),
        ("Run in progress", "timeseries", "s", [(f"wearlab_run_elapsed_seconds{{{E}}}", "{{experiment}}")]),
        ("Runs finished per minute", "timeseries", "none",
         [(f"increase(wearlab_runs_done_total{{{E}}}[1m])", "{{experiment}} done"),
          (f"increase(wearlab_runs_failed_total{{{E}}}[1m])", "{{experiment}} failed")]),
    ]),
    ("wearlab-links", "wearlab: links", [
        ("Throughput per direction", "timeseries", "bps",
         [(f"rate(wearlab_link_sent_bytes_total{{{E}}}[10s]) * 8", "{{direction}}")]),
        ("Backlog", "timeseries", "bytes", [(f"wearlab_link_backlog_bytes{{{E}}}", "{{direction}}")]),
        ("Drops per second", "timeseries", "pps", [(f"rate(wearlab_link_dropped_packets_total{{{E}}}[10s])", "{{direction}}")]),
        ("Configured rate", "timeseries", "bps", [(f"wearlab_link_rate_bytes_per_second{{{E}}} * 8", "{{direction}}")]),
        ("Configured delay", "timeseries", "s", [(f"wearlab_link_delay_seconds{{{E}}}", "{{direction}}")]),
        ("Configured loss", "timeseries", "percentunit", [(f"wearlab_link_loss_ratio{{{E}}}", "{{direction}}")]),
        ("Link down", "state-timeline", "none", [(f"wearlab_link_down{{{E}}}", "{{direction}}")]),
    ]),
    ("wearlab-http", "wearlab: HTTP/HTTPS cost", [
        ("Median per-run durations by cell", "timeseries", "s",
         [(per_run(0.5, RUN_SECONDS_BUCKETS), "{{metric}} {{cell}}")]),
        ("Runs per cell", "timeseries", "none",
         # Every run that succeeded has each duration a cell reports: the most counted one is the runs.
         [(f'max by (cell) ({{__name__=~"wearlab_run_.+_seconds_count", {E}}})', "{{cell}}")]),
        # Nodes with a device (docs/devices.md): the client's and the relaying phone's energy per run.
        ("Energy per run (median by cell)", "timeseries", "joule",
         [(per_run(0.5, r"wearlab_run_(energy.*)_joules_bucket"), "{{metric}} {{cell}}")]),
    ]),
    ("wearlab-bufferbloat", "wearlab: bufferbloat", [
        ("One-way delay (last second, median)", "timeseries", "s",
         [(f"wearlab_stream_owd_seconds{{{E}}}", "{{stream}}"), (f"wearlab_stream_owd_max_seconds{{{E}}}", "{{stream}} max")]),
        ("One-way delay p95 of the run", "timeseries", "s",
         [(f"histogram_quantile(0.95, sum by (le, stream) (wearlab_stream_message_owd_seconds_bucket{{{E}}}))",
           "{{stream}}")]),
        ("Goodput", "timeseries", "bps", [(f"wearlab_stream_goodput_bytes_per_second{{{E}}} * 8", "{{stream}}")]),
        # Seed 003 Fig. 10 live: where the delay sits (d1-d4) as it grows, in seconds and in bytes.
        ("Where the delay sits (d1-d4: queued bytes / delivery rate)", "timeseries", "s",
         [(f"wearlab_proxy_backlog_delay_seconds{{{E}}}", "{{part}} {{where}}")]),
        ("Backlog per part of the path (d1-d4)", "timeseries", "bytes",
         [(f"wearlab_proxy_backlog_bytes{{{E}}}", "{{part}} {{where}}")]),
        ("Phone socket queues", "timeseries", "bytes", [(f"wearlab_proxy_socket_queue_bytes{{{E}}}", "{{queue}}")]),
        ("Virtual queue and BT estimate", "timeseries", "bytes",
         [(f"wearlab_proxy_virtual_queue_bytes{{{E}}}", "virtual queue"),
          (f"wearlab_proxy_bt_rate_estimate_bytes_per_second{{{E}}}", "BT rate estimate, bytes/s")]),
        ("Throttled", "state-timeline", "none", [(f"wearlab_proxy_throttled{{{E}}}", "throttled")]),
    ]),
    ("wearlab-radio", "wearlab: radio, handover and interface selection", [
        ("BT radio state", "state-timeline", "none", [(f"wearlab_radio_state{{{E}}} == 1", "{{node}} {{state}}")]),
        # Seed 003 section 5: the interface a wearable's policy chose, and what the policy reads.
        ("Active interface (interface policy)", "state-timeline", "none",
         [(f"wearlab_interface_active{{{E}}} == 1", "{{node}} {{interface}}")]),
        ("Interface switches (last minute)", "timeseries", "none",
         [(f"increase(wearlab_interface_switches_total{{{E}}}[1m])", "{{node}}")]),
        ("Bytes waiting to cross BT (the policy's B)", "timeseries", "bytes",
         [(f"wearlab_interface_backlog_bytes{{{E}}}", "{{node}} at the {{side}}")]),
        ("WiFi throughput (the policy's threshold)", "timeseries", "bps",
         [(f"wearlab_interface_wifi_bytes_per_second{{{E}}} * 8", "{{node}}")]),
        ("Multipath: bytes over each path", "timeseries", "bps",
         [(f"rate(wearlab_multipath_bytes_total{{{E}}}[10s]) * 8", "{{node}} {{path}} {{direction}}")]),
        ("Stream goodput", "timeseries", "bps", [(f"wearlab_stream_goodput_bytes_per_second{{{E}}} * 8", "{{stream}}")]),
        ("Handover phases (median by cell)", "timeseries", "s",
         [(per_run(0.5, r"wearlab_run_(handover_p[0-9]+)_seconds_bucket"), "{{metric}} {{cell}}")]),
        ("Longest delivery gap (handover delay)", "timeseries", "s",
         [(f"histogram_quantile(0.5, sum by (le, cell) (wearlab_run_down_gap_max_seconds_bucket{{{E}}}))",
           "{{cell}}")]),
        ("Link changes", "timeseries", "none", [(f"increase(wearlab_link_changes_total{{{E}}}[1m])", "{{link}} {{source}}")]),
    ]),
]


def panel(pid: int, title: str, kind: str, unit: str, targets: list[tuple[str, str]], x: int, y: int) -> dict[str, Any]:
    return {"id": pid, "type": kind, "title": title, "datasource": DATASOURCE,
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {},
            "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
                        for i, (expr, legend) in enumerate(targets)]}


def dashboard(uid: str, title: str, panels: list) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "schemaVersion": SCHEMA_VERSION, "version": 1, "editable": False,
        "tags": ["wearlab"], "time": {"from": "now-15m", "to": "now"}, "refresh": "5s",
        "templating": {"list": [{
            "name": "experiment", "label": "experiment", "type": "query", "datasource": DATASOURCE,
            "query": {"query": "label_values(wearlab_runs, experiment)", "refId": "experiment"},
            "definition": "label_values(wearlab_runs, experiment)", "includeAll": True, "multi": True,
            "current": {"text": "All", "value": "$__all"}, "refresh": 2, "allValue": ".*"}]},
        "annotations": {"list": [{
            "name": "link changes", "datasource": DATASOURCE, "enable": True, "iconColor": "orange",
            "expr": f"changes(wearlab_link_last_change_timestamp_seconds{{{E}}}[30s]) > 0",
            "titleFormat": "link change", "textFormat": "{{link}}"}]},
        "panels": [panel(i + 1, *p, x=12 * (i % 2), y=8 * (i // 2)) for i, p in enumerate(panels)],
    }


def all_dashboards() -> dict[str, dict[str, Any]]:
    return {f"{uid.removeprefix('wearlab-')}.json": dashboard(uid, title, panels) for uid, title, panels in DASHBOARDS}


def write(directory: Path) -> list[Path]:
    out = []
    for name, doc in all_dashboards().items():
        path = directory / name
        path.write_text(json.dumps(doc, indent=2) + "\n")
        out.append(path)
    return out


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "dashboards")):
        print(p)
