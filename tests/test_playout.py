"""The video player on a CBR stream (measure.playout), held to cases worked out by hand, and the
`playout_buffer` parameter in an experiment."""

from __future__ import annotations

import pytest

from conftest import wearlab
from wearlab.measure.playout import playout

RATE = 1_000_000          # bit/s
SIZE = 1000               # B: 8 ms of media per message
MSG_S = SIZE * 8 / RATE
ONE_WAY = 0.050


def stream(seconds: float, arrive) -> list[tuple[int, int, int, int]]:
    """Messages sent every 8 ms for `seconds`; `arrive(t_send)` gives each delivery time (s)."""
    n = round(seconds / MSG_S)
    return [(i, round(i * MSG_S * 1e9), round(arrive(i * MSG_S) * 1e9), SIZE) for i in range(n)]


def test_a_steady_path_starts_after_the_buffer_and_its_delay_and_never_stalls():
    p = playout(stream(10, lambda t: t + ONE_WAY), RATE, 2.0)
    # 2 s of media: messages 0-249 (the last one's media ends at 250 x 8 ms = 2.0 s); it is sent
    # at 1.992 s and arrives 50 ms later.
    assert p.startup_s == pytest.approx(1.992 + ONE_WAY, abs=1e-6)
    assert (p.rebuffers, p.rebuffer_s) == (0, 0.0)


def test_a_blackout_shorter_than_the_buffer_is_absorbed():
    # 1 s with nothing delivered from t = 5 s (a BT sniff blackout); what was sent then arrives at 6.05.
    p = playout(stream(10, lambda t: max(t, 6.0) + ONE_WAY if 5.0 <= t < 6.0 else t + ONE_WAY), RATE, 2.0)
    assert (p.rebuffers, p.rebuffer_s) == (0, 0.0)


def test_a_blackout_longer_than_the_buffer_stalls_once_until_the_buffer_refills():
    # 3 s blackout from t = 5 s: everything sent in [5, 8) arrives at 8.05 s. Playback runs 2.042 s
    # behind the media, so the media at 5.0 s is due at 7.042 s: it stalls there, and resumes when
    # 2 s of media from 5.0 s on are in, which the burst at 8.05 s brings at once (up to 7.0 s).
    p = playout(stream(10, lambda t: 8.0 + ONE_WAY if 5.0 <= t < 8.0 else t + ONE_WAY), RATE, 2.0)
    assert p.rebuffers == 1
    assert p.rebuffer_s == pytest.approx(8.05 - 7.042, abs=1e-6)


def test_without_a_buffer_every_late_message_is_a_stall():
    # buffer 0: playback starts with the first message and any delay increase stalls it. Two
    # jumps of +100 ms (at 2 s and at 4 s): two stalls of 100 ms.
    def arrive(t):
        return t + ONE_WAY + (0.1 if t >= 2.0 else 0) + (0.1 if t >= 4.0 else 0)
    p = playout(stream(6, arrive), RATE, 0.0)
    assert p.startup_s == pytest.approx(ONE_WAY, abs=1e-6)
    assert p.rebuffers == 2
    assert p.rebuffer_s == pytest.approx(0.2, abs=1e-6)


def test_a_buffer_longer_than_the_stream_starts_when_all_has_arrived():
    p = playout(stream(1, lambda t: t + ONE_WAY), RATE, 5.0)
    assert p.startup_s == pytest.approx(1 - MSG_S + ONE_WAY, abs=1e-6)
    assert p.rebuffers == 0


EXPERIMENT = """
name: video
topology:
  nodes: {{watch: {{role: wearable}}, server: {{role: server}}}}
  links: [{{between: [watch, server], rate: 2Mbit, delay: 5ms}}]
workload: {{kind: stream, client: watch, server: server}}
matrix: {{pattern: [{pattern}], playout_buffer: [2s]}}
"""


def test_the_parameter_is_planned_for_cbr_and_refused_for_bulk(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text(EXPERIMENT.format(pattern="cbr"))
    res = wearlab("plan", str(ok), "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    assert '"playout_buffer"' in res.stdout and "down_rebuffers" in res.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXPERIMENT.format(pattern="bulk"))
    res = wearlab("validate", str(bad), timeout=60)
    assert res.returncode == 2 and "playout_buffer" in res.stderr and "Traceback" not in res.stderr, res.stderr


STEP = """
name: video-step
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 10Mbit, delay: 20ms}]
repetitions: 1
workload: {kind: stream, client: watch, server: server, direction: down, pattern: cbr, rate: 80kbit,
           message_size: 500, duration: 3s, playout_buffer: 100ms}
timeline:
  - {at: 1.5s, link: watch-server, direction: server->watch, set: {delay: 120ms}}
"""


@pytest.mark.netem
def test_a_delay_step_larger_than_the_buffer_stalls_once_for_the_step(tmp_path):
    """A live 80 kbit/s stream of 500-byte messages (50 ms of media each) with a 100 ms player
    buffer; at 1.5 s the path's delay steps from 20 ms to 120 ms. Worked by hand: the player starts
    when message 1 (media to 100 ms) arrives, 50 ms + 20 ms after the first send, so each message
    has 50 ms of slack; the step makes the first message after it 50 ms late, the player stalls
    until 100 ms of media from there are in (the step's 100 ms: its slack is back, as before) and
    then plays on. One stall of 100 ms. The assumptions TCP must meet: the round trip after the
    step (140 ms, plus up to 40 ms of delayed ACK) stays well under its retransmission timeout
    (srtt + 200 ms, ~240 ms; a step to 520 ms stalled 260 ms more than this arithmetic), and the
    messages in flight (20/s x 140 ms = 3) under the initial congestion window of 10 segments,
    which a sender that was never window-limited still has (100-byte messages at 100/s needed 19
    after a step to 170 ms: the window held the stream for a round trip, 100 ms more, seen in its
    one-way delays). A busy guest's tick (10 ms) and a message's frame ((500 + 66) B at 10 Mbit/s)
    are the bounds' slack."""
    exp = tmp_path / "step.yaml"
    exp.write_text(STEP)
    res = wearlab("run", str(exp), "--out", str(tmp_path / "r"), timeout=120)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    import csv
    with (tmp_path / "r" / "video-step" / "latest" / "runs.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    frame, tick = (500 + 66) * 8 / 10e6, 0.010
    assert int(row["down_rebuffers"]) == 1, row
    assert 0.100 - tick <= float(row["down_rebuffer_s"]) <= 0.100 + tick + frame, row
    assert 0.050 + 0.020 <= float(row["down_startup_s"]) <= 0.050 + 0.020 + frame + tick, row
