"""Seed 003's four app workloads (`app:` on a stream, workloads/apps.py) expand to the stream
parameters the paper's §5.1 gives, at plan time, and a parameter written beside `app:` is a plan
error at file:line:field. Host only, no run (~1 s)."""

from __future__ import annotations

import pytest

from conftest import wearlab
from wearlab.catalog import CATALOG
from wearlab.model.experiment_file import load_experiment
from wearlab.workloads import apps
from wearlab.workloads.streams import Stream

TOPOLOGY = """topology:
  nodes: {watch: {role: wearable}, phone: {role: phone, kind: host}, ap: {role: ap}, server: {role: server}}
  links:
    - {between: [watch, phone], profile: bt-classic}
    - {between: [watch, ap], profile: wifi-2g4-good}
    - {between: [phone, ap], profile: wifi-5g-good}
    - {between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}
"""


def _experiment(write_yaml, workload_extra: str = "", scale: str = "1"):
    text = (f"name: apps\n{TOPOLOGY}workload:\n  kind: stream\n  client: watch\n  server: server\n  path: phone\n"
            f"  app_scale: {scale}\n{workload_extra}matrix:\n  app: [download, video, message, camera]\n")
    return write_yaml("apps.yaml", text)


def test_the_papers_four_workloads_at_full_scale(write_yaml):
    cells = {c["app"]: c for c in load_experiment(_experiment(write_yaml), CATALOG).cells()}
    # §5.1: a 16 MB app download, bulk, down; its duration does not apply (it ends with its bytes).
    d = cells["download"]
    assert (d["pattern"], d["direction"], d["bytes"], d["rate"], d["duration"]) == ("bulk", "down", 16_000_000, "", "")
    # a 2-min video: CBR for 120 s, with a player (the rate and buffer are ASSUMPTIONS: 1.5 Mbit/s, 2 s)
    v = cells["video"]
    assert (v["pattern"], v["duration"], v["rate"], v["playout_buffer"], v["bytes"]) == ("cbr", 120.0, 1_500_000, 2.0, "")
    # one short message: 200 B at 1600 bit/s is one message per 200 * 8 / 1600 = 1 s, for 1 s
    m = cells["message"]
    assert m["pattern"] == "cbr" and m["message_size"] * 8 / m["rate"] == pytest.approx(1.0)
    assert m["duration"] == 1.0
    # a 150 s camera stream at 150 kbit/s (the tinyCam stream of 003-handover-reactive.yaml)
    c = cells["camera"]
    assert (c["pattern"], c["duration"], c["rate"], c["message_size"]) == ("cbr", 150.0, 150_000, 3000)


def test_app_scale_shortens_sizes_and_durations_but_not_a_message(write_yaml):
    cells = {c["app"]: c for c in load_experiment(_experiment(write_yaml, scale="1/16"), CATALOG).cells()}
    assert cells["download"]["bytes"] == 1_000_000            # 16 MB / 16
    assert cells["video"]["duration"] == pytest.approx(7.5)   # 120 s / 16
    assert cells["camera"]["duration"] == pytest.approx(9.375)
    assert cells["message"]["duration"] == 1.0                # a message is as long in every tier
    assert cells["video"]["rate"] == 1_500_000                # rates are not scaled


def test_every_apps_qoe_metric_is_a_stream_metric():
    names = {m.name for m in Stream.metrics}
    assert {a.qoe_metric for a in apps.APPS} <= names
    assert [a.name for a in apps.APPS] == ["download", "video", "message", "camera"]


@pytest.mark.parametrize("extra,line,field", [("  bytes: 1MB\n", 15, "workload.bytes"),
                                               ("  pattern: cbr\n", 15, "workload.pattern")])
def test_a_parameter_beside_app_is_a_plan_error(write_yaml, extra, line, field):
    path = _experiment(write_yaml, extra)
    res = wearlab("plan", str(path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{path}:{line}: {field}" in res.stderr and "app_scale" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("value", ["0", "1.5", "2/1", "many", "1/0"])
def test_app_scale_out_of_range_is_refused(value):
    with pytest.raises(ValueError):
        apps.scale(value)


def test_no_app_leaves_the_stream_as_written():
    cell = {"app": "none", "pattern": "bulk", "bytes": 5}
    assert apps.expand(cell) == cell
