"""The Prometheus exporter turns a live run's live.json into metrics named by Prometheus
conventions, parseable by prometheus_client's own parser; nothing when nothing runs."""

from __future__ import annotations

import json
import math
import subprocess
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from conftest import need_tool
from synthetic_results import LIVE_NODES
from wearlab.cli import main
from wearlab.report.exporter import registry, run_family
from wearlab.report.results import RunsCsv
from wearlab.catalog import CATALOG
from wearlab.model.columns import Metric

LIVE = {
    "experiment": "demo", "run_s": 12.5,
    "progress": {"total": 4, "done": 1, "failed": 0, "run": 2, "cell": "pattern=cbr"},
    "workload": {"streams": [{"role": "main", "direction": "down", "owd_s": 0.5, "owd_max_s": 0.9, "goodput_bps": 1.0e6,
                              "messages": 10, "owd_hist": {"le": [0.1, 1.0], "counts": [3, 9], "sum": 4.2, "count": 10,
                                                           "bytes": 10000}}],
                 "phone_queues": {"receive_bytes": 1000, "send_bytes": 20}},
    "nodes": LIVE_NODES,
    "links": [{"src": "watch", "dst": "phone", "shape": {"rate_bps": 1_100_000, "delay_s": 0.015, "loss": {"p": 1.0}}},
              {"src": "phone", "dst": "watch", "shape": {"rate_bps": 1_100_000, "delay_s": 0.015}, "down": True,
               "counters": {"bytes": 5000, "packets": 5, "drops": 1, "backlog_bytes": 300}}],
    "changes": {"changes": [{"link": "watch-phone", "source": "live", "count": 2}],
                "last_change_ns": {"watch-phone": 1_700_000_000_000_000_000}},
}


def live_dir(tmp_path):
    c = tmp_path / "demo" / "20261122T000000Z" / "control"
    c.mkdir(parents=True)
    (c / "heartbeat").write_text(json.dumps({"t_ns": time.time_ns(), "pid": 1}))
    (c / "live.json").write_text(json.dumps(LIVE))
    return tmp_path


def samples(results) -> dict[tuple, float]:
    text = generate_latest(registry(results)).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_of_a_live_run(tmp_path):
    got = samples(live_dir(tmp_path))
    e = ("experiment", "demo")
    assert got[("wearlab_runs_done_total", (e,))] == 1 and got[("wearlab_runs", (e,))] == 4
    pw = (("direction", "phone->watch"), e, ("link", "phone-watch"))
    wp = (("direction", "watch->phone"), e, ("link", "phone-watch"))
    assert got[("wearlab_link_rate_bytes_per_second", wp)] == 1_100_000 / 8
    assert abs(got[("wearlab_link_delay_seconds", wp)] - 0.015) < 1e-12
    assert abs(got[("wearlab_link_loss_ratio", wp)] - 0.01) < 1e-12
    assert got[("wearlab_link_down", pw)] == 1
    assert got[("wearlab_link_sent_bytes_total", pw)] == 5000
    assert got[("wearlab_link_dropped_packets_total", pw)] == 1
    st = (e, ("stream", "main down"))
    assert got[("wearlab_stream_owd_seconds", st)] == 0.5
    assert got[("wearlab_stream_message_owd_seconds_bucket", (e, ("le", "1.0"), ("stream", "main down")))] == 9
    assert got[("wearlab_stream_message_owd_seconds_count", st)] == 10
    assert got[("wearlab_radio_state", (e, ("node", "watch"), ("state", "sniff")))] == 1
    w = (e, ("node", "watch"))
    assert got[("wearlab_interface_active", (*w[:1], ("interface", "wifi"), w[1]))] == 1
    assert got[("wearlab_interface_active", (*w[:1], ("interface", "bt"), w[1]))] == 0
    assert got[("wearlab_interface_switches_total", w)] == 3
    assert got[("wearlab_interface_backlog_bytes", (*w, ("side", "phone")))] == 19067
    assert got[("wearlab_interface_wifi_bytes_per_second", w)] == 300_000 / 8
    mp = lambda path, d: (("direction", d), e, ("node", "watch"), ("path", path))  # noqa: E731
    assert got[("wearlab_multipath_bytes_total", mp("wifi", "down"))] == 700_000
    assert got[("wearlab_multipath_bytes_total", mp("bt", "up"))] == 200
    assert got[("wearlab_link_changes_total", (e, ("link", "watch-phone"), ("source", "live")))] == 2


def test_the_run_in_progress_is_an_info_gauge_of_one_beside_its_number(tmp_path):
    got = samples(live_dir(tmp_path))
    e = ("experiment", "demo")
    assert got[("wearlab_run_info", (("cell", "pattern=cbr"), e))] == 1
    assert got[("wearlab_run_number", (e,))] == 2


# One metric of each unit, as a workload declares them (names as in http-get and stream).
PER_RUN = (Metric("wire_connect_s", "s", doc="d"), Metric("bytes_up_total", "B", doc="d"),
           Metric("down_goodput_bps", "bit/s", better="higher", doc="d"), Metric("down_stall_share", "ratio", doc="d"),
           Metric("http_code", "count", better="none", doc="d"), Metric("packets_up_total", "packets", doc="d"))


def with_runs(results, metrics, rows: list[dict]):
    """The live run's results directory gets the metadata's declarations and finished rows."""
    d = results / "demo" / "20261122T000000Z"
    (d / "metadata.json").write_text(json.dumps({"experiment": "demo", "columns": {
        "params": ["pattern"], "metrics": {m.name: m.describe() for m in metrics}}}))
    runs = RunsCsv(d / "runs.csv", ["run", "pattern", "status", *(m.name for m in metrics)],
                   units={m.name: m.unit for m in metrics})
    for r in rows:
        runs.append(r)
    runs.close()
    return results


def test_every_declared_metric_is_a_histogram_in_base_units(tmp_path):
    """Per declared metric, whatever its unit: the runs that succeeded, by cell, in base units
    (bit/s exported as bytes per second: /8)."""
    ok = [{"wire_connect_s": 0.030 + i / 1000, "bytes_up_total": 700 + i, "down_goodput_bps": 1.0e6 + i,
           "down_stall_share": 0.1 * i, "http_code": 200, "packets_up_total": 9 + i} for i in range(3)]
    rows = [{"run": i, "pattern": "cbr", "status": "ok", **v} for i, v in enumerate(ok)]
    rows.append({"run": 9, "pattern": "cbr", "status": "failed", **ok[0]})
    got = samples(with_runs(live_dir(tmp_path), PER_RUN, rows))
    lab = (("cell", "pattern=cbr"), ("experiment", "demo"))
    for metric, family, base in (("wire_connect_s", "wearlab_run_wire_connect_seconds", 1),
                                 ("bytes_up_total", "wearlab_run_bytes_up_total_bytes", 1),
                                 ("down_goodput_bps", "wearlab_run_down_goodput_bytes_per_second", 1 / 8),
                                 ("down_stall_share", "wearlab_run_down_stall_share_ratio", 1),
                                 ("http_code", "wearlab_run_http_code", 1),
                                 ("packets_up_total", "wearlab_run_packets_up_total_packets", 1)):
        assert got[(family + "_count", lab)] == 3, family                     # the failed run is left out
        assert got[(family + "_sum", lab)] == pytest.approx(sum(v[metric] for v in ok) * base, rel=1e-6)
        buckets = sorted((float(dict(k[1])["le"]), n) for k, n in got.items() if k[0] == family + "_bucket")
        assert [n for _, n in buckets] == sorted(n for _, n in buckets) and buckets[-1] == (math.inf, 3)
        # each value is counted in the first bucket at or above it
        for v in ok:
            first = min(le for le, _ in buckets if le >= v[metric] * base * (1 - 1e-9))
            assert dict(buckets)[first] >= 1
    assert not [k for k in got if k[0].startswith("wearlab_run_duration_seconds")]


def test_every_declared_metric_of_every_kind_passes_promtool(tmp_path):
    """Names, units and types of everything the exporter can emit, checked by Prometheus' own linter."""
    promtool = need_tool("promtool")
    declared = {m.name: m for m in [*(m for w in CATALOG.workloads.values() for m in w.metrics),
                                    *(m for k in CATALOG.node_kinds.values() for m in k.metrics)]}
    results = with_runs(live_dir(tmp_path), declared.values(),
                        [{"run": 1, "pattern": "cbr", "status": "ok", **{m: 1 for m in declared}}])
    text = generate_latest(registry(results)).decode()
    assert sum(1 for n in declared if f"{run_family(n, declared[n].unit)}_count{{" in text) == len(declared)
    lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), lint.stdout + lint.stderr


def test_nothing_running_gives_no_samples_and_a_stale_run_is_not_live(tmp_path):
    assert not [k for k in samples(tmp_path) if k[0].startswith("wearlab_")]
    d = live_dir(tmp_path)
    (d / "demo" / "20261122T000000Z" / "control" / "heartbeat").write_text(json.dumps({"t_ns": 0, "pid": 1}))
    assert not [k for k in samples(d) if k[0] == "wearlab_experiment_running"]


def test_cli_once(tmp_path, capsys):
    assert main(["exporter", "--once", "--results", str(live_dir(tmp_path))]) == 0
    assert "wearlab_stream_owd_seconds" in capsys.readouterr().out
    assert main(["exporter", "--listen", "nope"]) == 2


# What a live stream run through the phone's relay (virtual queue on), with the watch's BT radio and
# a timeline change, has samples of; and per-run histograms declared before any row is written.
LIVE_FAMILIES = {
    "wearlab_experiment_running", "wearlab_runs", "wearlab_runs_done_total", "wearlab_runs_failed_total",
    "wearlab_run_info", "wearlab_run_number", "wearlab_run_elapsed_seconds",
    "wearlab_link_rate_bytes_per_second", "wearlab_link_delay_seconds", "wearlab_link_loss_ratio", "wearlab_link_down",
    "wearlab_link_sent_bytes_total", "wearlab_link_sent_packets_total", "wearlab_link_dropped_packets_total",
    "wearlab_link_backlog_bytes", "wearlab_link_changes_total", "wearlab_link_last_change_timestamp_seconds",
    "wearlab_stream_owd_seconds", "wearlab_stream_owd_max_seconds", "wearlab_stream_goodput_bytes_per_second",
    "wearlab_stream_message_owd_seconds_bucket", "wearlab_stream_delivered_bytes_total",
    "wearlab_proxy_socket_queue_bytes", "wearlab_proxy_virtual_queue_bytes",
    "wearlab_proxy_bt_rate_estimate_bytes_per_second", "wearlab_proxy_throttled", "wearlab_radio_state",
}
DECLARED_HISTOGRAMS = ("wearlab_run_down_owd_median_seconds", "wearlab_run_down_goodput_bytes_per_second",
                       "wearlab_run_down_stall_share_ratio", "wearlab_run_down_bytes", "wearlab_run_handover_p1_seconds")


@pytest.mark.root
def test_scraping_a_running_experiment(tmp_path):
    """During a real run (`wearlab run` on this host: in a UML guest when the kernel lacks netem;
    promtool is a host tool): the scrape passes `promtool check metrics` and holds the families of
    everything running; the configured link values, counters that grow with the traffic, and a
    stream's OWD no shorter than the path's physics. Ctrl-C then stops the run."""
    import signal

    from conftest import ROOT, WEARLAB

    promtool = need_tool("promtool")
    (tmp_path / "exp.yaml").write_text(f"""
name: scrape
topology: {ROOT / "topologies" / "cproxy.yaml"}
repetitions: 1
nodes:
  watch: {{radio: bt, uplink_keepalive: true}}
  phone: {{mitigation: virtual-queue}}
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 500kbit, message_size: 1000, duration: 60s}}
timeline:
  - {{at: 1s, link: phone-ap, set: {{delay: 5ms}}}}
""")
    out = tmp_path / "r"
    log = (tmp_path / "run.log").open("w")
    run = subprocess.Popen([*WEARLAB, "run", str(tmp_path / "exp.yaml"), "--out", str(out)], cwd=ROOT,
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300      # the guest boots first
        got: dict = {}
        while time.monotonic() < deadline:
            assert run.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            got = samples(out)
            sent = {k: v for k, v in got.items() if k[0] == "wearlab_link_sent_bytes_total"
                    and ("direction", "phone->watch") in k[1]}
            if sent and list(sent.values())[0] > 100_000 and LIVE_FAMILIES <= {k[0] for k in got}:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"missing in the metrics: {LIVE_FAMILIES - {k[0] for k in got}}; sent: {got}")
        # What Prometheus would scrape, as `wearlab exporter` serves it, through Prometheus' linter.
        scrape = subprocess.run([*WEARLAB, "exporter", "--results", str(out), "--once"], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert scrape.returncode == 0, scrape.stderr
        lint = subprocess.run([promtool, "check", "metrics"], input=scrape.stdout, capture_output=True, text=True)
        assert lint.returncode == 0, lint.stdout + lint.stderr
        got = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(scrape.stdout) for s in fam.samples}
        assert LIVE_FAMILIES <= {k[0] for k in got}, LIVE_FAMILIES - {k[0] for k in got}
        for name in DECLARED_HISTOGRAMS:
            assert f"# TYPE {name} histogram" in scrape.stdout, name
        e = ("experiment", "scrape")
        pw = (("direction", "phone->watch"), e, ("link", "phone-watch"))
        assert got[("wearlab_link_rate_bytes_per_second", pw)] == 1_100_000 / 8
        # server -> ap -> phone -> watch: 10 + 2 (5 after the timeline's change) + 15 ms one way,
        # plus serialisation
        owd = [v for k, v in got.items() if k[0] == "wearlab_stream_owd_seconds"]
        assert owd and 0.027 <= owd[0] <= 1.0
        # 500 kbit/s of messages: the last second's goodput, in bytes per second, near 62.5 kB/s
        goodput = [v for k, v in got.items() if k[0] == "wearlab_stream_goodput_bytes_per_second"]
        assert goodput and 30_000 <= goodput[0] <= 100_000
        assert got[("wearlab_runs", (e,))] == 1 and got[("wearlab_run_number", (e,))] == 1
        assert got[("wearlab_link_changes_total", (e, ("link", "phone-ap"), ("source", "timeline")))] == 1
        assert sum(v for k, v in got.items() if k[0] == "wearlab_radio_state") == 1     # one state at a time
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)
        try:
            rc = run.wait(timeout=180)
        except subprocess.TimeoutExpired:
            run.kill()
            subprocess.run([*WEARLAB, "clean"], cwd=ROOT, capture_output=True, timeout=300)
            raise
        finally:
            log.close()
    assert rc == 130, (tmp_path / "run.log").read_text()[-3000:]     # interrupted as by Ctrl-C
