"""Time intervals: the union of overlapping ones (a radio busy while any of its flights is)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T", int, float)


def union(intervals: Iterable[tuple[T, T]]) -> list[tuple[T, T]]:
    """Sorted, disjoint intervals covering exactly what `intervals` cover; intervals that touch
    (one ends where the next begins) become one; empty ones (end <= start) are dropped."""
    merged: list[list[T]] = []
    for a, b in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]
