"""`wearlab compare`: two runs of the same thing pass, a real shift fails, the worse direction is
the metric's declared one, small samples are inconclusive (not a pass), mismatched experiments
and bad thresholds are exit 2; Markdown and JUnit come out parseable."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from wearlab.cli import main
from wearlab.report.results import RunsCsv

METRICS = {"owd_median_s": {"unit": "s", "better": "lower", "label": "OWD"},
           "goodput_bps": {"unit": "bit/s", "better": "higher", "label": "goodput"},
           "messages": {"unit": "count", "better": "none", "label": "messages"}}


def results(tmp_path, name: str, owd: list[float], goodput: list[float], *, experiment="proxy-check",
            cells=("cbr", "bulk"), failed: int = 0):
    d = tmp_path / name
    d.mkdir()
    (d / "metadata.json").write_text(json.dumps({
        "experiment": experiment, "workload": {"kind": "stream"}, "machine": {"kernel": "6.12"},
        "columns": {"params": ["pattern", "rate"], "metrics": METRICS, "series": {}}}))
    runs = RunsCsv(d / "runs.csv", ["run", "repetition", "pattern", "rate", "status", "error", *METRICS])
    n = 0
    for cell in cells:
        for i, (o, g) in enumerate(zip(owd, goodput, strict=True)):
            n += 1
            runs.append({"run": n, "repetition": i + 1, "pattern": cell, "rate": 500000,
                         "status": "failed" if i < failed else "ok", "owd_median_s": o, "goodput_bps": g,
                         "messages": 100})
    runs.close()
    return d


def sample(mean: float, sd: float, n: int, seed: int) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, sd, n))


def run(*argv) -> int:
    return main(["compare", *map(str, argv)])


def test_same_distribution_twice_passes(tmp_path, capsys):
    a = results(tmp_path, "a", sample(0.030, 0.001, 8, 1), sample(1e6, 1e4, 8, 2))
    b = results(tmp_path, "b", sample(0.030, 0.001, 8, 3), sample(1e6, 1e4, 8, 4))
    assert run(a, b, "--json", tmp_path / "r.json") == 0
    doc = json.loads((tmp_path / "r.json").read_text())
    assert {r["verdict"] for r in doc["rows"]} <= {"same"}
    assert len(doc["rows"]) == 4            # 2 cells x 2 metrics with a direction ("messages" has none)


def test_fifty_ms_more_is_a_regression(tmp_path):
    a = results(tmp_path, "a", sample(0.030, 0.002, 8, 1), sample(1e6, 1e4, 8, 2))
    b = results(tmp_path, "b", sample(0.080, 0.002, 8, 3), sample(1e6, 1e4, 8, 4))
    assert run(a, b, "--markdown", tmp_path / "r.md", "--junit", tmp_path / "j.xml",
               "--json", tmp_path / "r.json") == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    bad = [r for r in doc["rows"] if r["verdict"] == "regression"]
    assert {(r["metric"], r["cell"]) for r in bad} == {("owd_median_s", "pattern=cbr"), ("owd_median_s", "pattern=bulk")}
    for r in bad:
        assert 0.045 <= r["ci"][0] <= r["ci"][1] <= 0.055     # the CI brackets the 50 ms shift
        assert r["p"] < 0.001
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert int(suite.get("failures")) == 2 == len(suite.findall("testcase/failure"))
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("**REGRESSION in 2 of 4") and md.count("| regression |") == 2


def test_the_worse_direction_is_the_declared_one(tmp_path):
    a = results(tmp_path, "a", sample(0.030, 0.001, 8, 1), sample(1e6, 1e4, 8, 2))
    lower_goodput = results(tmp_path, "b", sample(0.030, 0.001, 8, 3), sample(0.8e6, 1e4, 8, 4))
    faster = results(tmp_path, "c", sample(0.020, 0.001, 8, 5), sample(1e6, 1e4, 8, 6))
    assert run(a, lower_goodput, "--json", tmp_path / "r.json") == 1
    assert {r["metric"] for r in json.loads((tmp_path / "r.json").read_text())["rows"]
            if r["verdict"] == "regression"} == {"goodput_bps"}
    assert run(a, faster, "--json", tmp_path / "r2.json") == 0
    assert {r["verdict"] for r in json.loads((tmp_path / "r2.json").read_text())["rows"]
            if r["metric"] == "owd_median_s"} == {"improvement"}


def test_thresholds_tolerate_small_shifts(tmp_path):
    a = results(tmp_path, "a", sample(0.030, 0.0002, 8, 1), sample(1e6, 1e3, 8, 2))
    b = results(tmp_path, "b", sample(0.0306, 0.0002, 8, 3), sample(1e6, 1e3, 8, 4))   # +2 %, significant
    assert run(a, b, "--threshold", "0.01") == 1
    assert run(a, b) == 0                                                             # default 5 %
    (tmp_path / "t.yaml").write_text("threshold: 0.01\nmetrics:\n  owd_median_s: {rel: 0.01, abs: 0.001}\n")
    assert run(a, b, "--thresholds", tmp_path / "t.yaml") == 0                        # < 1 ms: no regression


def test_small_samples_are_inconclusive_not_a_pass(tmp_path):
    a = results(tmp_path, "a", [0.030, 0.031], [1e6, 1e6])
    b = results(tmp_path, "b", [0.090, 0.091], [1e6, 1e6])
    assert run(a, b, "--json", tmp_path / "r.json") == 0
    assert {r["verdict"] for r in json.loads((tmp_path / "r.json").read_text())["rows"]} == {"inconclusive"}


def test_failed_runs_are_left_out(tmp_path):
    a = results(tmp_path, "a", sample(0.030, 0.001, 8, 1), sample(1e6, 1e4, 8, 2))
    b = results(tmp_path, "b", [9.0, 9.0] + sample(0.030, 0.001, 6, 3), sample(1e6, 1e4, 8, 4), failed=2)
    assert run(a, b) == 0


def test_mismatched_experiments_are_bad_input(tmp_path, capsys):
    a = results(tmp_path, "a", [0.03] * 8, [1e6] * 8)
    b = results(tmp_path, "b", [0.03] * 8, [1e6] * 8, experiment="bufferbloat")
    assert run(a, b) == 2
    err = capsys.readouterr().err
    assert "'proxy-check'" in err and "'bufferbloat'" in err


def test_no_cell_in_common_is_bad_input(tmp_path, capsys):
    a = results(tmp_path, "a", [0.03] * 8, [1e6] * 8, cells=("cbr",))
    b = results(tmp_path, "b", [0.03] * 8, [1e6] * 8, cells=("bulk",))
    assert run(a, b) == 2 and "no cell in common" in capsys.readouterr().err


@pytest.mark.parametrize("text, expected", [
    ("alpha: 2\n", "t.yaml:1: alpha"),
    ("metrics:\n  owd_median_s: {rell: 0.1}\n", "t.yaml:2: metrics.owd_median_s.rell"),
])
def test_bad_thresholds_file_is_located(tmp_path, capsys, text, expected):
    a = results(tmp_path, "a", [0.03] * 8, [1e6] * 8)
    (tmp_path / "t.yaml").write_text(text)
    assert run(a, a, "--thresholds", tmp_path / "t.yaml") == 2
    assert expected in capsys.readouterr().err


def test_missing_directory_is_bad_input(tmp_path, capsys):
    assert run(tmp_path / "nope", tmp_path / "nope2") == 2
    assert "BASELINE" in capsys.readouterr().err


# -- end to end: the `make compare-proxy` workflow on a real experiment -------------------------

# Five repetitions of 1.5 s each side: the smallest samples whose complete separation Mann-Whitney
# still calls significant with a margin (two-sided p = 2 / C(10, 5) = 0.008 < alpha 0.05; four
# would give 0.029, six 0.002), and 15 messages per run, whose median is the OWD of any one of
# them: the link is a constant-delay path and the proxy's sleep is the same for every message.
PROXY_EXPERIMENT = """
name: proxy-mini
topology: {topology}
repetitions: 5
seed: 5
workload: {{kind: stream, client: watch, server: server, path: phone, direction: down, pattern: cbr,
           rate: 40kbit, message_size: 500, duration: 1500ms}}   # 10 messages/s: the proxy's 50 ms sleep per chunk never queues
"""


@pytest.mark.netem
def test_a_proxy_that_adds_50ms_fails_the_comparison(tmp_path):
    from conftest import ROOT, wearlab

    pyproxy = ROOT / "tests" / "tools" / "pyproxy.py"
    exp = tmp_path / "exp.yaml"
    exp.write_text(PROXY_EXPERIMENT.format(topology=ROOT / "topologies" / "cproxy.yaml"))
    dirs = {}
    for name, kind in (("base", f"command: python3 {pyproxy} {{listen}} {{upstream}}"),
                       ("again", f"command: python3 {pyproxy} {{listen}} {{upstream}}"),
                       ("slow", f"command: python3 {pyproxy} {{listen}} {{upstream}} --delay 50")):
        res = wearlab("run", str(exp), "--set", f"phone.kind={kind}", "--out", str(tmp_path / name), timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        dirs[name] = tmp_path / name / "proxy-mini"
    same = wearlab("compare", str(dirs["base"]), str(dirs["again"]), "--metric", "down_owd_median_s")
    assert same.returncode == 0, same.stdout + same.stderr
    slow = wearlab("compare", str(dirs["base"]), str(dirs["slow"]), "--metric", "down_owd_median_s",
                   "--json", str(tmp_path / "r.json"))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    (row,) = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert row["verdict"] == "regression"
    assert 0.040 <= row["median_cand"] - row["median_base"] <= 0.060       # the 50 ms the proxy adds
