"""`wearlab reproduce`'s estimate (run.estimate) against numbers worked out by hand from the plan: the
links' rates and delays, the sizes, durations and buffers, and the constants handed in."""

from __future__ import annotations

import pytest

from conftest import wearlab
from wearlab.catalog import CATALOG
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import plan
from wearlab.run.estimate import Constants, estimate

C = Constants(set_up_s=10.0, restart_s=5.0, per_run_s=0.5, measured="test")

FETCH = """
name: fetch
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 1Mbit, delay: 10ms}]
repetitions: 3
workload: {kind: http-get, client: watch, server: server}
matrix: {protocol: [http, https], size: [1KB, 100KB]}
"""


def test_a_fetch_is_its_round_trips_and_its_frames_at_the_rate(write_yaml):
    e = estimate(plan(load_experiment(write_yaml("fetch.yaml", FETCH), CATALOG)), C)
    # RTT 20 ms; a full frame (1514 B) at 1 Mbit/s takes 12.112 ms; the path holds 20 / 12.112 =
    # 1.65 frames, less than TCP's initial window (10): no slow start, the rate from the first byte.
    # 1 KB: 1 frame; 100 KB: ceil(100000 / 1448) = 70 frames = 0.84784 s.
    # HTTP: 2 RTTs (SYN, request); HTTPS (TLS 1.3): 3.
    by_label = {c.label: c.work_s for c in e.cells}
    assert by_label == pytest.approx({"http 1KB server": 0.040 + 0.012112, "http 100KB server": 0.040 + 0.84784,
                                      "https 1KB server 1.3 rsa2048": 0.060 + 0.012112,
                                      "https 100KB server 1.3 rsa2048": 0.060 + 0.84784}, abs=1e-6)
    assert e.runs == 12 and e.restarts == 0
    # set-up 10 s + 12 runs x 0.5 s + 3 x (0.052112 + 0.88784 + 0.072112 + 0.90784)
    assert e.total_s == pytest.approx(10 + 6 + 3 * 1.919904, abs=1e-6)


def test_slow_start_then_the_rate(write_yaml):
    text = FETCH.replace("rate: 1Mbit", "rate: 100Mbit").replace("[1KB, 100KB]", "[1MB]").replace(
        "[http, https]", "[http]")
    e = estimate(plan(load_experiment(write_yaml("fast.yaml", text), CATALOG)), C)
    # 100 Mbit/s, RTT 20 ms: a frame takes 0.12112 ms, the path holds 165 frames. 1 MB = 691 frames:
    # round trips of 10, 20, 40, 80, 160 frames (0.10 s, 381 left), then the window (320) fills
    # the path: 381 x 0.12112 ms = 0.04615 s. Plus 2 RTTs.
    (cell,) = e.cells
    assert cell.work_s == pytest.approx(0.040 + 0.10 + 381 * 0.00012112, abs=1e-6)


def test_loss_caps_the_rate_as_mathis_says(write_yaml):
    text = FETCH.replace("rate: 1Mbit", "rate: 100Mbit, loss: 1%").replace("[1KB, 100KB]", "[10MB]").replace(
        "[http, https]", "[http]")
    (cell,) = estimate(plan(load_experiment(write_yaml("lossy.yaml", text), CATALOG)), C).cells
    # MSS 1448 B, RTT 20 ms, p 1 %: 1448 x 8 / 0.02 x 1.22 / 0.1 = 7.06624 Mbit/s; a frame takes
    # 1514 x 8 / 7066240 = 1.71404 ms, the path holds 11.67 frames. 10 MB = 6907 frames: 10, then 20
    # fill it (0.02 s, 6897 left), 6897 x 1.71404 ms = 11.82172 s.
    assert cell.work_s == pytest.approx(0.040 + 0.020 + 6897 * 1514 * 8 / 7066240, rel=1e-6)


BLOAT = """
name: bloat
topology:
  nodes: {watch: {role: wearable}, phone: {role: phone}, server: {role: server}}
  links:
    - {between: [watch, phone], rate: 1.1Mbit, delay: 15ms, queue_packets: 50}
    - {between: [phone, server], rate: 50Mbit, delay: 10ms}
repetitions: 3
timeout: 200s
workload: {kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 1.5Mbit, duration: 400s}
matrix: {phone.rmem_max: [2097152, 8291456]}
"""


def test_a_stream_faster_than_its_path_drains_what_the_buffers_hold(write_yaml):
    e = estimate(plan(load_experiment(write_yaml("bloat.yaml", BLOAT), CATALOG)), C)
    # The BT link carries 1.1 Mbit/s of full frames, 1.1 x 1448 / 1514 = 1.05205 Mbit/s of payload:
    # 0.448 Mbit/s less than sent, for 400 s: 22.4 MB would queue. The buffers hold: the
    # server's send buffer (Linux's tcp_wmem max, 4 MiB), the relaying phone's receive buffer
    # (rmem_max), its relay's own buffer (64 KiB) and its send buffer (4 MiB): 4,194,304 + 2,097,152
    # + 65,536 + 4,194,304 = 10,551,296 B with a 2 MiB rmem_max, 16,745,600 B with 8,291,456; and
    # the BT link's queue, 50 full frames (75,700 B). Drained at 1.05205 Mbit/s after the 400 s.
    payload = 1.1e6 * 1448 / 1514
    works = [c.work_s for c in e.cells]
    assert works == pytest.approx([400 + 10_626_996 * 8 / payload, 400 + 16_821_300 * 8 / payload], abs=1e-6)
    # two groups of cells (the phone restarts with its other buffer) in each of 3 repetitions:
    # 5 restarts after the first start
    assert e.restarts == 5
    assert e.total_s == pytest.approx(10 + 5 * 5 + 3 * (sum(works) + 2 * 0.5), abs=1e-6)


def test_a_run_never_lasts_beyond_its_limit(write_yaml):
    text = BLOAT.replace("timeout: 200s", "timeout: 10s").replace("matrix: {phone.rmem_max: [2097152, 8291456]}", "")
    (cell,) = estimate(plan(load_experiment(write_yaml("capped.yaml", text), CATALOG)), C).cells
    assert cell.work_s == 410.0                 # the duration and the timeout after it
    assert "capped" in cell.how


def test_the_command_prints_the_estimate_first_with_its_constants(tmp_path, write_yaml):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "fetch.yaml").write_text(FETCH)
    (suite / "claims.yaml").write_text("claims: []\n")        # not an experiment: left out
    res = wearlab("reproduce", str(suite), "--estimate", "--runtime", "uml", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "fetch" in res.stdout and "12 runs" in res.stdout
    assert "set-up" in res.stdout and "per run" in res.stdout
    assert not (tmp_path / "out").exists()
    res = wearlab("reproduce", str(suite), "--estimate", "--only", "nothing-like-it")
    assert res.returncode == 2 and "no experiment of the suite matches" in res.stderr


def test_a_device_receives_no_faster_than_its_per_byte_cost(write_yaml):
    text = FETCH.replace("{watch: {role: wearable}", "{watch: {role: wearable, device: lg-g-watch-r}").replace(
        "rate: 1Mbit, delay: 10ms", "medium: wifi, rate: 10Mbit, delay: 5ms").replace("[1KB, 100KB]", "[1MB]")
    p = plan(load_experiment(write_yaml("device.yaml", text), CATALOG))
    watch = p.devices["watch"]
    plain, encrypted = watch.per_byte["plain"].seconds(1_000_000), watch.per_byte["encrypted"].seconds(1_000_000)
    # The device's own numbers (`wearlab devices lg-g-watch-r`): ~3.2 s and ~3.9 s for 1 MB, more
    # than the 691 frames take at 10 Mbit/s (0.837 s): the device sets the pace. HTTPS adds the
    # platform's handshake (~110 ms) and TLS's round trip. RTT 10 ms.
    assert plain > 691 * 1514 * 8 / 1e7 and encrypted > plain
    http, https = (c.work_s for c in estimate(p, C).cells)
    assert http == pytest.approx(0.020 + plain, abs=1e-6)
    assert https == pytest.approx(0.030 + watch.handshake.seconds() + encrypted, abs=1e-6)


POLICIES = """
name: policies
topology:
  nodes: {watch: {role: wearable, device: lg-g-watch-r}, phone: {role: phone, kind: host}, ap: {role: ap},
          server: {role: server}}
  links:
    - {between: [watch, phone], medium: bt, rate: 1Mbit, delay: 10ms}
    - {between: [watch, ap], medium: wifi, rate: 10Mbit, delay: 5ms}
    - {between: [phone, ap], medium: wifi, rate: 100Mbit, delay: 1ms}
    - {between: [ap, server], medium: wired, rate: 100Mbit, delay: 1ms}
repetitions: 1
workload: {kind: stream, client: watch, server: server, direction: down, pattern: bulk, bytes: 1MB}
matrix: {watch.interface_policy: [bt, wifi, adaptive]}
"""


def test_an_interface_policy_moves_the_transfer_and_a_stream_pays_no_device_per_byte(write_yaml):
    e = estimate(plan(load_experiment(write_yaml("policies.yaml", POLICIES), CATALOG)), C)
    bt, wifi, adaptive = (c.work_s for c in e.cells)
    # 1 MB = 691 frames. `bt`: through the phone (watch-phone-ap-server): 1 Mbit/s, RTT 24 ms, a
    # frame 12.112 ms, the path holds < 10 frames (no slow start): 8.369392 s + 2 RTTs.
    assert bt == pytest.approx(0.048 + 691 * 0.012112, abs=1e-6)
    # `wifi`: watch-ap-server, 10 Mbit/s, RTT 12 ms: 0.8369392 s + 2 RTTs - not the watch's ~3.2 s
    # per-byte cost: a stream's agents charge none (only http-get's and page-load's clients do).
    assert wifi == pytest.approx(0.024 + 691 * 0.0012112, abs=1e-6)
    # `adaptive`: 1 MB is more than B (10 KB) on a path it outruns: T1 (0.5 s) on BT, then WiFi's.
    assert adaptive == pytest.approx(0.5 + wifi, abs=1e-6)
    assert "adaptive" in e.cells[2].how and "via ap" in e.cells[2].how
