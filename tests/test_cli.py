"""The command line: exit statuses, one clear line per problem, nothing created on bad input."""

from __future__ import annotations


import pytest

from conftest import ROOT, wearlab
from wearlab.runtime import probe

EXAMPLES = sorted(str(p) for p in [*ROOT.glob("topologies/*.yaml"), *ROOT.glob("experiments/*.yaml")])


def test_shipped_files_validate():
    res = wearlab("validate", *EXAMPLES)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("ok:") == len(EXAMPLES)


def _assert_clean_failure(res, *fragments):
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout
    for f in fragments:
        assert f in res.stderr, res.stderr


def test_validate_reports_file_line_and_field(write_yaml):
    bad = write_yaml("bad.yaml", "nodes:\n  watch: {role: wearable}\n  server: {role: server}\n"
                                 "links:\n  - {between: [watch, server], dealy: 10ms}\n"
                                 "  - {between: [watch, server2], rate: 10Mbps}\n")
    res = wearlab("validate", str(bad))
    _assert_clean_failure(res, f"{bad}:5", "delay", f"{bad}:6", "server2")
    # One message per problem.
    assert len([l for l in res.stderr.splitlines() if l.startswith("error:")]) >= 2


@pytest.mark.parametrize("text,fragment", [
    ("topology: missing.yaml\nworkload: {kind: http-get, client: a, server: b}\n", "missing.yaml"),
    ("topology: {nodes: {w: {role: wearable}, s: {role: server}}, links: [{between: [w, s], delay: -5ms}]}\n"
     "workload: {kind: http-get, client: w, server: s}\n", "delay"),
    ("topology: {nodes: {w: {role: wearable}, s: {role: server}}, links: [{between: [w, s]}]}\n"
     "workload: {kind: http-get, client: w, server: s}\nmatrix: {size: [1kb]}\n", "1KB"),
    ("topology: {nodes: {w: {role: wearable}, s: {role: server}}, links: [{between: [w, s]}]}\n"
     "workload: {kind: http-get, client: w, server: s}\nrepetitons: 3\n", "repetitions"),
    ("workload: [\n", "bad.yaml"),
])
def test_run_with_bad_input_creates_nothing(tmp_path, write_yaml, text, fragment):
    bad = write_yaml("bad.yaml", text)
    out = tmp_path / "results"
    res = wearlab("run", str(bad), "--out", str(out))
    _assert_clean_failure(res, fragment)
    assert not out.exists()


def test_unreadable_experiment_file(tmp_path):
    res = wearlab("run", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "r"))
    _assert_clean_failure(res, "nope.yaml")
    assert not (tmp_path / "r").exists()


def test_repetitions_must_be_positive(tmp_path):
    res = wearlab("run", str(ROOT / "experiments/quickstart.yaml"), "--repetitions", "0",
                  "--out", str(tmp_path / "r"))
    _assert_clean_failure(res, "repetitions")
    assert not (tmp_path / "r").exists()


@pytest.mark.root
def test_host_runtime_refuses_to_drop_netem(tmp_path):
    if probe.netem_works():
        pytest.skip("this kernel has netem")
    res = wearlab("run", str(ROOT / "experiments/quickstart.yaml"), "--runtime", "host",
                  "--out", str(tmp_path / "r"))
    _assert_clean_failure(res, "netem", "uml")
    assert not (tmp_path / "r").exists()


@pytest.mark.root
def test_doctor_says_what_auto_picks():
    res = wearlab("doctor")
    assert res.returncode == 0, res.stderr
    assert "auto picks" in res.stdout
    assert "qdisc netem" in res.stdout
