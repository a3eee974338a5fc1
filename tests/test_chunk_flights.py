"""The multipath transport's per-chunk records joined into each path's busy intervals
(wearlab.measure.chunk_flights): the union of each chunk copy's flight, sent on one side to
received on the other. Every expectation is worked out by hand from the records written here."""

from __future__ import annotations

import pytest

from wearlab.measure.chunk_flights import RECEIVED, SENT, flights, path_busy
from wearlab.measure.intervals import union

T0 = 1_000_000_000_000          # the run's start, ns on the shared clock
MS = 1_000_000


def rec(side: str, event: str, seq: int, path: str, t_ms: float, session: str = "s1", size: int = 1400) -> dict:
    """One record as the agent writes it (CHUNK_COLUMNS), at t_ms after T0."""
    return {"t_ns": T0 + round(t_ms * MS), "side": side, "event": event, "session": session, "seq": seq,
            "path_index": {"bt": 1, "wifi": 0}[path], "path_name": path, "payload_bytes": size}


def copy(sender: str, seq: int, path: str, sent_ms: float, received_ms: float | None, session: str = "s1"):
    """A copy's two records: sent by `sender`, received (if ever) by the other side."""
    receiver = "server" if sender == "watch" else "watch"
    out = [rec(sender, SENT, seq, path, sent_ms, session)]
    if received_ms is not None:
        out.append(rec(receiver, RECEIVED, seq, path, received_ms, session))
    return out


def test_union_merges_overlapping_and_touching_intervals_and_drops_empty_ones():
    assert union([(5, 7), (0, 2), (1, 3), (3, 4), (9, 9)]) == [(0, 4), (5, 7)]
    assert union([]) == []


def test_two_overlapping_bt_chunks_and_a_later_wifi_chunk():
    """BT: seq 0 flies 10-40 ms, seq 1 20-55 ms: one stretch 10-55 ms (45 ms, not 30 + 35);
    WiFi: seq 2 (the server sending down) 100-104 ms. In s from T0."""
    rows = (copy("watch", 0, "bt", 10, 40) + copy("watch", 1, "bt", 20, 55)
            + copy("server", 2, "wifi", 100, 104))
    busy = path_busy(rows, T0, T0 + 1000 * MS, paths=["wifi", "bt"])
    assert busy["bt"] == [(pytest.approx(0.010), pytest.approx(0.055))]
    assert busy["wifi"] == [(pytest.approx(0.100), pytest.approx(0.104))]


def test_the_two_directions_of_one_session_are_different_chunks():
    """Both agents number their own direction's chunks from 0: the watch's seq 0 up (10-30 ms) and
    the server's seq 0 down (50-70 ms) are two flights, not one copy received twice."""
    rows = copy("watch", 0, "bt", 10, 30) + copy("server", 0, "bt", 50, 70)
    assert path_busy(rows, T0, T0 + 1000 * MS)["bt"] == [(pytest.approx(0.010), pytest.approx(0.030)),
                                                         (pytest.approx(0.050), pytest.approx(0.070))]


def test_a_chunk_lost_with_its_path_is_busy_until_its_reinjected_copy_leaves():
    """WiFi dies with seq 5 sent at 100 ms; the agent reinjects it on BT at 300 ms (its 200 ms
    REINJECT_MIN_S), and the BT copy arrives at 330 ms. WiFi: 100-300 ms (until the sender gave
    up on it), BT: 300-330 ms. Not the run's end (2 s): a dead path is not busy for the rest."""
    rows = copy("watch", 5, "wifi", 100, None) + copy("watch", 5, "bt", 300, 330)
    busy = path_busy(rows, T0, T0 + 2000 * MS)
    assert busy["wifi"] == [(pytest.approx(0.100), pytest.approx(0.300))]
    assert busy["bt"] == [(pytest.approx(0.300), pytest.approx(0.330))]


def test_a_redundant_copy_that_never_arrives_ends_where_the_other_copy_arrived():
    """A redundant scheduler sends seq 0 on both paths at 10 ms; WiFi's copy arrives at 15 ms, BT's
    never (its path closed with it): BT's flight ends at the chunk's first arrival, 15 ms."""
    rows = copy("server", 0, "wifi", 10, 15) + copy("server", 0, "bt", 10, None)
    flown = flights(rows, T0 + 1000 * MS)
    assert flown["bt"] == [(T0 + 10 * MS, T0 + 15 * MS)]
    assert flown["wifi"] == [(T0 + 10 * MS, T0 + 15 * MS)]


def test_a_chunk_never_received_nor_sent_again_counts_to_the_windows_end():
    """Sent at 900 ms, nothing after it: busy 0.9 s to the window's end at 1 s."""
    busy = path_busy(copy("watch", 0, "bt", 900, None), T0, T0 + 1000 * MS)
    assert busy["bt"] == [(pytest.approx(0.9), pytest.approx(1.0))]


def test_a_duplicate_copy_counts_its_own_flight_and_the_window_cuts():
    """seq 3 on BT 40-60 ms, reinjected on WiFi at 50 ms and arriving 52 ms (the receiver drops
    whichever comes second, but both radios carried): BT 40-60, WiFi 50-52 ms. A flight from the
    previous run (-50 to -10 ms) is out; one crossing the window's start (-5 to +5 ms) counts from
    0; one past the end (990-1010 ms) is cut at 1 s."""
    rows = (copy("watch", 3, "bt", 40, 60) + copy("watch", 3, "wifi", 50, 52)
            + copy("watch", 1, "bt", -50, -10, session="old") + copy("watch", 2, "bt", -5, 5, session="old")
            + copy("watch", 9, "wifi", 990, 1010))
    busy = path_busy(rows, T0, T0 + 1000 * MS)
    assert busy["bt"] == [(0.0, pytest.approx(0.005)), (pytest.approx(0.040), pytest.approx(0.060))]
    assert busy["wifi"] == [(pytest.approx(0.050), pytest.approx(0.052)), (pytest.approx(0.990), pytest.approx(1.0))]


def test_a_path_that_carried_nothing_is_listed_empty():
    assert path_busy([], T0, T0 + MS, paths=["wifi", "bt"]) == {"wifi": [], "bt": []}


def test_the_chunk_series_names_no_column_after_a_workload_parameter():
    """series/multipath_chunks.csv puts each run's parameters beside the records: a record column
    named like a parameter (a chunk's `bytes` beside the stream's `bytes`) would overwrite it."""
    from wearlab.catalog import CATALOG
    from wearlab.nodes.multipath_endpoints import MULTIPATH_CHUNKS_SERIES
    for name, workload in CATALOG.workloads.items():
        assert not set(MULTIPATH_CHUNKS_SERIES.columns) & set(workload.params.names()), name
