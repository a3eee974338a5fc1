"""Seed 003 section 5's four app workloads as presets of the `stream` workload (`app:`), listed once.

Zhu et al. (seed 003, section 5.1, Fig. 12) compare interface policies on four real workloads, each
with its own QoE metric: (a) a 16 MB app download from the Play Store (download time), (b) a 2-min
YouTube video (video throughput), (c) a short Telegram message (delivery delay), (d) a 150 s
IP-camera stream with tinyCam (the real-time streaming rate). A preset is not a new kind: `app:
download` on a `stream` fills in the stream's own parameters (pattern, rate, message size, bytes,
duration, playout buffer) when the plan makes its cells, so the plan shows what runs and every
stream metric applies. `app_scale` shortens sizes and durations alike (the suite's default tier);
`app_scale: 1` is the paper's. Writing a parameter the preset sets beside `app:` is a plan error
(which one wins would be a guess).

Everything below that the paper does not give is marked ASSUMPTION with where the number comes from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wearlab.model.unit_input import parse_fraction

# The stream parameters a preset sets (writing one of them beside `app:` is an error).
SETS = ("pattern", "rate", "message_size", "bytes", "duration", "playout_buffer", "direction")


@dataclass(frozen=True)
class App:
    name: str
    doc: str
    qoe_metric: str              # the stream metric that is this app's QoE (the paper's axis)
    qoe_better: str              # "lower" or "higher"
    pattern: str                 # cbr | bulk
    message_size: int            # bytes per timestamped message
    rate: int | None = None      # cbr: application bit/s
    bytes: int | None = None     # bulk: what the download moves (scaled)
    duration: float | None = None  # cbr: how long it sends (scaled)
    playout_buffer: float | None = None
    scales: bool = True          # False: app_scale leaves it as it is (one message is one message)

    def stream(self, scale: float = 1.0) -> dict[str, Any]:
        """The stream parameters this app stands for, at `scale` of the paper's size."""
        k = scale if self.scales else 1.0
        return {"pattern": self.pattern, "direction": "down", "message_size": self.message_size,
                "rate": self.rate if self.pattern == "cbr" else "",
                "bytes": max(self.message_size, round(self.bytes * k)) if self.bytes else "",
                "duration": self.duration * k if self.duration else "",
                "playout_buffer": self.playout_buffer if self.playout_buffer else ""}


APPS: tuple[App, ...] = (
    # Seed 003 §5.1: "downloading a wearable app of 16MB"; QoE "the app download time". Bulk, down,
    # 16 kB messages as the `messages` workload's bulk background writes them.
    App("download", "a 16 MB app download (seed 003 Fig. 12a; QoE: download time)",
        "down_transfer_s", "lower", "bulk", 16_000, bytes=16_000_000),
    # §5.1: "streaming a 2-min YouTube video"; QoE "the video throughput". ASSUMPTION: 1.5 Mbit/s,
    # the rate seed 003 itself streams as video-like CBR (§4.1, Fig. 9) and above BT's ~1.1 Mbit/s
    # (the bt-classic profile), which is what makes WiFi's throughput the better one in Fig. 12b.
    # ASSUMPTION: a 2 s playout buffer (the paper's player is YouTube's; stalls are reported beside
    # the throughput, as issue 25 asks). Live CBR, not YouTube's faster-than-real-time prefetch.
    App("video", "a 2-min video stream (seed 003 Fig. 12b; QoE: throughput, stalls beside it)",
        "down_goodput_bps", "higher", "cbr", 1000, rate=1_500_000, duration=120.0, playout_buffer=2.0),
    # §5.1: "delivering a short message by Telegram"; QoE "the message delivery delay". One message
    # per run, as the paper times one (its 10 repetitions are 10 messages). ASSUMPTION: 200 B (a
    # short text with its framing; the `messages` workload's default). The stream agent sends
    # message i at i x size x 8 / rate while that is before `duration`: 1 s at 1600 bit/s is one
    # message, at t = 0. Not scaled: a message is as long in every tier.
    App("message", "a short Telegram-like message (seed 003 Fig. 12c; QoE: delivery delay)",
        "down_owd_median_s", "lower", "cbr", 200, rate=200 * 8, duration=1.0, scales=False),
    # §5.1: "streaming from an IP-camera in real time for 150s using the TinyCam app"; QoE "the
    # real-time data streaming rate". ASSUMPTION: 150 kbit/s in 3 kB frames, the tinyCam stream of
    # experiments/seeds/003-handover-reactive.yaml (the paper: a CBR "that BT can already sustain").
    App("camera", "a 150 s IP-camera stream (seed 003 Fig. 12d; QoE: real-time rate)",
        "down_goodput_bps", "higher", "cbr", 3000, rate=150_000, duration=150.0),
)
BY_NAME: dict[str, App] = {a.name: a for a in APPS}
NONE = "none"


def scale(value: Any) -> float:
    """app_scale: a number in (0, 1] ('1/16' allowed): what part of the paper's sizes and durations."""
    try:
        v = parse_fraction(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a scale; write e.g. 1, 0.125 or 1/8") from None
    if not 0 < v <= 1:
        raise ValueError(f"{value!r} is impossible here: must be above 0 and at most 1")
    return v


def expand(cell: dict[str, Any]) -> dict[str, Any]:
    """`cell` with its app's stream parameters filled in (unchanged without an app)."""
    app = BY_NAME.get(cell.get("app") or NONE)
    if app is None:
        return cell
    return {**cell, **app.stream(float(cell.get("app_scale") or 1.0))}
