"""The live record (report.livedoc): what the runner's control server writes into live.json from
the real producers (a stream's receiver records, a wearable's radio and handover, the links'
shapes and counters, the change log) reads back typed; an entry the record does not declare is an
error the record states, not a key a reader may or may not match; a missing or foreign file reads
as an empty record or an error."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from wearlab.model.choices import RadioState
from wearlab.model.shape import Loss, Shape
from wearlab.model.topology import Link
from wearlab.nodes.wearable import Wearable
from wearlab.realize.linkctl import LinkControl
from wearlab.report.live_record import LiveDoc, read_live, read_record
from wearlab.realize.changelog import ChangeLog
from wearlab.run.state import RunState
from wearlab.run.control import ControlServer
from wearlab.measure.queues import QueueSampler
from wearlab.measure.stream_records import LiveTail
from wearlab.nodes.relay import HeldBytes, read_held

MESSAGE = 1000          # bytes
OWD_S = (0.020, 0.030, 0.040)


def receiver_records(path, now_ns: int) -> None:
    """Nine messages delivered in the last half second with one-way delays of 20, 30 and 40 ms,
    as the stream agent writes them (seq, send ns, receive ns, size)."""
    lines = ["seq,send_ns,recv_ns,size"]
    for seq in range(9):
        recv = now_ns - 500_000_000 + seq * 50_000_000
        lines.append(f"{seq},{recv - int(OWD_S[seq % 3] * 1e9)},{recv},{MESSAGE}")
    path.write_text("\n".join(lines) + "\n")


class Workload:
    def __init__(self, tail):
        self.tail = tail

    def live(self):
        return self.tail.sample()


def wearable(radio: RadioState) -> Wearable:
    w = Wearable.__new__(Wearable)     # its live() reads only what a started one has
    w.controller = SimpleNamespace(radio=SimpleNamespace(state=radio))
    w.handover = SimpleNamespace(last_event=lambda: {"event": "BT down", "t_s": 7.25})
    w.settings = {"interface_policy": "reactive"}
    return w


def context(tmp_path, workload) -> RunState:
    link = Link(index=0, a="watch", b="phone", profile="bt-classic",
                forward=Shape(rate_bps=1_100_000, delay_s=0.015, loss=Loss(p=1.0)), reverse=Shape(delay_s=0.015))
    links = LinkControl(SimpleNamespace(topo=SimpleNamespace(links=[link])))
    links.down.add(("phone", "watch"))
    changes = ChangeLog()
    changes.counts[("watch-phone", "timeline")] = 3
    changes.last_ns["watch-phone"] = 1_700_000_000_000_000_000
    wctx = SimpleNamespace(nodes={"watch": wearable(RadioState.SNIFF)}, run_start_ns=time.time_ns() - 4_000_000_000)
    return RunState(plan=SimpleNamespace(name="demo"), wctx=wctx, links=links,
                    changes=changes, workload=workload,
                    progress={"total": 6, "done": 2, "failed": 1, "run": 3, "cell": "cbr", "repetition": 1})


def write_record(tmp_path, workload) -> LiveDoc:
    server = ControlServer(tmp_path / "control", context(tmp_path, workload))
    server.counters = {"phone->watch": {"bytes": 5000, "packets": 5, "drops": 1, "backlog_bytes": 300,
                                        "backlog_packets": 1}}
    server._beat()
    server._write_live()
    doc = read_live(tmp_path)
    assert doc is not None and doc.results_dir == str(tmp_path)
    return doc


def test_what_the_runner_writes_reads_back_typed(tmp_path):
    out = tmp_path / "down.csv"
    receiver_records(out, time.time_ns())
    vq = tmp_path / "vq.csv"
    vq.write_text("t_ns,vq_bytes,bw_bps,q_ub_bytes,q_lb_bytes,throttled\n1,50000,1050000,90000,30000,1\n")
    # `ss` in the phone's namespace (its socket towards the server 10.0.2.2:5001, and the watch's)
    # and in the server's; the relay's held-bytes file: 70,000 B read from the server, 40,000 B written on.
    ss = {"phone": "100000 0 10.0.1.1:40000 10.0.2.2:5001\n0 20 10.0.0.2:20000 10.0.0.1:50000\n",
          "server": "0 3000 10.0.2.2:5001 10.0.1.1:40000\n"}
    net = SimpleNamespace(run=lambda node, argv: SimpleNamespace(stdout=ss[node]))
    held = HeldBytes(str(tmp_path / "relay-held"))
    held.add("down", 70000)
    held.add("up", 10)
    held.add("down", -40000)
    sampler = QueueSampler(net, "phone", "server", ("10.0.2.2", 5001), lambda: read_held(tmp_path / "relay-held")["down"])
    sampler.sample_once()
    doc = write_record(tmp_path, Workload(LiveTail([{"out": str(out), "direction": "down"}], sampler, vq)))

    assert doc.error is None and doc.experiment == "demo" and 3.9 <= doc.run_s <= 10
    assert (doc.progress.total, doc.progress.done, doc.progress.failed, doc.progress.run) == (6, 2, 1, 3)
    (st,) = doc.workload.streams
    assert (st.role, st.direction, st.key) == ("main", "down", "main down")
    assert st.owd_s == pytest.approx(0.030) and st.owd_max_s == pytest.approx(0.040)
    assert st.goodput_bps == 9 * MESSAGE * 8           # all nine arrived within the last second
    assert st.owd_hist.count == 9 and st.owd_hist.sum == pytest.approx(9 * 0.030)
    assert dict(zip(st.owd_hist.le, st.owd_hist.counts))[0.025] == 3     # the 20 ms ones
    assert doc.workload.phone_queues.receive_bytes == 100000 and doc.workload.phone_queues.send_bytes == 20
    sp = doc.workload.delay_split
    assert (sp.d1_bytes, sp.d2_bytes, sp.d3_bytes, sp.d4_bytes) == (3000, 100000, 30000, 20)
    # Nine messages in the last half second drain every part: a part's delay is its bytes over that rate.
    assert 9 * MESSAGE / 1.0 <= sp.drain_bytes_per_s <= 9 * MESSAGE / 0.5
    assert sp.d2_s == pytest.approx(100000 / sp.drain_bytes_per_s) and sp.d1_s == pytest.approx(3000 / sp.drain_bytes_per_s)
    v = doc.workload.virtual_queue
    assert (v.queue_bytes, v.bt_rate_bps, v.upper_bound_bytes, v.throttled) == (5e4, 1.05e6, 9e4, True)

    watch = doc.nodes["watch"]
    assert watch.radio is RadioState.SNIFF
    assert (watch.handover.mode, watch.handover.last_event, watch.handover.at_s) == ("reactive", "BT down", 7.25)

    by_dir = {ld.direction: ld for ld in doc.links}
    assert set(by_dir) == {"watch->phone", "phone->watch"}
    wp, pw = by_dir["watch->phone"], by_dir["phone->watch"]
    assert wp.link == pw.link == "phone-watch"
    assert wp.shape.rate_bps == 1_100_000 and wp.shape.delay_s == 0.015 and wp.shape.loss.p == 1.0 and not wp.down
    assert pw.down and pw.shape.loss.p == 100.0              # down is loss 100 % on top of its shape
    assert wp.counters is None and pw.counters.bytes == 5000 and pw.counters.drops == 1
    (c,) = doc.changes.changes
    assert (c.link, c.source, c.count) == ("watch-phone", "timeline", 3)


def test_an_undeclared_entry_makes_the_record_say_so(tmp_path):
    """The display-text key the exporter used to match is no field of the record."""
    class Untyped:
        def live(self):
            return {"phone queues": {"recv_q": 1000, "send_q": 20}}

    doc = write_record(tmp_path, Untyped())
    assert doc.error and "phone queues" in doc.error
    assert doc.workload.phone_queues is None


def test_missing_and_foreign_records(tmp_path):
    control = tmp_path / "control"
    control.mkdir()
    assert read_record(control) == LiveDoc(results_dir=str(tmp_path))      # not written yet: between runs
    (control / "live.json").write_text(json.dumps({"experiment": "demo", "workload": {"main down": {}}}))
    doc = read_record(control)
    assert doc.error and "workload.main down" in doc.error
    assert read_live(tmp_path) is None                                     # no heartbeat: nothing runs
