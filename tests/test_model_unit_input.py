"""Unit strings: accepted forms, refused forms with the suggestion the user needs (printing them
back, and the round trips, are wearlab.model.quantities': tests/test_quantities.py)."""

import pytest

from wearlab.model.unit_input import (
    parse_duration,
    parse_percent,
    parse_rate,
    parse_size,
)


@pytest.mark.parametrize("text, bps", [
    ("10Mbit", 10_000_000), ("1.5Mbit", 1_500_000), ("500kbit", 500_000), ("1Gbit", 1_000_000_000),
    ("800bit", 800), ("10Mbit/s", 10_000_000), ("10mbit", 10_000_000), ("500Kbit", 500_000),
    ("1gbit", 1_000_000_000), ("10 Mbit", 10_000_000), ("1.1Mbit", 1_100_000),
])
def test_rate_accepts(text, bps):
    assert parse_rate(text) == bps
    assert isinstance(parse_rate(text), int)


@pytest.mark.parametrize("text, suggestion", [
    ("10Mbps", "'10Mbit'"), ("10mbps", "'10Mbit'"), ("500kbps", "'500kbit'"), ("800bps", "'800bit'"),
    ("10MBps", "'80Mbit'"), ("10MB/s", "'80Mbit'"), ("10", "'10Mbit'"), (10, "'10Mbit'"), ("10M", "'10Mbit'"),
])
def test_rate_refuses_with_suggestion(text, suggestion):
    with pytest.raises(ValueError) as e:
        parse_rate(text)
    assert suggestion in str(e.value)


def test_rate_mbps_explains_tc_trap():
    with pytest.raises(ValueError, match="megaBYTES"):
        parse_rate("10Mbps")


@pytest.mark.parametrize("text", ["0Mbit", "-1Mbit", "0bit"])
def test_rate_impossible(text):
    with pytest.raises(ValueError, match="impossible"):
        parse_rate(text)


@pytest.mark.parametrize("value", [None, True, [1], "fast", "10 furlongs"])
def test_rate_garbage(value):
    with pytest.raises(ValueError):
        parse_rate(value)


@pytest.mark.parametrize("text, seconds", [
    ("10ms", 0.010), ("1.5ms", 0.0015), ("250us", 0.00025), ("2s", 2.0), ("0.5s", 0.5), ("10 ms", 0.010),
    ("0ms", 0.0), ("120s", 120.0),
])
def test_duration_accepts(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text, suggestion", [
    ("10msec", "'10ms'"), ("10 millis", "'10ms'"), ("10", "'10ms'"), (10, "'10ms'"), ("2 seconds", "'2s'"),
    ("2min", "'120s'"),
])
def test_duration_refuses_with_suggestion(text, suggestion):
    with pytest.raises(ValueError) as e:
        parse_duration(text)
    assert suggestion in str(e.value)


def test_duration_bare_unit_hint():
    with pytest.raises(ValueError, match="'120s'"):
        parse_duration(120, bare_unit="s")


def test_duration_negative_is_impossible():
    with pytest.raises(ValueError, match="impossible"):
        parse_duration("-5ms")


@pytest.mark.parametrize("value, nbytes", [
    ("1KB", 1000), ("1KiB", 1024), ("1MB", 1_000_000), ("1MiB", 1_048_576), ("100B", 100), ("64kB", 64_000),
    (100, 100), ("100", 100), ("1.5KB", 1500), ("1 MB", 1_000_000), ("1GB", 10**9), (0, 0),
])
def test_size_accepts(value, nbytes):
    assert parse_size(value) == nbytes
    assert isinstance(parse_size(value), int)


@pytest.mark.parametrize("text, suggestion", [
    ("1kb", "'1KB'"), ("1Kb", "'1KB'"), ("1Mb", "'1MB'"), ("1K", "'1KB'"), ("1mB", "'1MB'"),
])
def test_size_refuses_bits_with_suggestion(text, suggestion):
    with pytest.raises(ValueError) as e:
        parse_size(text)
    assert suggestion in str(e.value)


def test_size_kb_lowercase_b_means_bits():
    with pytest.raises(ValueError, match="kilobits"):
        parse_size("1kb")


@pytest.mark.parametrize("value", [-5, "-5", "-1KB", "1.5B", 1.5])
def test_size_impossible_or_fractional(value):
    with pytest.raises(ValueError):
        parse_size(value)


@pytest.mark.parametrize("text, pct", [("1%", 1.0), ("0.5%", 0.5), ("100%", 100.0), ("0%", 0.0), ("1 %", 1.0)])
def test_percent_accepts(text, pct):
    assert parse_percent(text) == pct


@pytest.mark.parametrize("value", ["1", 1, 0.01])
def test_percent_bare_number_suggests_percent_sign(value):
    with pytest.raises(ValueError) as e:
        parse_percent(value)
    assert f"'{value}%'" in str(e.value)


def test_percent_fraction_hint():
    with pytest.raises(ValueError, match="'1%' if 0.01 was a fraction"):
        parse_percent(0.01)


@pytest.mark.parametrize("text", ["101%", "-1%"])
def test_percent_impossible(text):
    with pytest.raises(ValueError, match="impossible"):
        parse_percent(text)
