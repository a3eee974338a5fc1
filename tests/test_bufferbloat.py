"""CPROXY bufferbloat (seed 003 section 4.2) and its virtual-queue mitigation (section 4.3), with the
project's own experiment file: the server sends CBR 1.5 Mbit/s to the watch through the phone's
relay with an 8 MB receive-buffer ceiling, over the BT profile (~1.1 Mbit/s).

Physics of the unmitigated case: the phone receives faster than BT drains, so the message sent at
time t leaves BT only after everything sent before it: OWD(t) ~ t * (rate / goodput - 1). The
buffer (8 MB) is not reached in the run, so that line is the whole story; its median is OWD at D/2.
"""

from __future__ import annotations

import csv
import statistics

import pytest

from conftest import ROOT, wearlab

pytestmark = pytest.mark.netem

# s: the queue grows ~0.43 s per second (1.5 / 1.05 Mbit/s - 1, docs/phone-proxy.md), so the OWD
# passes 10 s by the end and the median, the OWD at D/2, is ~5.1 s: above the 3 s asserted below,
# and above 3x the virtual queue's ~1.4 s (which does not grow with D: the controller bounds the
# phone's part, the server's send buffer d1), as the vq test asserts - 3.7x at 24 s
# (30 s gave 4.7x; at 20 s it would be 3.1x, too close).
DURATION = 24.0
RATE = 1.5e6      # bit/s, the experiment's CBR rate (application bytes)


@pytest.fixture(scope="module")
def bufferbloat(tmp_path_factory):
    out = tmp_path_factory.mktemp("bufferbloat")
    res = wearlab("run", str(ROOT / "experiments" / "bufferbloat.yaml"), "--out", str(out),
                  "--set", f"duration={DURATION:g}s", "--set", "pattern=cbr", "--set", "phone.rmem_max=8291456",
                  timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    d = out / "bufferbloat" / "latest"
    with (d / "runs.csv").open() as f:
        rows = {r["phone.mitigation"]: r for r in csv.DictReader(f)}
    with (d / "series" / "owd.csv").open() as f:
        owd = list(csv.DictReader(f))
    assert set(rows) == {"none", "virtual-queue"} and all(r["status"] == "ok" for r in rows.values()), rows
    return rows, owd, d


def _owd_series(owd: list[dict], mitigation: str) -> list[tuple[float, float]]:
    return [(float(o["t_send_s"]), float(o["owd_s"])) for o in owd if o.get("phone.mitigation") == mitigation]


def test_unmitigated_owd_grows_to_many_seconds(bufferbloat):
    rows, owd, _ = bufferbloat
    r = rows["none"]
    goodput = float(r["down_goodput_bps"])
    expected = DURATION / 2 * (RATE / goodput - 1)          # OWD of the middle message
    median = float(r["down_owd_median_s"])
    assert 0.8 * expected <= median <= 1.2 * expected + 0.5, (median, expected, goodput)
    assert median >= 3.0
    series = _owd_series(owd, "none")
    first = statistics.median(v for t, v in series if t < DURATION / 3)
    last = statistics.median(v for t, v in series if t > 2 * DURATION / 3)
    assert last >= first + 0.5 * (2 * DURATION / 3) * (RATE / goodput - 1)   # rising, at the queue's pace


def test_phone_receive_buffer_holds_most_of_the_delay(bufferbloat):
    r = bufferbloat[0]["none"]
    d = {i: float(r[f"d{i}_median_s"]) for i in (1, 2, 3, 4)}
    total = float(r["down_owd_median_s"])
    assert d[2] >= 0.6 * total, d                          # the paper's d2: 26.1-28.6 of 27.9-30.1 s
    assert d[2] > max(d[1], d[3], d[4]), d
    # d1 holds the path (~12 ms) and what waits in the server's send buffer while the phone's
    # autotuned window is still small; d3 up to one app buffer (64 KiB) at BT's rate, 0.5 s.
    assert 0 <= d[1] <= 0.3 * total and d[4] <= 0.3 * total, d
    assert d[3] <= 65536 * 8 / 1.0e6 + 0.05, d


def test_virtual_queue_keeps_owd_low_at_the_same_goodput(bufferbloat):
    rows, _, d = bufferbloat
    base, vq = rows["none"], rows["virtual-queue"]
    # The phone's part (receive buffer, relay, BT) is what the controller bounds: the virtual queue
    # oscillates between Q_LB and Q_UB = 0.4..0.7 s of BT at T = 1 s, plus BT's own 50-packet
    # queue (0.55 s). Throttled, the server's TCP keeps the rest in its send buffer (d1, ~0.7 s
    # here), and the sender is paced by it.
    phone_part = float(vq["d23_median_s"]) + float(vq["d4_median_s"])
    assert phone_part <= 0.7 + 0.55, vq
    assert float(vq["down_owd_median_s"]) <= 2.0
    assert float(vq["down_owd_median_s"]) * 3 <= float(base["down_owd_median_s"])
    assert float(vq["down_goodput_bps"]) >= 0.95 * float(base["down_goodput_bps"])
    # the controller engaged and recorded its estimate: BW near what BT carries
    with (d / "series" / "vq.csv").open() as f:
        series = list(csv.DictReader(f))
    assert any(int(float(s["throttled"])) for s in series)
    bw = statistics.median(float(s["bw_bps"]) for s in series if float(s["bw_bps"]) > 0)
    goodput = float(vq["down_goodput_bps"])
    assert 0.8 * goodput <= bw <= 1.5 * goodput, (bw, goodput)
