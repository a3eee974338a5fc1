"""Claims in experiments (`expect:`) and `wearlab check` (docs/claims.md), host-side: results
directories are made here from the planner's plan.json and runs.csv rows written by hand, and
every expected verdict and estimate is worked out by hand in the test (never with the functions
under test)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from ruamel.yaml import YAML

from conftest import ROOT
from wearlab import cli
from wearlab.catalog import CATALOG
from wearlab.errors import InputError
from wearlab.model.experiment_file import load_experiment
from wearlab.plan.plan import plan
from wearlab.report import check, results

SHIPPED = ["bufferbloat", "device-relay", "device-watch", "handover", "sniff", "tcpcrypt"]
SIZES = {"1KB": 1000, "10KB": 10000, "100KB": 100000, "1MB": 1000000}

EXPERIMENT = """\
name: {name}
topology: {root}/topologies/wearable-basic.yaml
repetitions: 5
workload:
  kind: http-get
  client: watch
  server: server
  path: ap
matrix:
  protocol: [http, https]
  size: [1KB, 10KB, 100KB, 1MB]
expect:
{claims}"""


def claim(id: str, body: str, evidence: str = "prediction") -> str:
    lines = [f"  - id: {id}", f"    claim: {id} as a sentence", "    source: {seed: \"000\", where: \"test\"}",
             f"    evidence: {evidence}"]
    lines += ["    " + line for line in body.strip().splitlines()]
    return "\n".join(lines) + "\n"


def make_results(d: Path, claims: str, runs: dict, name: str = "claims-toy") -> Path:
    """A results directory: plan.json from the planner, runs.csv with `runs[(protocol, size)]`:
    a list of (status, {metric: value}) per run, written the way a run writes it (RunsCsv)."""
    d.mkdir(parents=True)
    exp_file = d.parent / f"{name}.yaml"
    exp_file.write_text(EXPERIMENT.format(name=name, root=ROOT, claims=claims))
    p = plan(load_experiment(exp_file, CATALOG))
    results.write_json(d / "plan.json", p.to_document())
    csv = results.RunsCsv(d / "runs.csv", p.columns.runs_csv(), units={m.name: m.unit for m in p.columns.metrics})
    n = 0
    for cell in p.cells:
        size = {v: k for k, v in SIZES.items()}[cell.values["size"]]
        for rep, (status, metrics) in enumerate(runs.get((cell.values["protocol"], size), []), 1):
            n += 1
            csv.append({"run": n, "repetition": rep, **{k: cell.values.get(k, "") for k in p.columns.params},
                        "status": status, **metrics})
    csv.close()
    return d


def ok(metric: str, values: list[float]) -> list:
    return [("ok", {metric: v}) for v in values]


def run_check(capsys, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def claims_json(d: Path) -> dict[str, dict]:
    return {r["id"]: r for r in json.loads((d / "claims.json").read_text())}


HANDSHAKES = [0.048, 0.049, 0.050, 0.051, 0.052]


def test_a_tight_claim_is_not_reproduced_and_exits_1(tmp_path, capsys):
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\n"
    claims = (claim("hs-holds", body + "paper: 50 ms\ntolerance: 10%")
              + claim("hs-tight", body + "paper: 40 ms\ntolerance: 1%"))
    d = make_results(tmp_path / "r", claims, {("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)})
    rc, out, _ = run_check(capsys, str(d))
    assert rc == 1
    assert "not reproduced" in out and "hs-tight" in out
    rows = claims_json(d)
    # By hand: the median of the five is 50 ms; every bootstrap median is one of the five values,
    # so the interval lies in [48, 52] ms: inside [45, 55] ms, wholly above [39.6, 40.4] ms.
    holds, tight = rows["hs-holds"], rows["hs-tight"]
    assert holds["ours"] == pytest.approx(0.050)
    assert 0.048 <= holds["ours_low"] <= holds["ours_high"] <= 0.052
    assert (holds["band_low"], holds["band_high"]) == pytest.approx((0.045, 0.055))
    assert holds["verdict"] == "reproduced" and holds["runs"] == 5 and holds["unit"] == "s"
    assert (tight["band_low"], tight["band_high"]) == pytest.approx((0.0396, 0.0404))
    assert tight["verdict"] == "not reproduced"
    assert tight["difference"] == pytest.approx(0.010) and tight["difference_rel"] == pytest.approx(0.25)


def test_claims_that_hold_exit_0(tmp_path, capsys):
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\n"
    d = make_results(tmp_path / "r", claim("hs-holds", body + "paper: [45 ms, 55 ms]"),
                     {("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)})
    rc, out, _ = run_check(capsys, str(d))
    assert rc == 0, out
    assert claims_json(d)["hs-holds"]["verdict"] == "reproduced"


def test_too_few_runs_are_inconclusive(tmp_path, capsys):
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 10KB}\npaper: 50 ms\ntolerance: 50%"
    runs = ok("wire_tls_handshake_s", [0.050, 0.050]) + [("failed", {})] * 3
    d = make_results(tmp_path / "r", claim("few", body), {("https", "10KB"): runs})
    rc, _, _ = run_check(capsys, str(d))
    row = claims_json(d)["few"]
    assert rc == 0
    assert row["verdict"] == "inconclusive" and row["runs"] == 2 and row["ours"] == pytest.approx(0.050)
    assert "2 runs" in row["remark"] and "3 failed runs left out" in row["remark"]


def test_nothing_measured_is_inconclusive(tmp_path, capsys):
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1MB}\npaper: 50 ms"
    d = make_results(tmp_path / "r", claim("none", body), {})
    assert run_check(capsys, str(d))[0] == 0
    row = claims_json(d)["none"]
    assert row["verdict"] == "inconclusive" and row["ours"] is None and "no run measured" in row["remark"]


HTTPS_10KB = [0.30, 0.31, 0.32, 0.33, 0.34]
HTTP_10KB = [0.20, 0.21, 0.22, 0.23, 0.24]


def test_ratio_and_difference_by_hand(tmp_path, capsys):
    contrast = "{over: protocol, numerator: https, denominator: http}"
    base = f"metric: wire_total_s\ncells: {{size: 10KB}}\n"
    claims = (claim("ratio-wide", base + f"ratio: {contrast}\npaper: [1.0, 2.0]")
              + claim("ratio-far", base + f"ratio: {contrast}\npaper: [3, 4]")
              + claim("diff", base + f"difference: {contrast}\npaper: 100 ms\ntolerance: 60 ms"))
    runs = {("https", "10KB"): ok("wire_total_s", HTTPS_10KB), ("http", "10KB"): ok("wire_total_s", HTTP_10KB)}
    d = make_results(tmp_path / "r", claims, runs)
    rc, _, _ = run_check(capsys, str(d))
    rows = claims_json(d)
    # Medians 0.32 s and 0.22 s. Any bootstrap ratio lies in [0.30/0.24, 0.34/0.20] = [1.25, 1.7]:
    # inside [1, 2], below [3, 4]; any difference in [0.06, 0.14] s, inside [40, 160] ms.
    assert rows["ratio-wide"]["ours"] == pytest.approx(0.32 / 0.22)
    assert rows["ratio-wide"]["unit"] == "" and rows["ratio-wide"]["kind"] == "ratio"
    assert 1.25 <= rows["ratio-wide"]["ours_low"] <= rows["ratio-wide"]["ours_high"] <= 1.7
    assert rows["ratio-wide"]["verdict"] == "reproduced"
    assert rows["ratio-far"]["verdict"] == "not reproduced"
    assert rows["ratio-far"]["difference"] == pytest.approx(0.32 / 0.22 - 3)
    assert rows["diff"]["ours"] == pytest.approx(0.10) and rows["diff"]["unit"] == "s"
    assert (rows["diff"]["band_low"], rows["diff"]["band_high"]) == pytest.approx((0.04, 0.16))
    assert rows["diff"]["verdict"] == "reproduced"
    assert rc == 1   # ratio-far


def test_trends_by_hand(tmp_path, capsys):
    # https per size: 1.0, 3.0, 2.0, 4.0 s in every run -> ranks 1 3 2 4 against 1 2 3 4:
    # rho = 1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)) = 0.8.
    # The https/http ratio: 2.0, 1.5, 1.2, 1.1 -> strictly falling: rho = -1.
    https = {"1KB": 1.0, "10KB": 3.0, "100KB": 2.0, "1MB": 4.0}
    ratio = {"1KB": 2.0, "10KB": 1.5, "100KB": 1.2, "1MB": 1.1}
    runs = {}
    for size in SIZES:
        runs[("https", size)] = ok("wire_total_s", [https[size]] * 5)
        runs[("http", size)] = ok("wire_total_s", [https[size] / ratio[size]] * 5)
    claims = (claim("rank", "metric: wire_total_s\ncells: {protocol: https}\ntrend: {over: size, direction: falling}")
              + claim("amortised", "metric: wire_total_s\nratio: {over: protocol, numerator: https, denominator: http}\n"
                                   "trend: {over: size, direction: falling}"))
    d = make_results(tmp_path / "r", claims, runs)
    rc, _, _ = run_check(capsys, str(d))
    rows = claims_json(d)
    assert rows["rank"]["ours"] == pytest.approx(0.8) and rows["rank"]["kind"] == "trend"
    assert rows["rank"]["verdict"] == "not reproduced"          # 0.8 is no fall
    assert (rows["rank"]["band_low"], rows["rank"]["band_high"]) == (-1.0, -0.8)
    assert rows["amortised"]["ours"] == pytest.approx(-1.0)
    assert rows["amortised"]["verdict"] == "reproduced"
    assert rows["amortised"]["runs"] == 40
    assert rc == 1


def test_statistics_by_hand(tmp_path, capsys):
    values = [0.1, 0.2, 0.3, 0.4, 1.0]
    # mean 0.4; p95 (linear): position 0.95 x 4 = 3.8, 0.4 + 0.8 x (1.0 - 0.4) = 0.88; max 1.0.
    body = "metric: wire_total_s\ncells: {protocol: https, size: 100KB}\npaper: [0, 10 s]\nstatistic: "
    claims = claim("mean", body + "mean") + claim("p95", body + "p95") + claim("max", body + "max")
    d = make_results(tmp_path / "r", claims, {("https", "100KB"): ok("wire_total_s", values)})
    run_check(capsys, str(d))
    rows = claims_json(d)
    assert rows["mean"]["ours"] == pytest.approx(0.4)
    assert rows["p95"]["ours"] == pytest.approx(0.88)
    assert rows["max"]["ours"] == pytest.approx(1.0)
    assert rows["max"]["statistic"] == "max"


def test_inputs_are_shown_never_scored(tmp_path, capsys):
    body = "why: the test gives it\nmetric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\npaper: 1 s"
    d = make_results(tmp_path / "r", claim("given", body, evidence="input"),
                     {("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)})
    rc, out, _ = run_check(capsys, str(d))
    row = claims_json(d)["given"]
    assert rc == 0                                    # 50 ms is far from 1 s, and that fails nothing
    assert row["verdict"] == "not scored" and row["ours"] == pytest.approx(0.050)
    assert "not scored" in out


def test_json_and_a_suite_directory(tmp_path, capsys):
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\npaper: 50 ms\ntolerance: 10%"
    runs = {("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)}
    suite = tmp_path / "suite"
    for name in ("exp-a", "exp-b"):
        old = make_results(suite / name / "20250101T000000Z", claim(f"{name}-hs", body), runs, name=name)
        (old / "plan.json").write_text("{not json")    # an older run: never read, its latest is
        new = make_results(suite / name / "20250102T000000Z", claim(f"{name}-hs", body), runs, name=f"{name}")
        results.point_latest(new)
    rc, out, _ = run_check(capsys, str(suite), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert [(x["experiment"], [c["id"] for c in x["claims"]]) for x in doc] == [
        ("exp-a", ["exp-a-hs"]), ("exp-b", ["exp-b-hs"])]
    assert all(c["verdict"] == "reproduced" for x in doc for c in x["claims"])
    assert (suite / "exp-a" / "20250102T000000Z" / "claims.json").exists()


def test_bad_results_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    old = tmp_path / "old"
    old.mkdir()
    (old / "runs.csv").write_text("run,status\n")
    for d, said in ((tmp_path / "nowhere", "does not exist"), (tmp_path / "empty", "holds no results"),
                    (old, "no plan.json")):
        rc, _, err = run_check(capsys, str(d))
        assert rc == 2 and said in err, err


def test_the_table_fits_100_columns(tmp_path):
    contrast = "{over: protocol, numerator: https, denominator: http}"
    claims = (claim("a-rather-long-claim-id-of-the-seeds-000-exp1-500kb", "metric: wire_total_s\ncells: {size: 10KB}\n"
                    f"ratio: {contrast}\npaper: [1.75, 1.90]\ntolerance: 10%")
              + claim("hs", "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\npaper: 147 ms"))
    runs = {("https", "10KB"): ok("wire_total_s", HTTPS_10KB), ("http", "10KB"): ok("wire_total_s", HTTP_10KB),
            ("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)}
    d = make_results(tmp_path / "r", claims, runs)
    console = Console(record=True, width=200)
    check.check_command([d], as_json=False, console=console)
    text = console.export_text()
    assert "a-rather-long" in text and "147 ms" in text
    assert max(len(line) for line in text.splitlines()) <= 100, text


def test_a_runs_own_rows_score_as_runs_csv_does(tmp_path):
    """The end of a run scores its rows in memory (typed values); `wearlab check` reads runs.csv
    (text): the same verdicts."""
    runs = {("https", "10KB"): ok("wire_total_s", HTTPS_10KB), ("http", "10KB"): ok("wire_total_s", HTTP_10KB)}
    d = make_results(tmp_path / "r", claim("r", "metric: wire_total_s\ncells: {size: 10KB}\n"
                                               "ratio: {over: protocol, numerator: https, denominator: http}\n"
                                               "paper: [1, 2]"), runs)
    doc = json.loads((d / "plan.json").read_text())
    typed = [{"protocol": c["values"]["protocol"], "size": c["values"]["size"], "tls_version": c["values"]["tls_version"],
              "cipher": c["values"]["cipher"], "cert": c["values"]["cert"], "path": c["values"]["path"], "status": "ok",
              "wire_total_s": v}
             for c in doc["cells"] if c["values"]["size"] == 10000
             for v in (HTTPS_10KB if c["values"]["protocol"] == "https" else HTTP_10KB)]
    from_csv = check.evaluate(doc, check.load(d)[1])
    in_memory = check.evaluate(doc, typed)
    assert [(r.ours, r.ours_low, r.ours_high, r.verdict) for r in in_memory] == \
        [(r.ours, r.ours_low, r.ours_high, r.verdict) for r in from_csv]


# -- reading `expect:` ------------------------------------------------------------------------


BAD = [
    ("metric: wire_totl_s\npaper: 1 s", "metric", "unknown metric 'wire_totl_s'; did you mean 'wire_total_s'?"),
    ("metric: wire_total_s\ncells: {size: 2KB}\npaper: 1 s", "cells.size", "'2KB' is not one of the values of size"),
    ("metric: wire_total_s\ncells: {phone.kind: relay}\npaper: 1 s", "cells[phone.kind]",
     "'phone.kind' is no parameter of this experiment"),
    ("metric: wire_total_s\npaper: [60 ms, 40 ms]", "paper", "[60 ms, 40 ms]: low is above high"),
    ("metric: wire_total_s\npaper: 0.147", "paper", "'0.147' has no unit; write '0.147s'"),
    ("metric: wire_total_s\nratio: {over: protocol, numerator: https, denominator: tcpcrypt}\npaper: 1.5",
     "ratio.denominator", "'tcpcrypt' is not one of the values of protocol"),
    ("metric: wire_total_s\ntrend: {over: protocol, direction: falling}", "trend.over", "a trend is over numbers"),
    ("metric: wire_total_s\npaper: 1 s\npaper_scale: sizes", "paper_scale",
     "'sizes' is no parameter of this experiment; did you mean 'size'?"),
    ("metric: wire_total_s\npaper: 1 s\npaper_scale: size", "paper_scale",
     "size varies in matrix: select one of its values in cells:"),
    ("metric: wire_total_s\ncells: {protocol: http}\npaper: 1 s\npaper_scale: protocol", "paper_scale",
     "protocol is 'http': a paper's value is scaled by a positive number"),
    ("metric: wire_total_s\nratio: {over: protocol, numerator: https, denominator: http}\npaper: 1.5\n"
     "paper_scale: size", "paper_scale", "paper_scale scales a value; a ratio is not one"),
]


def write_experiment(tmp_path: Path, claims: str) -> Path:
    f = tmp_path / "bad.yaml"
    f.write_text(EXPERIMENT.format(name="bad", root=ROOT, claims=claims))
    return f


@pytest.mark.parametrize("body, field, message", BAD, ids=[b[1] + ":" + b[2][:20] for b in BAD])
def test_bad_expect_is_exit_2_at_file_line_field(tmp_path, capsys, body, field, message):
    f = write_experiment(tmp_path, claim("c", body))
    lines = f.read_text().splitlines()
    key = field.split(".")[0].split("[")[0]
    line = next(i for i, l in enumerate(lines, 1) if l.strip().startswith(f"{key}:"))
    rc = cli.main(["validate", "--no-kernel", str(f)])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"{f}:{line}: expect[0].{field}: {message}" in " ".join(err.split()), err


@pytest.mark.parametrize("evidence", ["calibration", "input"])
def test_a_missing_why_is_exit_2(tmp_path, capsys, evidence):
    f = write_experiment(tmp_path, claim("c", "metric: wire_total_s\npaper: 1 s", evidence=evidence))
    rc = cli.main(["validate", "--no-kernel", str(f)])
    err = capsys.readouterr().err
    assert rc == 2
    line = next(i for i, l in enumerate(f.read_text().splitlines(), 1) if l.strip().startswith("- id: c"))
    assert f"{f}:{line}: expect[0].why: missing why" in err, err


def test_duplicate_ids_and_a_trend_with_a_paper_value(tmp_path):
    body = "metric: wire_total_s\ntrend: {over: size, direction: falling}\npaper: -0.9"
    f = write_experiment(tmp_path, claim("c", body) + claim("c", "metric: wire_total_s\npaper: 1 s"))
    with pytest.raises(InputError) as e:
        load_experiment(f, CATALOG)
    said = {(p.field, p.message) for p in e.value.problems}
    assert ("expect[0].paper", "a trend's paper value is its direction, falling (rho <= -0.8); "
                               "remove paper") in said
    assert ("expect[1].id", "claim id 'c' is used twice (also expect[0]); ids are unique") in said


def test_set_keeps_a_claim_that_then_selects_nothing(tmp_path):
    """`--set size=1KB` narrows the experiment: a claim on 10 KB stays (and `wearlab check` will
    say no run measured it) rather than the file failing."""
    f = write_experiment(tmp_path, claim("c", "metric: wire_total_s\ncells: {size: 10KB}\npaper: 1 s"))
    p = plan(load_experiment(f, CATALOG, overrides={"size": "1KB"}))
    [c] = p.claims
    assert [g.cells for g in c.groups] == [()]


def test_claims_travel_in_the_resolved_experiment(tmp_path):
    e = load_experiment(ROOT / "experiments" / "device-watch.yaml", CATALOG)
    f = tmp_path / "device-watch.yaml"
    with f.open("w") as out:
        YAML().dump(e.to_document(), out)
    again = load_experiment(f, CATALOG)
    assert [c.to_document() for c in again.claims] == [c.to_document() for c in e.claims]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_claims_select_cells(name):
    """The migrated `reference:`s: each claim reads runs of at least one cell per group, and every
    calibration and input says why."""
    p = plan(load_experiment(ROOT / "experiments" / f"{name}.yaml", CATALOG))
    assert p.claims
    for c in p.claims:
        assert all(g.cells for g in c.groups), c.id
        assert c.evidence.value == "prediction" or c.why, c.id
        assert c.id.startswith(name + "-"), c.id


def test_no_experiment_says_reference():
    assert not [f for f in (ROOT / "experiments").rglob("*.yaml") if "\nreference:" in f.read_text()]
    assert os.path.exists(ROOT / "docs" / "claims.md")


def test_an_open_side_reads_as_a_bound(tmp_path, capsys):
    # paper: [null, 55 ms] is "at most 55 ms": the table says so, never "[None, 55 ms]".
    body = "metric: wire_tls_handshake_s\ncells: {protocol: https, size: 1KB}\n"
    d = make_results(tmp_path / "r", claim("hs-at-most", body + "paper: [null, 55 ms]")
                     + claim("hs-at-least", body + "paper: [45 ms, null]"),
                     {("https", "1KB"): ok("wire_tls_handshake_s", HANDSHAKES)})
    rc, out, _ = run_check(capsys, str(d))
    assert rc == 0, out
    assert "None" not in out and "<= 55 ms" in out and ">= 45 ms" in out, out
    assert {r["id"]: r["verdict"] for r in claims_json(d).values()} == {"hs-at-most": "reproduced",
                                                                        "hs-at-least": "reproduced"}


def test_a_paper_value_at_the_papers_size_is_scaled_by_the_cells_app_scale():
    """Seed 003 §5.1's phone energies are for the paper's sizes; 003-interface-selection.yaml runs
    1/16 of them by default (app_scale): paper_scale multiplies the paper's value by the cells'
    scale, by hand 121.984 / 16 = 7.624 J (band +-10 %: 6.8616-8.3864 J), 125.76 / 16 = 7.86 J,
    157.2 / 16 = 9.825 J; the message is not scaled (one message is one message): 0.524 J. With
    `--set app_scale=1/256`, 121.984 / 256 = 0.4765 J; at the paper's scale (1), as written."""
    f = ROOT / "experiments" / "seeds" / "003-interface-selection.yaml"

    def phone(p) -> dict[str, dict]:
        return {c.id.rsplit("-", 1)[1]: c.to_document() for c in p.claims if "phone-proxy-energy" in c.id}

    docs = phone(plan(load_experiment(f, CATALOG)))
    assert {k: d["paper_low"] for k, d in docs.items()} == pytest.approx(
        {"download": 7.624, "video": 7.86, "message": 0.524, "camera": 9.825})
    assert (docs["download"]["band_low"], docs["download"]["band_high"]) == pytest.approx((6.8616, 8.3864))
    assert docs["download"]["paper_text"] == "121.984 J x 1/16 (app_scale)" and docs["message"]["paper_text"] == "0.524 J"
    # bt under both WiFi profiles for the download; the others' fair-WiFi bt cells are excluded
    assert {k: len(d["groups"][0]["cells"]) for k, d in docs.items()} == {"download": 2, "video": 1,
                                                                        "message": 1, "camera": 1}
    small = phone(plan(load_experiment(f, CATALOG, overrides={"app_scale": "1/256"})))
    assert small["download"]["paper_low"] == pytest.approx(0.4765)
    whole = phone(plan(load_experiment(f, CATALOG, overrides={"app_scale": "1"})))
    assert (whole["camera"]["paper_low"], whole["camera"]["paper_text"]) == (pytest.approx(157.2), "157.2 J")
