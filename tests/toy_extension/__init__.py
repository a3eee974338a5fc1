"""A toy extension of wearlab, built only by following docs/extending.md: a workload
(`toy_exec.py`), a node kind (`toy_marker.py`), each with a result column, registered through
the catalog (`CATALOG.extended`, as a kind outside `src/wearlab/catalog.py` is). Used by
tests/test_extending.py with the experiment `toy.yaml`."""

from __future__ import annotations

from pathlib import Path

from wearlab.catalog import CATALOG

from toy_extension.toy_exec import ToyExec
from toy_extension.toy_marker import ToyMarker

TOY_CATALOG = CATALOG.extended(node_kinds=[ToyMarker], workloads=[ToyExec])
EXPERIMENT = Path(__file__).with_name("toy.yaml")
