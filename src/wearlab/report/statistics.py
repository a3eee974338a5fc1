"""The statistics `wearlab compare` and `wearlab check` share: a metric's values over the runs
that measured it, a statistic of them, and seeded bootstrap intervals (the same inputs give the
same report).

- `finite(rows, metric)`: the metric's finite values in rows of runs.csv (or a run's own rows);
- `statistic(name, x)`: median, mean, p95 (numpy's linear interpolation) or max, along the last
  axis, so it applies to one sample and to BOOTSTRAP resamples of it alike;
- `resample(samples, rng)`: BOOTSTRAP resamples of each sample, drawn in the order given (each
  with replacement, its own size) - what every interval here is made from;
- `interval(estimates)`: the central 95 % of bootstrap estimates (percentiles 2.5 and 97.5);
- `spearman(x, y)`: Spearman's rank correlation of x with each row of y (average ranks for ties);
- `min_p(n, m)`: the smallest two-sided p Mann-Whitney can give for samples of n and m.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from wearlab.model.choices import Statistic

BOOTSTRAP = 2000           # resamples per interval
SEED = 20261122            # every interval's generator starts here: reports are reproducible
PERCENTILES = (2.5, 97.5)  # an interval: the central 95 % of the estimates


def finite(rows: Iterable[Mapping[str, Any]], metric: str) -> list[float]:
    out = []
    for r in rows:
        try:
            v = float(r.get(metric, ""))
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            out.append(v)
    return out


def statistic(name: Statistic | str, x: Any) -> Any:
    """The statistic of x along its last axis (a float for one sample)."""
    a = np.asarray(x, dtype=float)
    match Statistic(name):
        case Statistic.MEDIAN:
            out = np.median(a, axis=-1)
        case Statistic.MEAN:
            out = np.mean(a, axis=-1)
        case Statistic.P95:
            out = np.percentile(a, 95, axis=-1)
        case Statistic.MAX:
            out = np.max(a, axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def resample(samples: Sequence[Sequence[float]], rng: np.random.Generator) -> list[np.ndarray]:
    """BOOTSTRAP resamples of each sample: one (BOOTSTRAP, len(sample)) array per sample."""
    out = []
    for s in samples:
        x = np.asarray(s, dtype=float)
        out.append(x[rng.integers(0, len(x), (BOOTSTRAP, len(x)))])
    return out


def interval(estimates: Any) -> tuple[float, float] | None:
    """The central 95 % of the finite estimates; None when there are none."""
    e = np.asarray(estimates, dtype=float)
    e = e[np.isfinite(e)]
    if not e.size:
        return None
    lo, hi = np.percentile(e, PERCENTILES)
    return float(lo), float(hi)


def median_difference_interval(a: Sequence[float], b: Sequence[float], rng: np.random.Generator
                               ) -> tuple[float, float]:
    """95 % interval of median(b) - median(a) (`compare`: candidate - baseline)."""
    ra, rb = resample([a, b], rng)
    found = interval(np.median(rb, axis=1) - np.median(ra, axis=1))
    assert found is not None
    return found


def spearman(x: Sequence[float], y: Any) -> Any:
    """Spearman's rho of x with y (one sample of len(x) values) or with each row of y (a
    (k, len(x)) array). A constant row has no rank order: rho 0."""
    # scipy.stats is imported here, not at the top: importing it takes ~0.6 s, and every command
    # whose modules reach this one paid it (`wearlab exec NODE -- true`: 1.1 s, 0.04 s of it the command).
    from scipy.stats import rankdata

    ys = np.atleast_2d(np.asarray(y, dtype=float))
    rx = rankdata(np.asarray(x, dtype=float))
    ry = rankdata(ys, axis=1)
    dx = rx - rx.mean()
    dy = ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((dx ** 2).sum() * (dy ** 2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, (dy * dx).sum(axis=1) / np.where(den > 0, den, 1), 0.0)
    rho[~np.isfinite(ys).all(axis=1)] = np.nan
    return float(rho[0]) if np.ndim(y) == 1 else rho


def min_p(n: int, m: int) -> float:
    """The smallest two-sided p Mann-Whitney can give for sample sizes n and m (complete separation)."""
    return 2 / math.comb(n + m, n)
