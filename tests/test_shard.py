"""Shards (`wearlab run --shard I/N`) and `wearlab merge`, without a network: which runs a shard
takes, and what the merge refuses or names. The real thing - shards run in the guest, merged, equal
to one run straight through, seed for seed - is in test_resume.py."""

from __future__ import annotations

import csv
import subprocess
import json
from pathlib import Path

import pytest

from conftest import wearlab
from wearlab.measure import fidelity
from wearlab.run.shard import Shard

EXPERIMENT = """
name: sharded
topology:
  nodes:
    watch: {role: wearable}
    server: {role: server}
  links: [{between: [watch, server], rate: 2Mbit, delay: 5ms}]
repetitions: 3
workload: {kind: http-get, client: watch, server: server}
matrix: {protocol: [http, https], size: [1000]}
"""


@pytest.mark.parametrize("total", [0, 1, 2, 5, 6, 7, 16, 100])
@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_shards_take_every_run_once_in_contiguous_slices_of_equal_size(total, count):
    slices = [list(Shard(i, count).runs(total)) for i in range(1, count + 1)]
    assert sorted(n for s in slices for n in s) == list(range(1, total + 1))
    for s in slices:
        assert s == list(range(s[0], s[-1] + 1)) if s else True          # contiguous
        assert total // count <= len(s) <= -(-total // count)             # floor(T/N) .. ceil(T/N)


@pytest.mark.parametrize("text", ["", "2", "0/3", "4/3", "1/0", "a/b", "-1/2", "1/2/3"])
def test_a_malformed_shard_is_refused(text):
    with pytest.raises(ValueError):
        Shard.parse(text)


def test_run_refuses_a_bad_shard_before_anything(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(EXPERIMENT)
    res = wearlab("run", str(exp), "--shard", "5/4", "--out", str(tmp_path / "r"), timeout=60)
    assert res.returncode == 2
    assert "--shard" in res.stderr and "between 1 and 4" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r").exists()


def _fake_shard(tmp_path: Path, name: str, plan: dict, runs: list[int], shard: str,
                fidelity: dict | None = None) -> Path:
    """A shard's results directory as a run writes it, with `runs` ok (no measurements) and its
    fidelity probe's verdict when given (None: written by a wearlab before the probe)."""
    d = tmp_path / name
    (d / "series").mkdir(parents=True)
    (d / "plan.json").write_text(json.dumps(plan))
    i, n = map(int, shard.split("/"))
    (d / "metadata.json").write_text(json.dumps({"experiment": plan["experiment"], "status": "complete",
                                                 "shard": {"index": i, "count": n},
                                                 "machine": {"kernel": f"kernel of {name}"},
                                                 "columns": {"params": ["protocol"], "metrics": {}},
                                                 **({"fidelity": fidelity} if fidelity else {})}))
    # 2 cells x 3 repetitions: run n is repetition (n-1)//2+1, cell (n-1)%2 (the schedule's order).
    with (d / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "repetition", "protocol", "status", "run_seed"])
        for r in runs:
            w.writerow([r, (r - 1) // 2 + 1, ["http", "https"][(r - 1) % 2], "ok", ""])
    with (d / "series" / "seeds.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "what"])
        w.writerows([r, f"seed of run {r}"] for r in runs)
    (d / "captures").mkdir()
    (d / "captures" / "watch-eth0.pcap").write_bytes(b"pcap of " + name.encode())
    return d


@pytest.fixture
def plan_doc(tmp_path) -> dict:
    exp = tmp_path / "e.yaml"
    exp.write_text(EXPERIMENT)
    res = wearlab("plan", str(exp), "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_merge_joins_shards_in_run_order_and_names_what_is_missing(tmp_path, plan_doc):
    assert plan_doc["runs"] == 6
    a = _fake_shard(tmp_path, "a", plan_doc, [1, 2, 3], "1/2")
    b = _fake_shard(tmp_path, "b", plan_doc, [4, 6], "2/2")        # run 5 failed or never ran
    res = wearlab("merge", str(tmp_path / "m"), str(b), str(a), timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "missing runs: 5" in res.stdout
    m = tmp_path / "m"
    with (m / "runs.csv").open(newline="") as f:
        assert [r["run"] for r in csv.DictReader(f)] == ["1", "2", "3", "4", "6"]
    with (m / "series" / "seeds.csv").open(newline="") as f:
        assert [r["what"] for r in csv.DictReader(f)] == [f"seed of run {n}" for n in (1, 2, 3, 4, 6)]
    meta = json.loads((m / "metadata.json").read_text())
    assert meta["merge"]["missing_runs"] == [5] and meta["status"].startswith("incomplete")
    assert [s["machine"]["kernel"] for s in meta["shards"]] == ["kernel of b", "kernel of a"]
    assert (m / "shards" / "1-of-2" / "captures" / "watch-eth0.pcap").read_bytes() == b"pcap of a"
    assert json.loads((m / "plan.json").read_text()) == plan_doc


def test_merge_refuses_a_run_in_two_shards_and_shards_of_another_plan(tmp_path, plan_doc):
    a = _fake_shard(tmp_path, "a", plan_doc, [1, 2, 3], "1/2")
    b = _fake_shard(tmp_path, "b", plan_doc, [3, 4, 5, 6], "2/2")
    res = wearlab("merge", str(tmp_path / "m"), str(a), str(b), timeout=60)
    assert res.returncode == 2 and "run 3" in res.stderr and str(a) in res.stderr, res.stderr
    assert not (tmp_path / "m").exists()
    other = dict(plan_doc, seed=plan_doc["seed"] + 1)
    c = _fake_shard(tmp_path, "c", other, [4, 5, 6], "2/2")
    res = wearlab("merge", str(tmp_path / "m"), str(a), str(c), timeout=60)
    assert res.returncode == 2 and "is not the plan of" in res.stderr, res.stderr
    assert not (tmp_path / "m").exists()


def test_submit_dry_run_writes_the_scripts_that_would_run(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(EXPERIMENT)
    res = wearlab("submit", str(exp), "--slurm", "--tasks", "4", "--dry-run", "--time", "30:00",
                  "--set", "size=2000", "--out", str(tmp_path / "r"), timeout=60)
    assert res.returncode == 0, res.stderr
    sub = next((tmp_path / "r" / "sharded").glob("*-slurm"))
    shard = (sub / "shard.sbatch").read_text()
    assert "#SBATCH --array=1-4" in shard and "#SBATCH --time=30:00" in shard
    assert '--shard "$i/4"' in shard and "--set size=2000" in shard and "--resume" in shard
    merge = (sub / "merge.sbatch").read_text()
    assert f"merge {sub}/merged {sub}/shards/*/sharded/latest" in merge
    doc = json.loads((sub / "submission.json").read_text())
    # 6 runs in 4 shards: 1, 2, 1, 2 runs (floor(6/4) .. ceil(6/4)), in order.
    assert doc["shards"] == {"1": [1, 1], "2": [2, 3], "3": [4, 4], "4": [5, 6]} and not doc["submitted"]
    # /bin/sh reads both scripts
    for f in ("shard.sbatch", "merge.sbatch"):
        assert subprocess.run(["sh", "-n", str(sub / f)]).returncode == 0


def test_submit_checks_the_experiment_before_writing_anything(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(EXPERIMENT.replace("rate: 2Mbit", "rate: 2 parsecs"))
    res = wearlab("submit", str(exp), "--slurm", "--dry-run", "--out", str(tmp_path / "r"), timeout=60)
    assert res.returncode == 2 and "e.yaml" in res.stderr and "rate" in res.stderr, res.stderr
    assert not (tmp_path / "r").exists()


def test_submit_k8s_prints_an_indexed_job_and_its_merge(tmp_path):
    from ruamel.yaml import YAML

    exp = tmp_path / "e.yaml"
    exp.write_text(EXPERIMENT)
    res = wearlab("submit", str(exp), "--k8s", "--tasks", "3", timeout=60)
    assert res.returncode == 0, res.stderr
    shards, merge = list(YAML(typ="safe").load_all(res.stdout))
    assert (shards["kind"], shards["spec"]["completionMode"], shards["spec"]["completions"]) == ("Job", "Indexed", 3)
    shard_cmd = shards["spec"]["template"]["spec"]["containers"][0]["command"]
    assert shard_cmd[:2] == ["sh", "-c"] and '--shard "$i/3"' in shard_cmd[2]
    assert "JOB_COMPLETION_INDEX + 1" in shard_cmd[2]          # Kubernetes counts from 0, shards from 1
    merge_cmd = merge["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert " merge /results/sharded/merged /results/sharded/shards/*/sharded/latest" in merge_cmd
    for cmd in (shard_cmd[2], merge_cmd):
        assert subprocess.run(["sh", "-n", "-c", cmd]).returncode == 0


FAKE_SBATCH = """#!/bin/sh
# sbatch's --parsable contract, nothing else: a job id per call (100, 101, ...) and a line per
# call in $FAKE_SBATCH_LOG (the id, then the arguments) for the test to read.
n=$(( $(wc -l < "$FAKE_SBATCH_LOG") + 100 ))
echo "$n $*" >> "$FAKE_SBATCH_LOG"
echo "$n;cluster"
"""


def test_reproduce_slurm_submits_the_whole_suite_with_one_script(tmp_path):
    """`reproduce --slurm` writes <out>/submit.sh and runs it (the bundle hands the same script to
    its launcher): each experiment's array, its merge after that array, and the suite's check after
    every merge - read from what sbatch was called with (a stand-in that only hands out ids)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("one", "two"):
        (suite / f"{name}.yaml").write_text(EXPERIMENT.replace("name: sharded", f"name: {name}"))
    (suite / "claims.yaml").write_text("claims: []\n")
    bin_dir, log = tmp_path / "bin", tmp_path / "sbatch.log"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    log.write_text("")
    env = {**__import__("os").environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_SBATCH_LOG": str(log)}
    out = tmp_path / "sub"
    res = wearlab("reproduce", str(suite), "--slurm", "--tasks", "2", "--runtime", "uml", "--out", str(out),
                  env=env, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    calls = [line.split() for line in log.read_text().splitlines()]
    assert [c[0] for c in calls] == ["100", "101", "102", "103", "104"]
    assert calls[0][-1] == "shard.sbatch" and calls[1][-2:] == ["--dependency=afterok:100", "merge.sbatch"]
    assert calls[2][-1] == "shard.sbatch" and calls[3][-2:] == ["--dependency=afterok:102", "merge.sbatch"]
    assert calls[4][-2:] == ["--dependency=afterok:101:103", "suite-check.sbatch"]
    record = json.loads((out / "slurm-suite.json").read_text())
    assert record["check_job"] == "104"
    assert [(e["experiment"], e["array_job"], e["merge_job"]) for e in record["experiments"]] == \
        [("one", "100", "101"), ("two", "102", "103")]
    assert subprocess.run(["sh", "-n", str(out / "submit.sh")]).returncode == 0


# The fidelity rule by hand (measure.fidelity): trusted when configured - 0.05 ms <= median <=
# configured + max(2 ms, 5 % of configured).
@pytest.mark.parametrize("configured, samples, trusted", [
    (10.0, [10.1, 10.2, 10.3], True),            # 0.2 ms above: a quiet netem link (docs/fidelity.md)
    (10.0, [11.0, 11.0, 11.0], True),            # 1.0 ms above: the 6.12 UML guest at rest
    (10.0, [11.9, 11.95, 30.0], True),           # median 1.95 ms above (< 2 ms); one late echo does not count
    (10.0, [12.0, 12.1, 12.2], False),           # median 2.1 ms above: noisy
    (10.0, [9.9, 9.94, 10.0], False),            # median 9.94 < 10 - 0.05: below the physics
    (10.0, [9.96, 9.97, 9.98], True),            # 0.03 ms below: ping's resolution
    (100.0, [104.8, 104.9, 105.0], True),        # 5 % of 100 ms = 5 ms allowed: 4.9 above
    (100.0, [105.1, 105.2, 105.3], False),       # 5.2 above
    (10.0, [], False),                           # no echo came back
])
def test_fidelity_rule_trusts_a_median_within_its_bounds(configured, samples, trusted):
    v = fidelity.judge(configured, samples)
    assert v["trusted"] is trusted, v
    assert v["configured_rtt_ms"] == configured and ("reason" in v) is (not trusted)


def test_merge_flags_noisy_shards_and_names_the_unprobed(tmp_path, plan_doc):
    quiet = {"probe": "ping", **fidelity.judge(10.0, [10.2] * 10)}
    noisy = {"probe": "ping", **fidelity.judge(10.0, [12.5] * 10)}
    a = _fake_shard(tmp_path, "a", plan_doc, [1, 2], "1/3", quiet)
    b = _fake_shard(tmp_path, "b", plan_doc, [3, 4], "2/3", noisy)
    c = _fake_shard(tmp_path, "c", plan_doc, [5, 6], "3/3")              # older: no fidelity
    res = wearlab("merge", str(tmp_path / "m"), str(a), str(b), str(c), timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr                  # flagged, not failed
    meta = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert meta["merge"]["noisy_shards"] == ["2-of-3"] and meta["merge"]["unprobed_shards"] == ["3-of-3"]
    assert [s["trust"] for s in meta["shards"]] == ["trusted", "noisy", "not probed"]
    assert meta["shards"][1]["fidelity"]["median_ms"] == 12.5 and meta["shards"][2]["fidelity"] is None
    out = " ".join(res.stdout.split())
    assert "noisy shards: 2-of-3" in out and "3-of-3" in out and "not probed" in out


def test_status_prints_each_shards_fidelity_and_the_noisy_ones(tmp_path, plan_doc):
    """`wearlab status` from a submission's files alone (no job ids: Slurm is not asked)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "submission.json").write_text(json.dumps({"tasks": 2, "experiment": "sharded", "runs": 6}))
    for i, (samples, runs) in enumerate([([10.2] * 10, [1, 2, 3]), ([12.5] * 10, [4, 5, 6])], start=1):
        d = _fake_shard(tmp_path, f"s{i}", plan_doc, runs, f"{i}/2", {"probe": "ping", **fidelity.judge(10.0, samples)})
        (sub / "shards" / str(i) / "sharded").mkdir(parents=True)
        (sub / "shards" / str(i) / "sharded" / "latest").symlink_to(d)
    res = wearlab("merge", str(sub / "merged"), *[str(sub / "shards" / str(i) / "sharded" / "latest") for i in (1, 2)],
                  timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    st = wearlab("status", str(sub), timeout=60)
    out = " ".join(st.stdout.split())
    assert st.returncode == 0, st.stdout + st.stderr
    assert "shard 1/2: 3 of 3 runs ok (complete); fidelity trusted: RTT median 10.2 ms" in out, out
    assert "shard 2/2: 3 of 3 runs ok (complete); fidelity noisy: RTT median 12.5 ms" in out, out
    assert "noisy shards (their node failed the fidelity probe): 2-of-2" in out, out
