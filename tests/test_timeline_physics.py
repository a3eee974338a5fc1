"""Timelines change links in place, on time: a CBR stream's one-way delay per message shows the
change at the moment the log says it happened, the log says it happened within 5 ms of its
scheduled time, and the qdisc was changed, not re-created (its counters span the whole run)."""

from __future__ import annotations

import csv
import json
import statistics

import pytest

from conftest import BUSY_SLACK_S, timing_bound, wearlab

pytestmark = pytest.mark.netem

SIZE = 100                 # bytes per message
LATE_MS_BUSY = 50          # a change's lateness on a busy machine (quiet target: bench_timeline)
FRAME = SIZE + 66          # on the wire: + Ethernet, IPv4, TCP with timestamps
RATE_LINK = 10_000_000
RATE_SLOW = 200_000



def test_delay_and_rate_changes_land_on_time_in_place(tmp_path):
    (tmp_path / "exp.yaml").write_text(f"""
name: timeline
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 10Mbit, delay: 20ms}}]
repetitions: 1
workload: {{kind: stream, client: watch, server: server, direction: down, pattern: cbr,
           rate: 80kbit, message_size: {SIZE}, duration: 6s}}
timeline:
  - {{at: 2s, link: watch-server, direction: server->watch, set: {{delay: 60ms}}}}
  - {{at: 4s, link: server-watch, direction: server->watch, set: {{rate: 200kbit}}}}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    d = tmp_path / "r" / "timeline" / "latest"
    with (d / "series" / "timeline.csv").open() as f:
        log = list(csv.DictReader(f))
    with (d / "series" / "owd.csv").open() as f:
        owd = [(float(r["t_send_s"]), float(r["owd_s"])) for r in csv.DictReader(f)]
    with (d / "runs.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    played = [r for r in log if r["source"] == "timeline"]
    assert [float(r["scheduled_s"]) for r in played] == [2.0, 4.0]
    assert int(row["link_changes"]) == 2
    for r in played:
        assert not r["error"]
        # The quiet-machine target (<= 5 ms) is bench/bench_timeline.py's, which fails when missed.
        # Here, perhaps beside a busy CPU, the guest's one vCPU may wait for the host scheduler:
        # a few of the guest's 10 ms ticks. That the change was in force from its logged time on
        # is what the OWDs below check, to the millisecond.
        assert 0 <= float(r["late_ms"]) <= LATE_MS_BUSY, (r["late_ms"], r["apply_ms"])
    assert [r for r in log if r["source"] == "reset"], "the link goes back to the topology after the run"

    ser_fast, ser_slow = FRAME * 8 / RATE_LINK, FRAME * 8 / RATE_SLOW
    phases = [(0.0, float(played[0]["t_s"]), 0.020, ser_fast),
              (float(played[0]["t_s"]), float(played[1]["t_s"]), 0.060, ser_fast),
              (float(played[1]["t_s"]), 6.0, 0.060, ser_slow)]
    for lo, hi, delay, ser in phases:
        physics = delay + ser
        inside = [o for t, o in owd if lo + 0.001 < t < hi - 0.001]
        assert len(inside) >= 0.9 * (hi - lo) * 100, (lo, hi, len(inside))
        med = statistics.median(inside)
        assert physics - 5e-5 <= med <= physics + timing_bound(physics), (lo, hi, med, physics)
        # Each change raises the delay, so no message of a phase may be faster than its physics:
        # the change took effect at the logged time, not later. (Above it, the guest's scheduling
        # puts a few messages some ms late: the bulk must still sit at the physics.)
        assert min(inside) >= physics - 5e-4, (lo, hi, min(inside), physics)
        assert sorted(inside)[int(0.9 * len(inside))] <= physics + ser + BUSY_SLACK_S, (lo, hi, physics)

    meta = json.loads((d / "metadata.json").read_text())
    before = {q["handle"]: q for q in meta["qdiscs_before"]["server"] if q.get("kind") == "netem"}
    after = {q["handle"]: q for q in meta["qdiscs_after"]["server"] if q.get("kind") == "netem"}
    assert before.keys() == after.keys() and before
    # One qdisc all along: its counters hold every message of the run (a re-created one would
    # count only what came after its last re-creation).
    assert sum(q["packets"] for q in after.values()) >= len(owd)
