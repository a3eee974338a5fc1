"""The one table of units (wearlab.model.quantities): how a value prints for a person (scaled, at
least three significant digits, never a non-zero value shown as 0), how runs.csv writes it, and
how Prometheus names it (base units); a metric's unit is checked where it is declared; and a new
metric with a new unit (energy in J) reaches runs.csv, the summary, `compare` and the exporter by
being declared once; and a value written back as YAML input (the one formatting module's other
form) parses to the same number."""

from __future__ import annotations

import csv
import json
import math
import random
import re
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from wearlab.model import quantities
from wearlab.model.quantities import UNITS
from wearlab.model.unit_input import parse_duration, parse_percent, parse_rate, parse_size
from wearlab.report.exporter import registry
from wearlab.report.live_record import LiveDoc
from wearlab.report.results import RunsCsv
from wearlab.report.summary import summarize
from wearlab.report.table import print_summary
from wearlab.catalog import CATALOG
from wearlab.model.columns import Metric

SHOWN = re.compile(r"(?P<num>-?[\d,]+(?:\.\d+)?)(?: (?P<unit>\S+))?")


def parse_shown(u: quantities.Unit, text: str) -> tuple[float, float]:
    """(value in the unit, mantissa as printed) from what `format` printed."""
    m = SHOWN.fullmatch(text)
    assert m, text
    factors = {shown: f for f, shown in u.scales}
    mantissa = float(m.group("num").replace(",", ""))
    return mantissa * factors[m.group("unit") or ""], mantissa


@pytest.mark.parametrize("symbol", list(UNITS))
def test_printed_values_read_back_within_three_digits_and_never_as_zero(symbol):
    u = UNITS[symbol]
    rng = random.Random(symbol)
    for _ in range(2000):
        v = rng.choice((1, -1)) * 10 ** rng.uniform(-9, 9)
        text = u.format(v)
        back, mantissa = parse_shown(u, text)
        assert back != 0, f"{v} printed as {text}"
        assert abs(back - v) <= 0.5e-2 * abs(v) + 1e-12 * abs(v), f"{v} printed as {text}"
        factor = u._scale(v)[0]
        smallest, largest = u.scales[0][0], u.scales[-1][0]
        if factor > smallest:      # a smaller prefix existed: the mantissa is at least 1
            assert abs(mantissa) >= 1, text
        if factor < largest:       # a larger one existed: the mantissa stays below it
            nxt = next(f for f, _ in u.scales if f > factor)
            assert abs(mantissa) < nxt / factor, text
    assert parse_shown(u, u.format(0))[0] == 0


@pytest.mark.parametrize("symbol, value, text", [
    ("J", 0.4, "400 mJ"),               # the case: not "0"
    ("J", 2.5, "2.50 J"),
    ("W", 0.012, "12.0 mW"),
    ("s", 0.0301, "30.1 ms"),           # ms below 1 s
    ("s", 3e-5, "30.0 µs"),
    ("s", 12.5, "12.5 s"),
    ("B", 512, "512 B"),
    ("B", 1500, "1.50 kB"),
    ("B", 2_300_000, "2.30 MB"),
    ("bit/s", 1.1e6, "1.10 Mbit/s"),
    ("bit/s", 500e3, "500 kbit/s"),
    ("ratio", 0.123, "12.3 %"),
    ("ratio", 1.2e-5, "0.00120 %"),
    ("count", 12345, "12,345"),
    ("count", 2.5, "2.50"),
    ("packets", 12, "12 packets"),
])
def test_readable_forms(symbol, value, text):
    assert UNITS[symbol].format(value) == text


def test_spread_prints_with_its_own_unit():
    assert UNITS["s"].format_spread(0.0301, 0.0012) == "30.1 ms [1.2 ms]"
    assert UNITS["J"].format_spread(0.4, 0.00002) == "400 mJ [20 µJ]"
    assert UNITS["s"].format_spread(0.0403, 0.0000329) == "40.3 ms [33 µs]"


def test_csv_keeps_microseconds_and_never_flattens_a_small_value():
    assert UNITS["s"].csv(0.0301) == "0.030100"              # 1 µs resolution, as runs.csv always had
    assert float(UNITS["J"].csv(4e-9)) == pytest.approx(4e-9, rel=1e-5)
    assert UNITS["count"].csv(7) == "7"


# Written back as YAML input (a plan's link shape, a parameter's default): tc's and netem's
# spelling, exact, and wearlab.model.unit_input reads the same number back. Hand-written pairs.
@pytest.mark.parametrize("fmt, parse, value, text", [
    (quantities.format_rate, parse_rate, 800, "800bit"),
    (quantities.format_rate, parse_rate, 236_700, "236.7kbit"),
    (quantities.format_rate, parse_rate, 1_100_000, "1.1Mbit"),
    (quantities.format_rate, parse_rate, 10_000_000, "10Mbit"),
    (quantities.format_rate, parse_rate, 50_000_000, "50Mbit"),
    (quantities.format_rate, parse_rate, 1_500_000_000, "1.5Gbit"),
    (quantities.format_rate, parse_rate, 1_234_567, "1234567bit"),
    (quantities.format_duration, parse_duration, 0.0, "0ms"),
    (quantities.format_duration, parse_duration, 0.00025, "250us"),
    (quantities.format_duration, parse_duration, 0.002, "2ms"),
    (quantities.format_duration, parse_duration, 0.0015, "1.5ms"),
    (quantities.format_duration, parse_duration, 0.015, "15ms"),
    (quantities.format_duration, parse_duration, 0.1 + 0.2, "300ms"),     # float noise dropped
    (quantities.format_duration, parse_duration, 1.0, "1s"),
    (quantities.format_duration, parse_duration, 120.0, "120s"),
    (quantities.format_duration, parse_duration, 5e-7, "0.5us"),
    (quantities.format_size, parse_size, 7, "7B"),
    (quantities.format_size, parse_size, 1000, "1KB"),
    (quantities.format_size, parse_size, 1024, "1KiB"),
    (quantities.format_size, parse_size, 1500, "1.5KB"),
    (quantities.format_size, parse_size, 1_000_000, "1MB"),
    (quantities.format_size, parse_size, 1_048_576, "1MiB"),
    (quantities.format_size, parse_size, 8_291_456, "8291456B"),
    (quantities.format_size, parse_size, 123_456_789, "123456789B"),
    (quantities.format_percent, parse_percent, 0.0, "0%"),
    (quantities.format_percent, parse_percent, 0.5, "0.5%"),
    (quantities.format_percent, parse_percent, 1.0, "1%"),
    (quantities.format_percent, parse_percent, 25.0, "25%"),
    (quantities.format_percent, parse_percent, 100.0, "100%"),
])
def test_yaml_forms_print_exactly_and_parse_back_to_the_same_number(fmt, parse, value, text):
    assert fmt(value) == text
    assert parse(text) == pytest.approx(value, rel=1e-12, abs=0)


@pytest.mark.parametrize("symbol, base, factor", [
    ("s", "seconds", 1), ("B", "bytes", 1), ("bit/s", "bytes_per_second", 1 / 8), ("J", "joules", 1),
    ("W", "watts", 1), ("ratio", "ratio", 1), ("count", "", 1), ("packets", "packets", 1)])
def test_prometheus_base_units(symbol, base, factor):
    u = UNITS[symbol]
    assert u.base == base
    assert u.to_prometheus(8_000.0) == pytest.approx(8_000.0 * factor)
    b = u.buckets
    assert list(b) == sorted(set(b)) and b[0] > 0 and len(b) >= 8


def test_buckets_cover_what_wearlab_measures():
    """Bounds around the values the experiments produce (base units): a connect of a few ms to a
    handover phase of tens of seconds; a TCP handshake's 60 bytes to a 10 MB download; a BT link's
    100 kB/s to a 1 Gbit/s one."""
    s, b, bps = UNITS["s"].buckets, UNITS["B"].buckets, UNITS["bit/s"].buckets
    assert s[0] <= 0.001 and s[-1] >= 60
    assert b[0] <= 100 and b[-1] >= 10e6
    assert bps[0] <= 1e3 and bps[-1] >= 125e6
    assert UNITS["ratio"].buckets[-1] == 1.0


@pytest.mark.parametrize("name, symbol, exported", [
    ("wire_connect_s", "s", "wire_connect_seconds"), ("down_goodput_bps", "bit/s", "down_goodput_bytes_per_second"),
    ("bytes_up_total", "B", "bytes_up_total_bytes"), ("down_bytes", "B", "down_bytes"),
    ("packets_up_total", "packets", "packets_up_total_packets"), ("down_stall_share", "ratio", "down_stall_share_ratio"),
    ("radio_energy_j", "J", "radio_energy_joules"), ("http_code", "count", "http_code")])
def test_names_in_base_units(name, symbol, exported):
    assert UNITS[symbol].prometheus_name(name) == exported


def test_a_metric_is_declared_with_a_known_unit_and_an_exportable_name():
    with pytest.raises(ValueError, match="unknown unit 'furlong'"):
        Metric("distance_walked", "furlong", doc="d")
    with pytest.raises(ValueError, match="_total"):
        Metric("retries_total", "count", doc="d")
    with pytest.raises(ValueError, match="spell its unit out"):
        Metric("delay_ms", "count", doc="d")
    with pytest.raises(ValueError, match="no doc"):
        Metric("radio_energy_j", "J")
    assert Metric("radio_energy_j", "J", doc="d").quantity.base == "joules"


def test_every_declared_metric_has_its_own_exported_name():
    declared = [*(m for w in CATALOG.workloads.values() for m in w.metrics),
                *(m for k in CATALOG.node_kinds.values() for m in k.metrics)]
    names: dict[str, str] = {}
    for m in declared:
        name = m.quantity.prometheus_name(m.name)
        assert names.setdefault(name, m.name) == m.name, f"{m.name} and {names[name]} are both exported as {name}"


# -- a new metric with a new unit, declared once ------------------------------------------------

ENERGY = Metric("radio_energy_j", "J", better="lower", label="radio energy", summarised=True,
                doc="energy the watch's radio spent in the run")
DECLARED = (Metric("wire_connect_s", "s", label="connect", summarised=True, doc="SYN -> SYN-ACK"), ENERGY)


def energy_results(tmp_path, name: str, joules: list[float], experiment: str = "energy"):
    """A results directory as the runner writes it, for a throwaway declaration."""
    d = tmp_path / name
    d.mkdir(parents=True)
    (d / "metadata.json").write_text(json.dumps({
        "experiment": experiment, "workload": {"kind": "throwaway"},
        "columns": {"params": ["radio"], "metrics": {m.name: m.describe() for m in DECLARED}}}))
    runs = RunsCsv(d / "runs.csv", ["run", "radio", "status", *(m.name for m in DECLARED)],
                   units={m.name: m.unit for m in DECLARED})
    for i, j in enumerate(joules):
        runs.append({"run": i, "radio": "bt", "status": "ok", "wire_connect_s": 0.030 + i / 10000, "radio_energy_j": j})
    runs.close()
    return d


def test_energy_in_joules_reaches_csv_summary_compare_and_the_exporter(tmp_path):
    from wearlab.report import compare as C

    joules = [0.38, 0.39, 0.40, 0.41, 0.42, 0.40, 0.39, 0.41]
    base = energy_results(tmp_path, "base", joules)
    with (base / "runs.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["radio_energy_j"]) for r in rows] == pytest.approx(joules, abs=1e-6)

    console = Console(record=True, width=200)
    cells = summarize(rows, ["radio"], [m.name for m in DECLARED])
    print_summary(console, "energy", cells, [], ["radio"], DECLARED, {}, ())
    table = console.export_text()
    assert "radio energy" in table
    shown = re.search(r"([\d.]+) mJ \[", table)
    assert shown and 395 <= float(shown.group(1)) <= 405, table     # the median, 0.40 J, in mJ: not "0"

    more = energy_results(tmp_path, "cand", [j * 1.5 for j in joules])
    rep = C.compare(C.load_side(base, "BASELINE"), C.load_side(more, "CANDIDATE"), C.Thresholds())
    (row,) = [r for r in rep.rows if r.metric == "radio_energy_j"]
    assert row.unit == "J" and row.verdict == "regression"
    assert 0.45 <= row.change <= 0.55
    md = C.to_markdown(rep)
    line = next(l for l in md.splitlines() if "radio_energy_j" in l)
    base_mj = re.search(r"\| ([\d.]+) mJ \(n=8\)", line)
    assert base_mj and 395 <= float(base_mj.group(1)) <= 405, line
    assert math.isclose(row.median_cand / row.median_base, 1.5, rel_tol=1e-9)

    # While the experiment runs, its rows so far are a histogram in joules.
    (base / "control").mkdir()
    (base / "control" / "heartbeat").write_text(json.dumps({"t_ns": time.time_ns(), "pid": 1}))
    (base / "control" / "live.json").write_text(LiveDoc(experiment="energy").to_json())
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value
           for fam in text_string_to_metric_families(generate_latest(registry(base)).decode()) for s in fam.samples}
    cell = (("cell", "radio=bt"), ("experiment", "energy"))
    assert got[("wearlab_run_radio_energy_joules_count", cell)] == len(joules)
    assert got[("wearlab_run_radio_energy_joules_sum", cell)] == pytest.approx(sum(joules), abs=1e-5)
    below = {float(dict(k[1])["le"]): v for k, v in got.items() if k[0] == "wearlab_run_radio_energy_joules_bucket"}
    assert below[0.25] == 0 and below[0.5] == len(joules)        # 0.38-0.42 J, between those bounds


def test_the_summary_fits_100_columns_and_keeps_every_metric():
    """Ten summarised metrics of a cell cannot share one 100-column table: the table splits, each
    part keeps the cell's keys, no line is wider than 100, and every median appears once."""
    from wearlab.report.summary import Cell

    many = tuple(Metric(f"phase{i}_s", "s", label=f"phase {i}", summarised=True, doc="d") for i in range(10))
    cells = [Cell(params={"size": size}, ok=3, failed=0,
                  stats={m.name: (0.010 * (i + 1), 0.011 * (i + 1), 0.012 * (i + 1)) for i, m in enumerate(many)})
             for size in ("1KB", "1MB")]
    console = Console(record=True, width=200)
    print_summary(console, "wide", cells, [], ["size"], many, {}, ())
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 100, text
    medians = ["11.0", "22.0", "33.0", "44.0", "55.0", "66.0", "77.0", "88.0", "99.0", "110"]   # ms, 3 digits
    for median in medians:                   # each in one part, once per cell
        assert text.count(f" {median} ms [") == 2, (median, text)
    parts = re.findall(r"wide: median \[IQR\] per cell \((\d)/(\d)\)", text)
    assert len(parts) >= 2 and all(b == str(len(parts)) for _, b in parts)
    assert text.count("1KB") == len(parts) and text.count("1MB") == len(parts)
