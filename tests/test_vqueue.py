"""The virtual-queue controller (seed 003 section 4.3): thresholds Q_UB = BW(1-eps)T and
Q_LB = BW(1-2eps)T with hysteresis, BW estimated only while backlogged; and TCP_INFO's byte
counters read right on a real (loopback) connection."""

from __future__ import annotations

import socket

import pytest

from wearlab.nodes.vqueue import BACKLOG_BYTES, Sample, VirtualQueue, tcp_bytes

BW = 1_000_000          # bit/s of the synthetic BT side
STEP = 0.05


def feed(vq: VirtualQueue, queues: list[int], t0: float = 0.0, acked0: int = 0):
    out = []
    for i, q in enumerate(queues):
        out.append(vq.step(Sample(t0 + i * STEP, q, acked0 + int(BW / 8 * i * STEP))))
    return out


def test_no_thresholds_and_no_throttle_before_an_estimate():
    vq = VirtualQueue()
    d = feed(vq, [10_000_000] * 10)      # half a window: no estimate yet
    assert all(x.bw_bps is None and not x.throttled for x in d)


def test_estimate_is_the_acked_rate_while_backlogged():
    vq = VirtualQueue()
    d = feed(vq, [50_000] * 30)
    assert d[-1].bw_bps == pytest.approx(BW, rel=0.02)
    q_ub, q_lb = vq.thresholds()
    assert q_ub == pytest.approx(BW / 8 * 0.7, rel=0.02) and q_lb == pytest.approx(BW / 8 * 0.4, rel=0.02)


def test_idle_link_does_not_pull_the_estimate_down():
    vq = VirtualQueue()
    feed(vq, [50_000] * 30)
    before = vq.bw_bps
    # idle: nothing queued, nothing acknowledged
    for i in range(40):
        vq.step(Sample(2 + i * STEP, 0, int(BW / 8 * 29 * STEP)))
    assert vq.bw_bps == before
    assert BACKLOG_BYTES > 0


def test_hysteresis_between_the_thresholds():
    vq = VirtualQueue(T=1.0, epsilon=0.3)
    feed(vq, [50_000] * 30)                        # estimate: Q_UB 87.5 kB, Q_LB 50 kB
    t = 30 * STEP
    acked = int(BW / 8 * t)
    states = []
    for q in (80_000, 90_000, 70_000, 55_000, 49_000, 60_000, 88_000):
        t += STEP
        acked += int(BW / 8 * STEP)
        states.append(vq.step(Sample(t, q, acked)).throttled)
    #        below UB, above UB, between, between, below LB, between, above UB
    assert states == [False, True, True, True, False, False, True]


def test_bad_parameters():
    with pytest.raises(ValueError):
        VirtualQueue(epsilon=0.5)
    with pytest.raises(ValueError):
        VirtualQueue(T=0)


def test_tcp_info_counts_payload_bytes():
    lst = socket.create_server(("127.0.0.1", 0))
    cli = socket.create_connection(lst.getsockname())
    srv, _ = lst.accept()
    n = 123_457
    cli.sendall(b"x" * n)
    got = 0
    while got < n:
        got += len(srv.recv(65536))
    import time
    deadline = time.monotonic() + 2
    while tcp_bytes(cli)[0] < n + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert tcp_bytes(cli)[0] == n + 1      # bytes_acked: the payload and the SYN (Linux counts it)
    assert tcp_bytes(srv)[1] == n          # bytes_received
    for s in (cli, srv, lst):
        s.close()


def test_a_stalled_window_does_not_zero_the_estimate():
    from wearlab.nodes.vqueue import MIN_BW_BPS
    vq = VirtualQueue()
    feed(vq, [50_000] * 30)
    t, acked = 30 * STEP, int(BW / 8 * 30 * STEP)
    for i in range(30):               # backlogged, nothing acknowledged: a blackout
        vq.step(Sample(t + i * STEP, 60_000, acked))
    assert vq.bw_bps >= MIN_BW_BPS
