"""`matrix: exclude:` (model.exclude): combinations left out as GitHub Actions' matrix exclude
leaves them out, the remaining cells' runs unchanged (the same values, so the same identities and
seeds, plan.seeds), runs, resume and shards counted over the cells left, every bad entry at its
file, line and field with exit 2, and `--set` on a key an entry names.

Host-side and fast: load and plan in-process, the command line for the exit status and the
header. The experiment: seed 003's policies x WiFi conditions, and a CBR rate, 3 x 2 x 2 = 12
combinations, on docs/topologies.md's wearable-basic topology.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, wearlab, yaml_dump
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.exclude import EXCLUDE_KEY
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import plan
from wearlab.plan.seeds import RunSeeds
from wearlab.run.resume import check_plan, schedule
from wearlab.run.shard import Shard

POLICY, PROFILE, RATE = "watch.interface_policy", "link.watch-ap.profile", "rate"
GOOD, FAIR = "wifi-2g4-good", "wifi-2g4-fair"

HEAD = f"""\
name: excluding
topology: {ROOT / "topologies" / "wearable-basic.yaml"}
repetitions: 2
seed: 7
workload: {{kind: stream, client: watch, server: server, direction: down, pattern: cbr, duration: 5s}}
matrix:
  watch.interface_policy: [bt, wifi, adaptive]
  link.watch-ap.profile: [wifi-2g4-good, wifi-2g4-fair]
  rate: [500kbit, 1Mbit]
"""
# line 6 is matrix:, 7-9 its keys; an exclude: written after them starts at line 10.
EXCLUDE = """\
  exclude:
    - {watch.interface_policy: bt, link.watch-ap.profile: wifi-2g4-fair}
    - {watch.interface_policy: adaptive, link.ap-watch.profile: wifi-2g4-fair, rate: 1000kbit}
"""


def _file(tmp_path: Path, exclude: str = EXCLUDE, name: str = "e.yaml") -> Path:
    f = tmp_path / name
    f.write_text(HEAD + exclude)
    return f


def _key(cell) -> tuple:
    """(policy, profile, rate) of a cell: a policy `--set` fixed is the watch's setting, not a cell value."""
    return (cell.nodes["watch"].options["interface_policy"], cell.values[PROFILE], cell.values[RATE])


def test_exclude_leaves_out_what_it_names_and_the_rest_keeps_its_identity(tmp_path):
    """Entry 0 names two keys: both rates of (bt, fair) go - a partial match takes every
    combination that contains it. Entry 1 names all three, the link by its other spelling
    (ap-watch) and the rate as 1000kbit (1Mbit): one cell goes. 12 - 2 - 1 = 9 cells, in the
    matrix's order (first key slowest), numbered 0..8; each cell's values, nodes, links and run
    seeds are those of the same cell of the file without exclude:."""
    full = plan(load_experiment(_file(tmp_path, "", "full.yaml"), CATALOG))
    p = plan(load_experiment(_file(tmp_path), CATALOG))
    assert len(full.cells) == 12
    assert [_key(c) for c in p.cells] == [
        ("bt", GOOD, 500_000), ("bt", GOOD, 1_000_000),
        ("wifi", GOOD, 500_000), ("wifi", GOOD, 1_000_000), ("wifi", FAIR, 500_000), ("wifi", FAIR, 1_000_000),
        ("adaptive", GOOD, 500_000), ("adaptive", GOOD, 1_000_000), ("adaptive", FAIR, 500_000)]
    assert [c.index for c in p.cells] == list(range(9))
    doc, full_doc = p.to_document(), full.to_document()
    same = {json.dumps(c["values"], sort_keys=True): c for c in full_doc["cells"]}
    for c in doc["cells"]:
        twin = same[json.dumps(c["values"], sort_keys=True)]
        assert (c["nodes"], c.get("links")) == (twin["nodes"], twin.get("links"))
    seeds = lambda q: {(_key(c), rep): RunSeeds.of(q.name, dict(c.values), rep, q.seed).run   # noqa: E731
                       for _, rep, c in schedule(q)}
    mine, theirs = seeds(p), seeds(full)
    assert len(mine) == 18 and all(theirs[k] == v for k, v in mine.items())
    assert set(theirs) - set(mine) == {((pol, prof, r), rep) for rep in (1, 2) for pol, prof, r in
                                       [("bt", FAIR, 500_000), ("bt", FAIR, 1_000_000), ("adaptive", FAIR, 1_000_000)]}
    assert doc["runs"] == 18
    assert [(x["values"][POLICY], x["values"][PROFILE], x["values"][RATE], x["by"]) for x in doc["excluded"]] == [
        ("bt", FAIR, 500_000, {POLICY: "bt", PROFILE: FAIR}),
        ("bt", FAIR, 1_000_000, {POLICY: "bt", PROFILE: FAIR}),
        ("adaptive", FAIR, 1_000_000, {POLICY: "adaptive", PROFILE: FAIR, RATE: 1_000_000})]
    assert "excluded" not in full_doc


def test_the_resolved_experiment_loads_back_with_its_exclude(tmp_path):
    """experiment.yaml (Experiment.to_document) keeps exclude: under matrix:, loadable again:
    the same cells and the same cells left out (the document's keys come back sorted, so the
    matrix's order, and the cells', may differ)."""
    first = load_experiment(_file(tmp_path), CATALOG)
    written = first.to_document()
    assert written["matrix"][EXCLUDE_KEY] == [{POLICY: "bt", PROFILE: FAIR},
                                              {POLICY: "adaptive", PROFILE: FAIR, RATE: "1Mbit"}]
    again = tmp_path / "again.yaml"
    again.write_text(yaml_dump(written, sort_keys=False))
    cells = lambda doc, part: sorted(json.dumps(c["values"], sort_keys=True) for c in doc[part])   # noqa: E731
    a, b = plan(first).to_document(), plan(load_experiment(again, CATALOG)).to_document()
    assert len(cells(a, "cells")) == 9 and cells(a, "cells") == cells(b, "cells")
    assert len(cells(a, "excluded")) == 3 and cells(a, "excluded") == cells(b, "excluded")


def test_plan_header_says_how_many_were_excluded(tmp_path):
    res = wearlab("plan", str(_file(tmp_path)), timeout=60)
    assert res.returncode == 0, res.stderr
    assert "9 cells (3 excluded by matrix.exclude) x 2 = 18 runs" in res.stdout.splitlines()[0]


def test_shards_slice_the_runs_left(tmp_path):
    """9 cells x 2 repetitions = 18 runs, repetitions outermost, then the groups (the watch's
    policy: bt 0-1, wifi 2-5, adaptive 6-8, already in cell order): run n is repetition
    (n-1)//9+1 of cell (n-1)%9. Shard I/3 takes runs floor((I-1)*18/3)+1 .. floor(I*18/3): 1-6, 7-12,
    13-18; shard 2/3 is cells 6, 7, 8 of repetition 1 and 0, 1, 2 of repetition 2."""
    p = plan(load_experiment(_file(tmp_path), CATALOG))
    runs = {n: (rep, c.index) for n, rep, c in schedule(p)}
    assert runs == {n: ((n - 1) // 9 + 1, (n - 1) % 9) for n in range(1, 19)}
    slices = [list(Shard(i, 3).runs(18)) for i in (1, 2, 3)]
    assert slices == [list(range(1, 7)), list(range(7, 13)), list(range(13, 19))]
    assert [runs[n] for n in slices[1]] == [(1, 6), (1, 7), (1, 8), (2, 0), (2, 1), (2, 2)]


def test_resume_holds_a_results_directory_to_its_own_exclude(tmp_path):
    """A results directory planned with the exclude resumes with it; one planned without it (the
    file's earlier plan: 12 cells) is refused, its differences named, exit 2 as any other change."""
    p = plan(load_experiment(_file(tmp_path), CATALOG))
    mine, other = tmp_path / "mine", tmp_path / "other"
    for d, q in ((mine, p), (other, plan(load_experiment(_file(tmp_path, ""), CATALOG)))):
        d.mkdir()
        (d / "plan.json").write_text(json.dumps(q.to_document(), default=str))
    check_plan(mine, p)
    with pytest.raises(InputError) as e:
        check_plan(other, p)
    assert "runs" in str(e.value) and "24" in str(e.value) and "18" in str(e.value)


SET_CASES = [   # --set -> the cells left (policy, profile, rate), how many excluded (None: no excluded:)
    ({POLICY: "wifi"}, [("wifi", p, r) for p in (GOOD, FAIR) for r in (500_000, 1_000_000)], None),
    ({POLICY: "bt"}, [("bt", GOOD, 500_000), ("bt", GOOD, 1_000_000)], 2),
    ({POLICY: "adaptive", RATE: "1Mbit"}, [("adaptive", GOOD, 1_000_000)], 1),
    ({PROFILE: GOOD}, [(pol, GOOD, r) for pol in ("bt", "wifi", "adaptive") for r in (500_000, 1_000_000)], None),
]


@pytest.mark.parametrize("sets,cells,excluded", SET_CASES, ids=["wifi", "bt", "adaptive-1Mbit", "good"])
def test_set_on_a_key_an_entry_names(tmp_path, sets, cells, excluded):
    """--set fixes the key: an entry naming another value excludes nothing (the plan is the one
    of the file without exclude:, digest for digest but for the file), one naming the same value
    excludes by its other keys."""
    p = plan(load_experiment(_file(tmp_path), CATALOG, overrides=sets))
    assert [_key(c) for c in p.cells] == cells
    doc = p.to_document()
    assert (len(doc["excluded"]) if "excluded" in doc else None) == excluded
    if excluded is None:
        bare = plan(load_experiment(_file(tmp_path, "", "bare.yaml"), CATALOG, overrides=sets)).to_document()
        assert doc.pop("file") != bare.pop("file") and doc == bare


def test_set_leaving_nothing_exits_2_at_the_entry(tmp_path):
    f = _file(tmp_path)
    res = wearlab("plan", str(f), "--set", f"{POLICY}=bt", "--set", f"{PROFILE}={FAIR}", timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"{f}:11: matrix.exclude[0]: " in res.stderr and "nothing would be left" in res.stderr, res.stderr


ERRORS = [   # exclude: as written (from line 10) -> (line, field, what the message says)
    ("  exclude:\n    - {direction: down}\n", 11, "matrix.exclude[0].direction", "it is 'down' in every cell"),
    ("  exclude:\n    - {watch.interface_polcy: bt}\n", 11, "matrix.exclude[0][watch.interface_polcy]",
     "did you mean 'watch.interface_policy'"),
    ("  exclude:\n    - {watch.interface_policy: wifi-always}\n", 11, "matrix.exclude[0][watch.interface_policy]",
     "'wifi-always' is not one of the values of watch.interface_policy: bt, wifi, adaptive"),
    ("  exclude:\n    - {rate: 2Mbit}\n", 11, "matrix.exclude[0].rate", "is not one of the values of rate"),
    ("  exclude:\n    - {rate: [500kbit, 1Mbit]}\n", 11, "matrix.exclude[0].rate", "one value per key"),
    ("  exclude:\n    - bt\n", 11, "matrix.exclude[0]", "an exclude entry is a mapping"),
    ("  exclude:\n    - {}\n", 11, "matrix.exclude[0]", "an empty exclude entry would leave out every cell"),
    ("  exclude: {watch.interface_policy: bt}\n", 10, "matrix.exclude", "exclude is a list"),
    ("  exclude:\n    - {watch.interface_policy: bt}\n    - {watch.interface_policy: wifi}\n"
     "    - {watch.interface_policy: adaptive}\n", 10, "matrix.exclude",
     "leaves out every one of the matrix's 12 combinations"),
]


@pytest.mark.parametrize("exclude,line,field,says", ERRORS, ids=[e[2] + ":" + e[3][:20] for e in ERRORS])
def test_a_bad_exclude_names_file_line_and_field(tmp_path, exclude, line, field, says):
    f = _file(tmp_path, exclude)
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG)
    (problem,) = e.value.problems
    assert (problem.file, problem.line, problem.field) == (str(f), line, field)
    assert says in problem.message, problem.message


def test_a_bad_exclude_exits_2_and_touches_nothing(tmp_path):
    """Through the command line: three bad entries at once, each at its line; `wearlab run`
    refuses before it makes a results directory."""
    f = _file(tmp_path, "  exclude:\n    - {direction: down}\n    - bt\n    - {rate: 2Mbit}\n")
    out = tmp_path / "results"
    for args in (("plan", str(f)), ("run", str(f), "--out", str(out))):
        res = wearlab(*args, timeout=60)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stdout + res.stderr
        for at in ("11: matrix.exclude[0].direction: ", "12: matrix.exclude[1]: ", "13: matrix.exclude[2].rate: "):
            assert f"{f}:{at}" in res.stderr, res.stderr
    assert not out.exists()


def test_exclude_is_no_workload_parameter():
    """`exclude` under matrix: is the reserved key; a workload parameter of that name could not be swept."""
    assert not [w.name for w in CATALOG.workloads.values() if EXCLUDE_KEY in w.params]


CLAIM = """\
expect:
  - id: bt-slower-on-fair-wifi
    claim: "BT's goodput is below fair WiFi's"
    source: {where: "by hand"}
    evidence: prediction
    metric: down_goodput_bps
    cells: {link.watch-ap.profile: wifi-2g4-fair}
    ratio: {over: watch.interface_policy, numerator: bt, denominator: wifi}
    paper: [null, 1]
"""


@pytest.mark.parametrize("rate_too,error", [(False, True), (True, False)], ids=["both-rates", "one-rate"])
def test_a_claim_whose_cells_are_all_excluded_exits_2_at_the_claim(tmp_path, rate_too, error):
    """The claim reads (bt, fair) against (wifi, fair). Excluding (bt, fair) at both rates leaves its
    numerator no cell: `wearlab check` would find no run, so the plan refuses it at the ratio's
    numerator (line 19: exclude: is lines 10-11, expect: starts at 12, its ratio: is 7 lines on). Excluding
    only (bt, fair, 1Mbit) leaves the 500kbit cell: the numerator reads that one."""
    entry = "{watch.interface_policy: bt, link.watch-ap.profile: wifi-2g4-fair" + (", rate: 1Mbit}" if rate_too else "}")
    f = _file(tmp_path, f"  exclude:\n    - {entry}\n" + CLAIM)
    if not error:
        (claim,) = plan(load_experiment(f, CATALOG)).claims
        assert [(g.role, len(g.cells)) for g in claim.groups] == [("numerator", 1), ("denominator", 2)]
        return
    with pytest.raises(InputError) as e:
        plan(load_experiment(f, CATALOG))
    (problem,) = e.value.problems
    assert (problem.file, problem.line, problem.field) == (str(f), 19, "expect[0].ratio.numerator")
    assert "left out by matrix.exclude[0]" in problem.message, problem.message
