"""The results directory: results/<experiment>/<UTC timestamp>/ with `latest` beside it.

Rows are appended and flushed one by one (and fsync'ed), so a crash, Ctrl-C or `kill -9` never
loses a finished run.
"""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from wearlab.model import quantities

# `wearlab check`'s verdicts in a results directory (report.check writes it; report.claim_rows and
# report.merge read it).
CLAIMS_FILE = "claims.json"

def utc_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def new_results_dir(base: Path, experiment: str) -> Path:
    root = base / experiment
    root.mkdir(parents=True, exist_ok=True)
    stamp = utc_stamp()
    d, n = root / stamp, 1
    while d.exists():
        n += 1
        d = root / f"{stamp}-{n}"
    d.mkdir()
    return d


def point_latest(results_dir: Path) -> None:
    link = results_dir.parent / "latest"
    tmp = results_dir.parent / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(results_dir.name)
    tmp.replace(link)


def write_yaml(path: Path, doc: Any) -> None:
    y = YAML()
    y.default_flow_style = False
    with path.open("w") as f:
        y.dump(doc, f)


def write_json(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)


class RunsCsv:
    """runs.csv: one row per run, a fixed header decided before the first run. `units`: metric
    column -> its unit's symbol (wearlab.model.quantities), which decides how a value is written;
    other columns as before (floats with 6 decimals)."""

    def __init__(self, path: Path, columns: list[str], units: dict[str, str] | None = None):
        self.path = path
        self.columns = columns
        self.units = {c: quantities.unit(u) for c, u in (units or {}).items()}
        self._f = path.open("w", newline="")
        self._w = csv.DictWriter(self._f, fieldnames=columns, extrasaction="raise")
        self._w.writeheader()
        self._sync()

    def append(self, row: dict[str, Any]) -> None:
        self._w.writerow({k: _cell(row.get(k), self.units.get(k)) for k in self.columns})
        self._sync()

    def _sync(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()


def _cell(v: Any, unit: quantities.Unit | None = None) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return unit.csv(v) if unit is not None else f"{v:.6f}"
    return v


def read_runs(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))
