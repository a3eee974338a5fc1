"""Timelines and traces from YAML and files: resolved changes, schedules (looped traces), the
Mahimahi conversion's arithmetic, and every bad input located as file:line:field."""

from __future__ import annotations

from textwrap import dedent

import pytest

from wearlab.errors import InputError
from wearlab.model.columns import columns_of
from wearlab.model.experiment_file import load_experiment
from wearlab.model.timeline import MTU_BITS
from wearlab.catalog import CATALOG

HEAD = """\
name: tl
topology:
  nodes: {watch: {role: wearable}, phone: {role: phone}, server: {role: server}}
  links:
    - {between: [watch, phone], profile: bt-classic}
    - {between: [phone, server], delay: 5ms}
repetitions: 1
workload: {kind: stream, client: watch, server: server, path: phone, duration: 20s}
"""


def load(tmp_path, body: str, **kw):
    f = tmp_path / "e.yaml"
    f.write_text(HEAD + dedent(body))
    return load_experiment(f, CATALOG, **kw)


def problems(tmp_path, body: str) -> list[str]:
    with pytest.raises(InputError) as e:
        load(tmp_path, body)
    return [str(p) for p in e.value.problems]


def test_events_resolve_to_directions_and_keep_their_order(tmp_path):
    exp = load(tmp_path, """\
        timeline:
          - {at: 5s, link: watch-phone, set: {delay: 60ms, loss: 1%}}
          - {at: 5s, link: phone-watch, direction: phone->watch, state: down}
          - {at: 7500ms, link: watch-phone, state: up}
          - {at: 9s, link: watch-phone, reset: true}
        """)
    sched = exp.timeline_of(exp.cells()[0]).schedule(20)
    assert [(c.at_s, c.action) for c in sched] == [(5, "set"), (5, "down"), (7.5, "up"), (9, "reset")]
    assert set(sched[0].directions) == {("watch", "phone"), ("phone", "watch")}
    assert sched[1].directions == (("phone", "watch"),)
    assert sched[0].spec.delay == pytest.approx(0.060) and sched[0].spec.loss.p == pytest.approx(1.0)
    assert list(columns_of(exp.workload_class, (), exp.matrix).params) == exp.workload_class.params.names()  # one fixed timeline: no column


def test_named_timelines_are_a_matrix_key(tmp_path):
    exp = load(tmp_path, """\
        timelines:
          walk-away: [{at: 1s, link: watch-phone, set: {rate: 100kbit}}]
        matrix: {timeline: [static, walk-away]}
        """)
    assert [c["timeline"] for c in exp.cells()] == ["static", "walk-away"]
    assert "timeline" in list(columns_of(exp.workload_class, (), exp.matrix).params)
    assert len(exp.timeline_of(exp.cells()[0])) == 0 and len(exp.timeline_of(exp.cells()[1])) == 1
    narrowed = load(tmp_path, """\
        timelines:
          walk-away: [{at: 1s, link: watch-phone, set: {rate: 100kbit}}]
        matrix: {timeline: [static, walk-away]}
        """, overrides={"timeline": "walk-away"})
    assert [c.get("timeline") for c in narrowed.cells()] == [None] and narrowed.timeline == "walk-away"


def test_csv_trace_rows_become_changes_and_loop(tmp_path):
    (tmp_path / "walk.csv").write_text("time,rate,delay\n0,1Mbit,20ms\n2.5,500kbit,40ms\n4s,250kbit,80ms\n")
    exp = load(tmp_path, """\
        timeline:
          - {at: 1s, link: watch-phone, direction: phone->watch, trace: walk.csv, loop: true}
        """)
    sched = exp.timeline_of(exp.cells()[0]).schedule(10)
    # rows at 0, 2.5, 4 s from 1 s; the trace lasts 4 s, so it repeats from 5 s and 9 s
    assert [c.at_s for c in sched] == [1, 3.5, 5, 5, 7.5, 9, 9]
    assert sched[1].spec.rate == 500_000 and sched[1].spec.delay == pytest.approx(0.040)


def test_mahimahi_trace_is_a_rate_per_bin(tmp_path):
    # 100 ms bins: 10 opportunities in the first (1.2 Mbit/s), 2 in the second, none in the third
    # (it gets one: netem has no rate 0), one in the fourth
    stamps = [*range(0, 100, 10), 120, 150, 350]
    (tmp_path / "link.trace").write_text("\n".join(map(str, stamps)) + "\n")
    exp = load(tmp_path, """\
        timeline: [{at: 0s, link: watch-phone, direction: phone->watch, trace: link.trace}]
        """)
    tl = exp.timeline_of(exp.cells()[0])
    rates = [(round(c.at_s, 3), c.spec.rate) for c in tl.schedule(20)]
    assert rates == [(0, 10 * MTU_BITS * 10), (0.1, 2 * MTU_BITS * 10), (0.2, 1 * MTU_BITS * 10)]
    assert any("one packet per bin" in n for n in tl.notes)


@pytest.mark.parametrize("body, expected", [
    ("timeline: [{at: 5s, link: watch-moon, set: {delay: 1ms}}]", "e.yaml:9: timeline[0].link: no link 'watch-moon'"),
    ("timeline: [{at: 5s, link: watch-phone, direction: phone->server, set: {delay: 1ms}}]",
     "e.yaml:9: timeline[0].direction: 'phone->server' is not a direction of watch-phone"),
    ("timeline: [{at: 25s, link: watch-phone, set: {delay: 1ms}}]", "e.yaml:9: timeline[0].at: 25s is after the end of the run"),
    ("timeline: [{at: 5s, link: watch-phone, set: {delay: 1ms}, state: down}]", "does exactly one of"),
    ("timeline: [{at: 5s, link: watch-phone, set: {dealy: 1ms}}]", "e.yaml:9: timeline[0].set.dealy"),
    ("matrix: {timeline: [static, nope]}", "e.yaml:9: matrix.timeline[1]: no timeline 'nope'"),
])
def test_bad_events_are_located(tmp_path, body, expected):
    found = problems(tmp_path, body + "\n")
    assert any(expected in p for p in found), found


@pytest.mark.parametrize("text, expected", [
    ("time,rate\n0,1Mbit\n1,\n", "walk.csv:3: rate: gap: no rate at time 1"),
    ("time,rate\n0,1Mbit\n1,-5kbit\n", "walk.csv:3: rate: -5kbit is negative"),
    ("time,rate\n0,1Mbit\n-1,2Mbit\n", "walk.csv:3: time: -1 is negative"),
    ("time,rate\n2,1Mbit\n1,2Mbit\n", "walk.csv:3: time: 1 does not come after"),
    ("time,rat\n0,1Mbit\n", "walk.csv:1: rat: unknown column"),
    ("rate,time\n1Mbit,0\n", "walk.csv:1: the first column must be `time`"),
])
def test_bad_traces_are_located(tmp_path, text, expected):
    (tmp_path / "walk.csv").write_text(text)
    found = problems(tmp_path, "timeline: [{at: 0s, link: watch-phone, trace: walk.csv}]\n")
    assert any(expected in p for p in found), found


def test_bad_mahimahi_trace_is_located(tmp_path):
    (tmp_path / "link.trace").write_text("0\n10\n5\n")
    found = problems(tmp_path, "timeline: [{at: 0s, link: watch-phone, trace: link.trace}]\n")
    assert any("link.trace:3:" in p and "before the previous" in p for p in found), found
