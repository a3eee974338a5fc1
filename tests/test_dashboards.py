"""The provisioned dashboards are the generator's output, valid Grafana JSON, and every metric
their queries name is one the exporter emits (a panel never waits for a series that cannot come)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from wearlab.catalog import CATALOG
from wearlab.report import dashboards
from wearlab.report.exporter import LiveRuns, run_family

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = ("_bucket", "_count", "_sum", "_total")
PROMQL_WORDS = {"sum", "by", "rate", "increase", "changes", "histogram_quantile", "label_values", "le", "metric",
                "cell", "stream", "experiment", "link", "source", "direction", "queue", "node", "state",
                "part", "where"}


def exported_names() -> set[str]:
    names = set()
    for fam in LiveRuns(ROOT / "nothing-here").collect():
        names.add(fam.name)
        names.update(fam.name + s for s in SUFFIXES)
    # The per-run histograms: one for each metric the workload and node kinds declare.
    for m in [*(m for w in CATALOG.workloads.values() for m in w.metrics),
              *(m for k in CATALOG.node_kinds.values() for m in k.metrics)]:
        name = run_family(m.name, m.unit)
        names.add(name)
        names.update(name + s for s in SUFFIXES)
    return names


def test_files_are_the_generators_output():
    for name, doc in dashboards.all_dashboards().items():
        assert json.loads((ROOT / "dashboards" / name).read_text()) == doc, f"regenerate {name}"


def test_valid_grafana_json():
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        doc = json.loads(path.read_text())
        assert doc["schemaVersion"] >= 36 and doc["uid"] and doc["title"]
        ids = [p["id"] for p in doc["panels"]]
        assert len(ids) == len(set(ids)), path
        for p in doc["panels"]:
            assert p["datasource"] == {"type": "prometheus", "uid": "wearlab-prometheus"}
            assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"])


def test_every_queried_metric_is_exported():
    names = exported_names()
    for path in sorted((ROOT / "dashboards").glob("*.json")):
        doc = json.loads(path.read_text())
        exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
        exprs += [a["expr"] for a in doc["annotations"]["list"]]
        exprs += [doc["templating"]["list"][0]["definition"]]
        for expr in exprs:
            # A selector by name pattern (per-run histograms of one unit) names the families it matches.
            for pattern in re.findall(r'__name__=~"([^"]+)"', expr):
                assert any(re.fullmatch(pattern, n) for n in names), f"{path.name}: {pattern} matches no export ({expr})"
            for word in re.findall(r"\bwearlab_[a-z0-9_]+", re.sub(r'"[^"]*"', '""', expr)):
                assert word in names, f"{path.name}: {word} is not exported ({expr})"
