"""Stream workloads obey the link's physics: a CBR message's one-way delay is the link's delay
plus its serialisation, its goodput is its rate; a bulk stream fills the link."""

from __future__ import annotations

import csv
import math
import statistics

import pytest

from conftest import timing_bound, wearlab

pytestmark = pytest.mark.netem

DELAY = 0.020          # one-way, s
RATE = 10_000_000      # link, bit/s
FRAME_OVERHEAD = 66    # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12



def run(tmp_path, workload: str, matrix: str = "") -> tuple[list[dict], list[dict]]:
    (tmp_path / "exp.yaml").write_text(f"""
name: streams
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 10Mbit, delay: 20ms}}]
repetitions: 2
workload: {workload}
{matrix}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    d = tmp_path / "r" / "streams" / "latest"
    with (d / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    with (d / "series" / "owd.csv").open() as f:
        owd = list(csv.DictReader(f))
    assert rows and all(r["status"] == "ok" for r in rows), rows
    return rows, owd


def test_cbr_owd_is_delay_plus_serialisation_and_goodput_is_the_rate(tmp_path):
    # 2 s: 500 messages a run, one every 4 ms (0.2 % of the run, well inside the goodput's 2 % and
    # the count's 1 %); the application paces a CBR stream, so no TCP ramp-up enters either.
    size, rate, seconds = 1000, 2_000_000, 2
    rows, owd = run(tmp_path, f"{{kind: stream, pattern: cbr, client: watch, server: server, rate: 2Mbit, message_size: {size}, "
                              f"duration: {seconds}s}}", "matrix: {direction: [down, up]}")
    physics = DELAY + (size + FRAME_OVERHEAD) * 8 / RATE
    for r in rows:
        d = r["direction"]
        med = float(r[f"{d}_owd_median_s"])
        assert physics - 5e-5 <= med <= physics + timing_bound(physics), (d, med, physics)
        assert 0.98 * rate <= float(r[f"{d}_goodput_bps"]) <= 1.02 * rate
        # every message arrived, in order, none faster than light
        assert int(r[f"{d}_messages"]) == pytest.approx(seconds * rate / 8 / size, rel=0.01)
    assert min(float(o["owd_s"]) for o in owd) >= physics - 5e-5


def test_bulk_fills_the_link(tmp_path):
    rows, _ = run(tmp_path, "{kind: stream, pattern: bulk, client: watch, server: server, bytes: 3MB, direction: up}")
    for r in rows:
        wire = float(r["up_goodput_bps"]) * (1448 + FRAME_OVERHEAD) / 1448
        assert 0.93 * RATE <= wire <= 1.005 * RATE
        size = int(r["message_size"])
        assert int(r["up_bytes"]) == math.ceil(3_000_000 / size) * size  # whole messages, none lost


def test_messages_beside_a_download_wait_behind_it(tmp_path):
    rows, owd = run(tmp_path, "{kind: messages, client: watch, server: server, interval: 200ms, message_size: 200, "
                              "background: bulk, duration: 4s}")
    for r in rows:
        msg = float(r["msg_owd_median_s"])
        # Behind a saturating download the message waits for the queue ahead of it: more than the
        # bare link's delay, bounded by the link's buffer (netem's 1000 packets at 10 Mbit/s).
        assert DELAY < msg < DELAY + 1000 * 1514 * 8 / RATE
        assert 0.9 * RATE <= float(r["down_goodput_bps"]) * 1514 / 1448 <= 1.005 * RATE
    assert {o["stream"] for o in owd} == {"msg", "main"}
    assert statistics.median(float(o["owd_s"]) for o in owd if o["stream"] == "msg") > DELAY


def test_a_run_that_timed_out_mid_receive_leaves_the_next_run_whole(tmp_path):
    """A 3 MB download needs 3e6 x 8 / 10 Mbit/s = 2.4 s at least, more than the run's 1 s timeout:
    its run fails while the watch's agent is still receiving. The next run (20 kB: 16 ms at the
    link's rate plus a few 40 ms round trips) must be whole: before, it read the first run's late
    answer and "delivered no message"."""
    (tmp_path / "exp.yaml").write_text("""
name: streams
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 10Mbit, delay: 20ms}]
repetitions: 1
timeout: 1s
workload: {kind: stream, pattern: bulk, client: watch, server: server, direction: down}
matrix: {bytes: [3MB, 20kB]}
""")
    res = wearlab("run", str(tmp_path / "exp.yaml"), "--out", str(tmp_path / "r"), timeout=300)
    with (tmp_path / "r" / "streams" / "latest" / "runs.csv").open() as f:
        rows = {r["bytes"]: r for r in csv.DictReader(f)}
    big, small = rows["3000000"], rows["20000"]
    assert big["status"] != "ok" and "no answer in 1 s" in big["error"], (big, res.stdout + res.stderr)
    assert small["status"] == "ok", (small, res.stdout + res.stderr)
    # 20 kB from the first message's send to the last's arrival: at least its serialisation and
    # the one-way delay; at most a few round trips more (a 10-segment initial window: 2 flights).
    least = 20_000 * 8 / RATE + DELAY
    assert least <= float(small["down_transfer_s"]) <= least + 5 * 2 * DELAY, small
