"""Closed sets of values that several layers name: one enum each, so a producer (a node kind)
and its readers (the live record, the exporter, `wearlab top`) cannot drift apart."""

from __future__ import annotations

from enum import StrEnum


class RadioState(StrEnum):
    """A wearable's Bluetooth radio (nodes.radio: seed 003 section 3). A StrEnum: it is written
    as its value into series CSVs and live.json."""

    ACTIVE = "active"
    SNIFF = "sniff"      # asleep: the link holds what it is given
    WAKING = "waking"    # leaving Sniff: the recovery delay runs
