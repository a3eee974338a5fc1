"""Prometheus metrics of running experiments (`wearlab exporter`).

The runner sits wherever the network lives - the host, a UML guest with no network to the host,
the Compose stack's testbed - so it does not serve HTTP itself: it writes `control/live.json` into
its results directory (which every runtime shares with the host) every half second, and this
collector, run on the host, turns the live runs it finds there into metrics on each scrape.
prometheus_client does the exposition; names follow Prometheus conventions (base units,
`_total` for counters, `_seconds`, `_bytes`), labels say experiment, link, direction, stream.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from wearlab.model import units
from wearlab.model.choices import RadioState
from wearlab.run import control

# Buckets of per-run durations (connect, TLS handshake, transfer, handover phases ...), seconds.
RUN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _num(value: Any, parse) -> float | None:
    if value in (None, "", "-"):
        return None
    try:
        return float(parse(value))
    except (TypeError, ValueError):
        return None


class LiveRuns(Collector):
    """Metrics of every live run under a results directory."""

    def __init__(self, results: Path):
        self.results = results

    def docs(self) -> list[dict[str, Any]]:
        out = []
        for c in control.live_runs(self.results):
            doc = control.read_live(c.parent)
            if doc and not doc.get("error"):
                out.append({**doc, "_dir": c.parent})
        return out

    @staticmethod
    def run_rows(d: Path) -> tuple[list[str], dict[str, Any], list[dict[str, str]]]:
        """(parameter columns, metric declarations, finished rows) of a results directory."""
        import csv
        import json
        try:
            cols = json.loads((d / "metadata.json").read_text())["columns"]
            with (d / "runs.csv").open(newline="") as f:
                return cols["params"], cols["metrics"], list(csv.DictReader(f))
        except (OSError, ValueError, KeyError):
            return [], {}, []

    def collect(self):
        docs = self.docs()
        exp = ["experiment"]
        up = GaugeMetricFamily("wearlab_experiment_running", "1 for each experiment running now", labels=exp)
        done = GaugeMetricFamily("wearlab_runs_done", "runs finished so far", labels=exp)
        total = GaugeMetricFamily("wearlab_runs", "runs the experiment has in all", labels=exp)
        failed = GaugeMetricFamily("wearlab_runs_failed", "runs that failed so far", labels=exp)
        current = GaugeMetricFamily("wearlab_run_info", "the run in progress (value: its number)",
                                    labels=[*exp, "cell"])
        run_s = GaugeMetricFamily("wearlab_run_elapsed_seconds", "time since the run in progress began", labels=exp)
        lk = [*exp, "link", "direction"]
        rate = GaugeMetricFamily("wearlab_link_rate_bits_per_second", "configured rate (0: unlimited)", labels=lk)
        delay = GaugeMetricFamily("wearlab_link_delay_seconds", "configured one-way delay", labels=lk)
        loss = GaugeMetricFamily("wearlab_link_loss_ratio", "configured random loss (0..1)", labels=lk)
        down = GaugeMetricFamily("wearlab_link_down", "1 while the direction carries nothing", labels=lk)
        sent_b = CounterMetricFamily("wearlab_link_sent_bytes", "bytes the direction's qdisc sent", labels=lk)
        sent_p = CounterMetricFamily("wearlab_link_sent_packets", "packets the direction's qdisc sent", labels=lk)
        drops = CounterMetricFamily("wearlab_link_dropped_packets", "packets the direction's qdisc dropped", labels=lk)
        backlog = GaugeMetricFamily("wearlab_link_backlog_bytes", "bytes waiting in the direction's qdisc", labels=lk)
        changes = CounterMetricFamily("wearlab_link_changes", "link changes applied (timeline, live, handover)",
                                      labels=[*exp, "link", "source"])
        last_change = GaugeMetricFamily("wearlab_link_last_change_timestamp_seconds",
                                        "when the link last changed (Grafana annotations: changes() of it)",
                                        labels=[*exp, "link"])
        st = [*exp, "stream"]
        owd = GaugeMetricFamily("wearlab_stream_owd_seconds", "median one-way delay over the last second", labels=st)
        owd_max = GaugeMetricFamily("wearlab_stream_owd_max_seconds", "largest one-way delay in the last second",
                                    labels=st)
        goodput = GaugeMetricFamily("wearlab_stream_goodput_bits_per_second", "delivered over the last second",
                                    labels=st)
        hist = HistogramMetricFamily("wearlab_stream_owd_histogram_seconds", "one-way delay of the run's messages",
                                     labels=st)
        delivered = CounterMetricFamily("wearlab_stream_delivered_bytes", "message bytes delivered in the run",
                                        labels=st)
        queue = GaugeMetricFamily("wearlab_proxy_socket_queue_bytes", "the phone's TCP socket queues",
                                  labels=[*exp, "queue"])
        vq = GaugeMetricFamily("wearlab_proxy_virtual_queue_bytes", "the relay's virtual queue (mitigation)", labels=exp)
        vq_bw = GaugeMetricFamily("wearlab_proxy_bt_rate_estimate_bits_per_second", "the relay's BW estimate",
                                  labels=exp)
        throttled = GaugeMetricFamily("wearlab_proxy_throttled", "1 while the relay throttles server->phone",
                                      labels=exp)
        radio = GaugeMetricFamily("wearlab_radio_state", "1 for the BT radio's current state", labels=[*exp, "node", "state"])
        per_run = HistogramMetricFamily("wearlab_run_duration_seconds", "per-run durations the workload and node "
                                        "kinds report (metric: e.g. wire_connect_s, handover_p1_s), by cell",
                                        labels=[*exp, "metric", "cell"])
        for d in docs:
            params, declared, rows = self.run_rows(d["_dir"])
            by_cell: dict[tuple[str, str], list[float]] = {}
            for r in rows:
                if r.get("status") != "ok":
                    continue
                cell = " ".join(f"{p}={r[p]}" for p in params if r.get(p) not in (None, ""))
                for m, decl in declared.items():
                    if decl.get("unit") == "s":
                        v = _num(r.get(m), float)
                        if v is not None:
                            by_cell.setdefault((m, cell), []).append(v)
            for (m, cell), values in by_cell.items():
                buckets = [(repr(le), sum(1 for v in values if v <= le)) for le in RUN_BUCKETS] + [("+Inf", len(values))]
                per_run.add_metric([str(d.get("experiment", "?")), m, cell], buckets, sum(values))
        for d in docs:
            e = str(d.get("experiment", "?"))
            up.add_metric([e], 1)
            p = d.get("progress") or {}
            if "total" in p:
                total.add_metric([e], p["total"])
                done.add_metric([e], p.get("done", 0))
                failed.add_metric([e], p.get("failed", 0))
            if "run" in p:
                current.add_metric([e, str(p.get("cell", ""))], p["run"])
            if d.get("run_s") is not None:
                run_s.add_metric([e], d["run_s"])
            for direction, s in (d.get("links") or {}).items():
                link = "-".join(sorted(direction.split("->")))
                labels = [e, link, direction]
                rate.add_metric(labels, _num(s.get("rate"), units.parse_rate) or 0)
                delay.add_metric(labels, _num(s.get("delay"), units.parse_duration) or 0)
                lp = s.get("loss")
                loss.add_metric(labels, (_num(lp, units.parse_percent) or 0) / 100 if isinstance(lp, str) else 0)
                down.add_metric(labels, 1 if s.get("down") else 0)
            for direction, c in (d.get("link_counters") or {}).items():
                labels = [e, "-".join(sorted(direction.split("->"))), direction]
                sent_b.add_metric(labels, c.get("bytes", 0))
                sent_p.add_metric(labels, c.get("packets", 0))
                drops.add_metric(labels, c.get("drops", 0))
                backlog.add_metric(labels, c.get("backlog_bytes", 0))
            ch = d.get("changes") or {}
            for c in ch.get("changes", []):
                changes.add_metric([e, c["link"], c["source"]], c["count"])
            for link, t_ns in (ch.get("last_change_ns") or {}).items():
                last_change.add_metric([e, link], t_ns / 1e9)
            for name, v in (d.get("workload") or {}).items():
                if name == "phone queues":
                    queue.add_metric([e, "receive"], v.get("recv_q", 0))
                    queue.add_metric([e, "send"], v.get("send_q", 0))
                    continue
                if name == "virtual queue":
                    vq.add_metric([e], v["vq_bytes"])
                    vq_bw.add_metric([e], v["bw_bps"])
                    throttled.add_metric([e], v["throttled"])
                    continue
                labels = [e, name]
                for fam, key in ((owd, "owd_s"), (owd_max, "owd_max_s"), (goodput, "goodput_bps")):
                    if v.get(key) is not None:
                        fam.add_metric(labels, v[key])
                h = v.get("owd_hist")
                if h:
                    buckets = [(repr(le), n) for le, n in zip(h["le"], h["counts"])] + [("+Inf", h["count"])]
                    hist.add_metric(labels, buckets, h["sum"])
                    delivered.add_metric(labels, h.get("bytes", 0))
            for node, state in (d.get("nodes") or {}).items():
                if state and "radio" in state:
                    for s_ in RadioState:
                        radio.add_metric([e, node, s_.value], 1 if state["radio"] == s_ else 0)
        yield from (up, done, total, failed, current, run_s, rate, delay, loss, down, sent_b, sent_p, drops, backlog,
                    changes, last_change, owd, owd_max, goodput, hist, delivered, queue, vq, vq_bw, throttled, radio,
                    per_run)


def registry(results: Path):
    from prometheus_client import CollectorRegistry
    reg = CollectorRegistry()
    reg.register(LiveRuns(results))
    return reg


def serve(results: Path, host: str, port: int):
    """Serve /metrics in a background thread; returns (server, thread)."""
    from prometheus_client import start_http_server
    return start_http_server(port, addr=host, registry=registry(results))
