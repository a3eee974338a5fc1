"""The stream agent's sender (wearlab.measure.stream_agent.send_stream) on the host: a CBR stream
sends message i at i x size x 8 / rate while that is before `duration`, whatever the clock reads
at its start - counted by hand, with the clock frozen (no sleeping)."""

from __future__ import annotations

import pytest

from wearlab.measure import stream_agent

# A guest's time.monotonic() 7.9 s after boot: (start + 1.0) - start is 0.9999999999999991 there,
# the sum crossing 8 = 2^3 drops start's lowest bits.
ODD_START = 7.909634979317883


class Sink:
    """What send_stream needs of a socket: the sizes of what it wrote."""

    def __init__(self) -> None:
        self.sent: list[int] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(len(data))

    def shutdown(self, how: int) -> None:
        pass


@pytest.mark.parametrize("start", [ODD_START, 1000.0])
@pytest.mark.parametrize("rate_bps, duration_s, messages", [
    (1600, 1.0, 1),        # the message app: 200 B at 1600 bit/s for 1 s is one message, at t = 0
    (16_000, 1.0, 10),     # 200 B every 0.1 s: t = 0, 0.1, ..., 0.9 (1.0 is the end, not sent)
    (150_000, 9.375, 59),  # the camera at 1/16: 3 kB every 0.16 s: 9.375 / 0.16 = 58.6, so 0 ... 58
])
def test_cbr_sends_the_messages_due_before_its_duration(monkeypatch, start, rate_bps, duration_s, messages):
    assert (ODD_START + 1.0) - ODD_START < 1.0           # the clock value is the odd one
    size = 3000 if rate_bps == 150_000 else 200
    monkeypatch.setattr(stream_agent.time, "monotonic", lambda: start)
    monkeypatch.setattr(stream_agent.time, "sleep", lambda s: None)
    sock = Sink()
    out = stream_agent.send_stream(sock, {"stream": 0, "pattern": "cbr", "rate_bps": rate_bps,
                                          "message_size": size, "duration_s": duration_s, "bytes": None})
    assert out["sent_messages"] == messages and sock.sent == [size] * messages, out
