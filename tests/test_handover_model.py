"""The handover's mobility model and predictor: log-distance RSSI, the Kalman filter, and the
live view's frame from a live.json."""

from __future__ import annotations

import math
import random

import pytest

from wearlab.nodes.handover import kalman, rssi_trace
from wearlab.report.top_view import render, sparkline
from wearlab.report.live_record import LiveDoc


def test_rssi_follows_log_distance_without_shadowing():
    tr = dict(rssi_trace(walk_start=5, speed=1.0, rssi_1m=-50, exponent=2.5, shadowing_db=0, rng=random.Random(1),
                         until=60))
    assert tr[0.0] == pytest.approx(-50) and tr[5.0] == pytest.approx(-50)
    # -85 dBm at d = 10^(35/25) = 25.1 m: 24.1 s of walking after t = 5 s
    t85 = min(t for t, r in tr.items() if r < -85)
    assert 5 + (10 ** (35 / 25) - 1) - 0.1 <= t85 <= 5 + (10 ** (35 / 25) - 1) + 0.1


def test_kalman_smooths_shadowing_and_lags_little():
    rng = random.Random(7)
    tr = rssi_trace(walk_start=0, speed=1.0, rssi_1m=-50, exponent=2.5, shadowing_db=2.0, rng=rng, until=30)
    smooth = kalman(tr, 4.0)
    truth = [-50 - 25 * math.log10(1 + t) for t, _ in tr]
    raw_err = sum((r - x) ** 2 for (_, r), x in zip(tr, truth)) / len(tr)
    smooth_err = sum((s - x) ** 2 for (_, s), x in zip(smooth[50:], truth[50:])) / len(truth[50:])
    assert smooth_err < 0.5 * raw_err
    t66 = next(t for t, x in smooth if x < -66)
    true66 = 10 ** (16 / 25) - 1                                 # 3.4 s
    assert true66 - 1.0 <= t66 <= true66 + 2.0


def test_live_frame_renders_what_it_is_given():
    from rich.console import Console
    console = Console(width=100, record=True)
    console.print(render(LiveDoc.model_validate({
        "experiment": "demo", "run_s": 3.0, "results_dir": "results/demo",
        "workload": {"streams": [{"role": "main", "direction": "down", "owd_s": 0.25, "owd_max_s": 0.5,
                                  "goodput_bps": 1e6, "messages": 10, "owd_30s": [0.1, 0.5],
                                  "owd_hist": {"le": [1.0], "counts": [10], "sum": 3.0, "count": 10}}]},
        "nodes": {"watch": {"radio": "sniff"}},
        "links": [{"src": "watch", "dst": "phone", "shape": {"delay_s": 0.015}, "down": True}]})))
    text = console.export_text()
    assert "250 ms" in text and "radio: sniff" in text and "DOWN" in text and "1.00 Mbit/s" in text
    assert sparkline([0, 1, 2]) == "▁▄█"
