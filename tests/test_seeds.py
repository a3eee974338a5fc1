"""A run's identity (experiment, cell, repetition, the experiment's seed) fixes its seeds: the same
identity gives the same seeds whatever order it is written or run in, and another cell, repetition,
experiment or seed gives others (plan.seeds). Resuming keeps a results directory's finished runs
and drops the rest (run.resume), before any network exists."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from conftest import wearlab
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import plan
from wearlab.plan.seeds import RunSeeds, file_seed, identity
from wearlab.run.resume import check_plan, keep_finished, schedule

EXPERIMENT = """
name: seeded
topology:
  nodes: {watch: {role: wearable}, server: {role: server}}
  links: [{between: [watch, server], rate: 2Mbit, delay: 5ms, reverse: {loss: 5%}}]
repetitions: 2
seed: 9
workload: {kind: http-get, client: watch, server: server}
matrix: {protocol: [http, https], size: [1KB, 300KB]}
"""


def test_the_same_identity_gives_the_same_seed_whatever_the_order():
    a = RunSeeds.of("exp", {"protocol": "https", "size": 100000, "path": "ap"}, 3, 1)
    b = RunSeeds.of("exp", {"path": "ap", "size": 100000.0, "protocol": "https"}, 3, 1)
    assert a == b
    assert a.netem("watch", "phone") == b.netem("watch", "phone")


def test_the_scheme_is_the_documented_one():
    """sha256 of the canonical identity, its first 8 bytes big-endian (plan.seeds' docstring):
    a change of the scheme changes every result's seeds, so it is pinned here."""
    text = json.dumps({"cell": {"protocol": "http", "size": 1000}, "experiment": "exp", "repetition": 1, "seed": 7},
                      sort_keys=True, separators=(",", ":"))
    assert identity("exp", {"size": 1000, "protocol": "http"}, 1, 7) == text
    expected = int.from_bytes(hashlib.sha256(f"wearlab-run:{text}".encode()).digest()[:8], "big")
    assert RunSeeds.of("exp", {"size": 1000, "protocol": "http"}, 1, 7).run == expected


@pytest.mark.parametrize("other", [
    ("exp", {"protocol": "http", "size": 100000}, 1, 1),      # another cell
    ("exp", {"protocol": "https", "size": 1000}, 1, 1),       # another cell
    ("exp", {"protocol": "https", "size": 100000}, 2, 1),     # another repetition
    ("exp2", {"protocol": "https", "size": 100000}, 1, 1),    # another experiment
    ("exp", {"protocol": "https", "size": 100000}, 1, 2),     # another seed:
], ids=["cell", "cell2", "repetition", "experiment", "seed"])
def test_another_identity_gives_other_seeds(other):
    base = RunSeeds.of("exp", {"protocol": "https", "size": 100000}, 1, 1)
    o = RunSeeds.of(*other)
    assert o.run != base.run
    assert o.netem("watch", "server") != base.netem("watch", "server")
    assert o.node("watch") != base.node("watch")


def test_every_purpose_of_a_run_has_its_own_seed():
    s = RunSeeds.of("exp", {"size": 1000}, 1, 1)
    seeds = [s.run, s.netem("a", "b"), s.netem("b", "a"), s.netem("a", "b", 1), s.netem("a", "b", 2),
             s.node("a"), s.node("b"), s.workload()]
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= x < 2**64 for x in seeds)


def test_a_files_contents_depend_on_its_size_and_the_seed_alone():
    assert file_seed(1, 1000) == file_seed(1, 1000)
    assert len({file_seed(1, 1000), file_seed(1, 1001), file_seed(2, 1000)}) == 3


def test_runs_are_numbered_by_their_place_in_the_plan(write_yaml):
    p = plan(load_experiment(write_yaml("seeded.yaml", EXPERIMENT), CATALOG))
    runs = list(schedule(p))
    assert [n for n, _, _ in runs] == list(range(1, 9))
    assert [rep for _, rep, _ in runs] == [1] * 4 + [2] * 4        # repetitions outermost
    assert [c.index for _, _, c in runs] == [0, 1, 2, 3] * 2


def _results(tmp_path: Path, p, rows: list[tuple[int, int, str]]) -> Path:
    d = tmp_path / "results"
    (d / "series").mkdir(parents=True)
    (d / "captures").mkdir()
    (d / "plan.json").write_text(json.dumps(p.to_document()))
    (d / "metadata.json").write_text(json.dumps({"run_id": "1-abc", "started_utc": "t0", "status": "interrupted (SIGINT)",
                                                 "command": "wearlab run seeded.yaml"}))
    cols = p.columns.runs_csv()
    with (d / "runs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for n, rep, status in rows:
            w.writerow({"run": n, "repetition": rep, "status": status})
    with (d / "series" / "seeds.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "repetition", "what", "target", "seed"])
        for n, rep, _ in rows:
            w.writerow([n, rep, "run", "x", n * 10])
        w.writerow([5, 2, "run", "x", 50])          # a run interrupted before its row was written
    (d / "captures" / "watch-eth0.pcap").write_bytes(b"pcap")
    return d


def test_resume_keeps_ok_runs_and_drops_the_rest(tmp_path, write_yaml):
    p = plan(load_experiment(write_yaml("seeded.yaml", EXPERIMENT), CATALOG))
    d = _results(tmp_path, p, [(1, 1, "ok"), (2, 1, "failed"), (3, 1, "ok"), (4, 2, "ok")])  # 4 is rep 1's
    check_plan(d, p)
    kept = keep_finished(d, p)
    assert kept.runs == {1, 3}                  # the failed one and the one in the wrong place run again
    with (d / "series" / "seeds.csv").open() as f:
        assert [r["run"] for r in csv.DictReader(f)] == ["1", "3"]
    assert kept.sessions == [{"run_id": "1-abc", "started_utc": "t0", "finished_utc": None,
                              "status": "interrupted (SIGINT)", "command": "wearlab run seeded.yaml",
                              "plan_sha256": None, "runs_kept": 2}]
    assert sorted(x.name for x in (d / "captures").iterdir()) == ["watch-eth0.part1.pcap"]


def test_resume_refuses_another_plan_naming_what_differs(tmp_path, write_yaml):
    exp = write_yaml("seeded.yaml", EXPERIMENT)
    p = plan(load_experiment(exp, CATALOG))
    d = _results(tmp_path, p, [(1, 1, "ok")])
    other = plan(load_experiment(exp, CATALOG, repetitions=3, overrides={"size": "2KB"}))
    with pytest.raises(InputError) as e:
        check_plan(d, other)
    said = str(e.value)
    assert "repetitions: 2 there, 3 now" in said
    assert "wearlab run seeded.yaml" in said       # how the interrupted run was run
    # the CLI: exit 2, nothing run, one line per difference
    res = wearlab("run", str(exp), "--repetitions", "3", "--runtime", "uml", "--resume", str(d))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "repetitions: 2 there, 3 now" in res.stderr
    assert "Traceback" not in res.stderr


def test_resume_needs_a_results_directory(tmp_path, write_yaml):
    exp = write_yaml("seeded.yaml", EXPERIMENT)
    res = wearlab("run", str(exp), "--runtime", "uml", "--resume", str(tmp_path))
    assert res.returncode == 2
    assert "not a results directory" in res.stderr
