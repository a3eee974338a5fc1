"""Parse the unit-bearing strings of wearlab YAML: rates, durations, sizes, percents, and the
results' energies, powers and shares (`parse_quantity`: a value in a metric's unit, as a claim's
`paper:` gives it).

Every parser takes the raw YAML value (text, or a number when the user forgot the unit), returns a
plain SI number, and raises ValueError whose message says what to write instead. Units are required
on purpose: a bare `10` under `delay:` or `rate:` is a guess we refuse to make. This module only
parses: printing a number back in the same syntax (`format_rate`, `format_duration`, ...) is
wearlab.model.quantities', the one formatting module, and a formatted value parses to the same number.
"""

from __future__ import annotations

import math
import re

from wearlab.model.quantities import plain_number

_NUMBER = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"


def _split(text: str) -> tuple[str, str] | None:
    """Split '1.5 Mbit/s' into ('1.5', 'Mbit/s'); None when it does not start with a number."""
    m = re.fullmatch(_NUMBER + r"\s*(?P<unit>[^\d\s].*?)?", text.strip())
    if not m:
        return None
    return m.group("num"), (m.group("unit") or "").strip()


def _as_text(value: object, example: str) -> str | float:
    """Return the value as stripped text, or as a float when YAML gave a bare number."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a value with a unit, like '{example}', got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a value with a unit, like '{example}', got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise ValueError(f"empty value; write something like '{example}'")
    return text


def _finite_nonnegative(value: float, original: str, what: str) -> None:
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"'{original}' is not a usable {what}")
    if value < 0:
        raise ValueError(f"'{original}' is impossible: a {what} cannot be negative")


# ---------------------------------------------------------------------------------------------
# Rates: tc's own syntax ("10Mbit") so values can be pasted into tc and back. "Mbps" is refused
# because tc reads "mbps" as megaBYTES per second, an 8x trap.

_RATE_PREFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_rate(value: object) -> int:
    """'10Mbit', '1.5Mbit/s', '500kbit', '1Gbit', '800bit' -> bits per second (int, > 0)."""
    text = _as_text(value, "10Mbit")
    if isinstance(text, float):
        raise ValueError(f"'{plain_number(text)}' has no unit; write '{plain_number(text)}Mbit' (units: bit, kbit, Mbit, Gbit)")
    parts = _split(text)
    if parts is None:
        raise ValueError(f"'{text}' is not a rate; write something like '10Mbit'")
    num, unit = parts
    prefix, rest = (unit[0], unit[1:]) if unit[:1].lower() in ("k", "m", "g") else ("", unit)
    canon = _canon_prefix(prefix)
    if rest.lower() in ("bit", "bits", "bit/s", "bits/s"):
        bps = float(num) * _RATE_PREFIX[prefix.lower()]
        _finite_nonnegative(bps, text, "rate")
        if round(bps) <= 0:
            raise ValueError(f"'{text}' is impossible: a rate must be greater than zero")
        return int(round(bps))
    if rest in ("Bps", "B/s", "BPS"):
        # Explicitly bytes per second: offer the converted value, and the likely typo.
        raise ValueError(
            f"'{text}' is {_BYTE_WORD[prefix.lower()]} per second but wearlab rates are in bits; "
            f"write '{plain_number(float(num) * 8)}{canon}bit' (or '{num}{canon}bit' if you meant bits)")
    if rest == "b/s":
        raise ValueError(f"'{text}': write '{num}{canon}bit' (wearlab uses tc's spelling)")
    if rest.lower() in ("bps", "b/s"):
        raise ValueError(
            f"'{text}' is ambiguous (tc reads '{(prefix + 'bps').lower()}' as "
            f"{_BYTE_WORD[prefix.lower()]} per second); write '{num}{canon}bit'")
    if rest in ("", "b", "B"):
        raise ValueError(f"'{text}' has no rate unit; write '{num}{canon or 'M'}bit'")
    raise ValueError(f"'{text}' has an unknown rate unit '{unit}'; use bit, kbit, Mbit or Gbit (e.g. '10Mbit')")


_BYTE_WORD = {"": "BYTES", "k": "kiloBYTES", "m": "megaBYTES", "g": "gigaBYTES"}


def _canon_prefix(prefix: str) -> str:
    return {"": "", "k": "k", "m": "M", "g": "G"}[prefix.lower()]


# ---------------------------------------------------------------------------------------------
# Durations: netem's units. Long spellings ("msec", "millis") get the short form suggested so the
# YAML stays uniform and greppable.

_DURATION_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_DURATION_ALIASES = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "msec": "ms", "msecs": "ms", "milli": "ms", "millis": "ms", "millisecond": "ms", "milliseconds": "ms",
    "usec": "us", "usecs": "us", "micros": "us", "microsecond": "us", "microseconds": "us",
}


def parse_duration(value: object, *, bare_unit: str = "ms") -> float:
    """'10ms', '1.5ms', '250us', '2s', '10 ms' -> seconds (float, >= 0). `bare_unit` is the unit
    suggested for a bare number (a link delay is likely ms, a timeout s)."""
    text = _as_text(value, "10ms")
    if isinstance(text, float):
        raise ValueError(f"'{plain_number(text)}' has no unit; write '{plain_number(text)}{bare_unit}' (units: s, ms, us)")
    parts = _split(text)
    if parts is None:
        raise ValueError(f"'{text}' is not a duration; write something like '10ms'")
    num, unit = parts
    key = unit if unit == "µs" else unit.lower()
    if key in _DURATION_UNITS:
        seconds = float(num) * _DURATION_UNITS[key]
        _finite_nonnegative(seconds, text, "duration")
        return seconds
    if key in _DURATION_ALIASES:
        raise ValueError(f"'{text}': write '{num}{_DURATION_ALIASES[key]}'")
    if key in ("m", "min", "mins", "minute", "minutes"):
        raise ValueError(f"'{text}': minutes are not a unit here; write '{plain_number(float(num) * 60)}s'")
    if key in ("ns", "nsec"):
        raise ValueError(f"'{text}': nanoseconds are below netem's resolution; write '{plain_number(float(num) / 1000)}us'")
    if not key:
        raise ValueError(f"'{text}' has no unit; write '{num}{bare_unit}' (units: s, ms, us)")
    raise ValueError(f"'{text}' has an unknown time unit '{unit}'; use s, ms or us (e.g. '10ms')")


# ---------------------------------------------------------------------------------------------
# Sizes: decimal (KB = 1000) and binary (KiB = 1024), both explicit. A lowercase 'b' means bits,
# which is almost always a typo for bytes in a size, so it is refused.

_SIZE_UNITS = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
}


def parse_size(value: object) -> int:
    """'1KB' -> 1000, '1KiB' -> 1024, '1MB', '1MiB', '100B', '64kB', bare integer -> bytes (int, >= 0)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"'{value}' is impossible: a size cannot be negative")
        return value
    text = _as_text(value, "100KB")
    if isinstance(text, float):
        raise ValueError(f"'{plain_number(text)}' is not a whole number of bytes; write e.g. '{plain_number(text)}KB'")
    parts = _split(text)
    if parts is None:
        raise ValueError(f"'{text}' is not a size; write something like '100KB'")
    num, unit = parts
    if not unit:
        if num.startswith("-"):
            raise ValueError(f"'{text}' is impossible: a size cannot be negative")
        if not re.fullmatch(r"\+?\d+", num):
            raise ValueError(f"'{text}' is not a whole number of bytes; write e.g. '{num}KB'")
        return int(num)
    m = re.fullmatch(r"(?P<p>[kKmMgG]?)(?P<i>i?)(?P<b>[bB])", unit)
    if m and m.group("b") == "b":
        raise ValueError(
            f"'{text}' means {_BIT_WORD[m.group('p').lower()]}; write "
            f"'{num}{m.group('p').upper()}{m.group('i')}B' for {_BYTE_WORD[m.group('p').lower()].lower()}")
    if m and m.group("p") == "m":
        raise ValueError(f"'{text}' reads as millibytes; write '{num}MB'")
    if m:
        size = float(num) * _SIZE_UNITS[(m.group("p") + m.group("i") + "B").upper()]
        _finite_nonnegative(size, text, "size")
        if size != int(size):
            raise ValueError(f"'{text}' is not a whole number of bytes")
        return int(size)
    if re.fullmatch(r"[kKmMgG]i?", unit):
        raise ValueError(f"'{text}' needs a B for bytes; write '{num}{unit[0].upper()}{unit[1:]}B'")
    raise ValueError(f"'{text}' has an unknown size unit '{unit}'; use B, KB, MB, GB, KiB, MiB or GiB")


_BIT_WORD = {"": "bits", "k": "kilobits", "m": "megabits", "g": "gigabits"}


# ---------------------------------------------------------------------------------------------
# Percents: the '%' is required so that 0.01 (a fraction) and 0.01% are never confused.


def parse_percent(value: object) -> float:
    """'1%', '0.5%' -> percent as a float in [0, 100]."""
    text = _as_text(value, "1%")
    if isinstance(text, float):
        hint = f"write '{plain_number(text)}%'"
        if 0 < text < 1:
            hint += f" (or '{plain_number(text * 100)}%' if {plain_number(text)} was a fraction)"
        raise ValueError(f"'{plain_number(text)}' has no unit; {hint}")
    parts = _split(text)
    if parts is None:
        raise ValueError(f"'{text}' is not a percent; write something like '1%'")
    num, unit = parts
    if unit != "%":
        if not unit:
            raise ValueError(f"'{text}' has no unit; write '{num}%'")
        raise ValueError(f"'{text}' is not a percent; write '{num}%'")
    pct = float(num)
    _finite_nonnegative(pct, text, "percentage")
    if pct > 100:
        raise ValueError(f"'{text}' is impossible: a probability cannot exceed 100%")
    return pct


# ---------------------------------------------------------------------------------------------
# Energy and power: the results' units (J, W), for the paper's values a claim compares with.

_SI_PREFIX = {"": 1.0, "k": 1e3, "m": 1e-3, "u": 1e-6, "µ": 1e-6}


def _si(value: object, symbol: str, what: str, example: str) -> float:
    text = _as_text(value, example)
    if isinstance(text, float):
        raise ValueError(f"'{plain_number(text)}' has no unit; write '{plain_number(text)} {symbol}' "
                         f"(units: µ{symbol}, m{symbol}, {symbol}, k{symbol})")
    parts = _split(text)
    if parts is None:
        raise ValueError(f"'{text}' is not {what}; write something like '{example}'")
    num, unit = parts
    if unit[-1:] == symbol and unit[:-1] in _SI_PREFIX:
        v = float(num) * _SI_PREFIX[unit[:-1]]
        _finite_nonnegative(v, text, what.split()[-1])
        return v
    raise ValueError(f"'{text}' has no {what.split()[-1]} unit; use µ{symbol}, m{symbol}, {symbol} or k{symbol} "
                     f"(e.g. '{example}')")


def parse_energy(value: object) -> float:
    """'60 mJ', '1.5J', '400uJ' -> joules (float, >= 0)."""
    return _si(value, "J", "an energy", "60 mJ")


def parse_power(value: object) -> float:
    """'405 mW', '1.2W' -> watts (float, >= 0)."""
    return _si(value, "W", "a power", "405 mW")


def parse_number(value: object) -> float:
    """A plain number (a count, packets, a ratio of two values): 1.75, '1.75' -> 1.75."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"'{value}' is not a plain number; write e.g. 1.75") from None
    if math.isnan(v):
        raise ValueError(f"'{value}' is not a usable number")
    return v


def parse_fraction(value: object) -> float:
    """A number, or a fraction written as text: '1/16' -> 0.0625, 0.5 -> 0.5 (app_scale's spelling)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"expected a number or a fraction, got {value!r}")
    try:
        if isinstance(value, str) and "/" in value:
            num, den = value.split("/", 1)
            return float(num) / float(den)
        return float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        raise ValueError(f"{value!r} is not a number or a fraction; write e.g. 1, 0.125 or 1/8") from None


def parse_share(value: object) -> float:
    """A share as metrics of unit `ratio` hold it, 0..1: '12%' -> 0.12, 0.12 -> 0.12."""
    if isinstance(value, str) and value.strip().endswith("%"):
        return parse_percent(value) / 100
    v = parse_number(value)
    if not 0 <= v <= 1:
        raise ValueError(f"'{value}' is no share: a share is a fraction 0..1 or a percent (e.g. '12%')")
    return v


# The parser of each result unit's values (wearlab.model.quantities.UNITS' symbols).
QUANTITY_PARSERS = {
    "s": lambda v: parse_duration(v, bare_unit="s"),
    "B": parse_size,
    "bit/s": parse_rate,
    "J": parse_energy,
    "W": parse_power,
    "count": parse_number,
    "packets": parse_number,
    "ratio": parse_share,
}


def parse_quantity(value: object, symbol: str) -> float:
    """A value in a result unit (`symbol`, as a metric declares it): '147 ms' for s, '523KB' for B,
    '2.6Mbit' for bit/s, '60 mJ' for J, '12%' for ratio; a bare 0 (and .inf) needs no unit; a
    leading '-' negates (a difference of two values)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (value == 0 or math.isinf(value)):
        return float(value)
    if isinstance(value, str) and value.strip().startswith("-"):
        return -parse_quantity(value.strip()[1:], symbol)
    return float(QUANTITY_PARSERS[symbol](value))
