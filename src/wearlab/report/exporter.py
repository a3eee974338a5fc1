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

from wearlab.model.choices import RadioState
from wearlab.report.livedoc import LiveDoc, live_runs, read_record

# Buckets of per-run durations (connect, TLS handshake, transfer, handover phases ...), seconds.
RUN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def _value(text: str | None) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


class LiveRuns(Collector):
    """Metrics of every live run under a results directory."""

    def __init__(self, results: Path):
        self.results = results

    def docs(self) -> list[LiveDoc]:
        return [doc for doc in map(read_record, live_runs(self.results)) if not doc.error]

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
            params, declared, rows = self.run_rows(Path(d.results_dir))
            by_cell: dict[tuple[str, str], list[float]] = {}
            for r in rows:
                if r.get("status") != "ok":
                    continue
                cell = " ".join(f"{p}={r[p]}" for p in params if r.get(p) not in (None, ""))
                for m, decl in declared.items():
                    if decl.get("unit") == "s":
                        v = _value(r.get(m))
                        if v is not None:
                            by_cell.setdefault((m, cell), []).append(v)
            for (m, cell), values in by_cell.items():
                buckets = [(repr(le), sum(1 for v in values if v <= le)) for le in RUN_BUCKETS] + [("+Inf", len(values))]
                per_run.add_metric([d.experiment, m, cell], buckets, sum(values))
        for d in docs:
            e = d.experiment
            up.add_metric([e], 1)
            p = d.progress
            if p.total is not None:
                total.add_metric([e], p.total)
                done.add_metric([e], p.done)
                failed.add_metric([e], p.failed)
            if p.run is not None:
                current.add_metric([e, p.cell or ""], p.run)
            if d.run_s is not None:
                run_s.add_metric([e], d.run_s)
            for ld in d.links:
                labels = [e, ld.link, ld.direction]
                shape = ld.shape
                rate.add_metric(labels, shape.rate_bps or 0)
                delay.add_metric(labels, shape.delay_s)
                # Gilbert-Elliott loss has no single probability: 0 as before.
                loss.add_metric(labels, shape.loss.p / 100 if shape.loss is not None and shape.loss.model == "random"
                                else 0)
                down.add_metric(labels, 1 if ld.down else 0)
                if ld.counters is not None:
                    sent_b.add_metric(labels, ld.counters.bytes)
                    sent_p.add_metric(labels, ld.counters.packets)
                    drops.add_metric(labels, ld.counters.drops)
                    backlog.add_metric(labels, ld.counters.backlog_bytes)
            for c in d.changes.changes:
                changes.add_metric([e, c.link, c.source], c.count)
            for link, t_ns in d.changes.last_change_ns.items():
                last_change.add_metric([e, link], t_ns / 1e9)
            w = d.workload
            if w.phone_queues is not None:
                queue.add_metric([e, "receive"], w.phone_queues.receive_bytes)
                queue.add_metric([e, "send"], w.phone_queues.send_bytes)
            if w.virtual_queue is not None:
                vq.add_metric([e], w.virtual_queue.queue_bytes)
                vq_bw.add_metric([e], w.virtual_queue.bt_rate_bps)
                throttled.add_metric([e], 1 if w.virtual_queue.throttled else 0)
            for st in w.streams:
                labels = [e, st.key]
                for fam, v in ((owd, st.owd_s), (owd_max, st.owd_max_s), (goodput, st.goodput_bps)):
                    if v is not None:
                        fam.add_metric(labels, v)
                h = st.owd_hist
                hist.add_metric(labels, [(repr(le), n) for le, n in zip(h.le, h.counts)] + [("+Inf", h.count)], h.sum)
                delivered.add_metric(labels, h.bytes)
            for node, state in d.nodes.items():
                if state.radio is not None:
                    for s_ in RadioState:
                        radio.add_metric([e, node, s_.value], 1 if state.radio == s_ else 0)
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
