"""The shard fidelity probe where a user reads results: `wearlab check` warns about noisy and
unprobed shards and flags each claim whose runs came from a noisy one (its verdict unchanged, the
exit status the verdicts'), and `wearlab report`'s page has a Fidelity section and marks those
claims. Host-side and fast: results directories written here, merged by `wearlab merge`'s own code
(no network, no guest).

The merged fixture: 2 cells (http, https) x 3 repetitions = 6 runs in 4 shards, as `--shard I/4`
slices them (run.shard: 1 | 2, 3 | 4 | 5, 6; run n is cell (n-1) % 2, so odd runs are http):
shard 3-of-4 (run 4, https) is the one the probe judges, 1-of-4 and 2-of-4 are quiet, 4-of-4 has
no probe (a wearlab before it). So the https claim pools 1 run of 3 from 3-of-4, the http claim none.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from conftest import wearlab
from wearlab.measure import fidelity
from wearlab.report import check, html_report, merge
from wearlab.run.shard import Shard

EXPERIMENT = """
name: sharded-claims
topology:
  nodes:
    watch: {role: wearable}
    server: {role: server}
  links: [{between: [watch, server], rate: 2Mbit, delay: 5ms}]
repetitions: 3
workload: {kind: http-get, client: watch, server: server}
matrix: {protocol: [http, https], size: [1000]}
expect:
  - id: http-total
    claim: An HTTP fetch of 1 kB takes 20-40 ms
    source: {where: "made up for the test"}
    evidence: prediction
    metric: wire_total_s
    cells: {protocol: http}
    paper: [20 ms, 40 ms]
  - id: https-total
    claim: An HTTPS fetch of 1 kB takes 40-80 ms
    source: {where: "made up for the test"}
    evidence: prediction
    metric: wire_total_s
    cells: {protocol: https}
    paper: [40 ms, 80 ms]
"""
CONFIGURED_MS = 10.0            # the path's RTT: 5 ms each way on the one link
# Each run's total (s): well inside its claim's band, so both claims are reproduced and `check`
# exits 0 - a noisy shard must not turn that into 1.
TOTAL_S = {"http": (0.030, 0.031, 0.032), "https": (0.060, 0.061, 0.062)}
SHARDS = 4
NOISY = "3-of-4"

# The probe's rule by hand (measure.fidelity): trusted when configured - 0.05 ms <= median <=
# configured + max(2 ms, 5 % of configured); at 10 ms configured, 5 % is 0.5 ms so 2 ms counts:
# trusted in [9.95, 12.0] ms. Each case is just inside or just outside one edge.
EDGES = [
    (11.95, "trusted"),         # 1.95 ms above: inside the 2 ms
    (12.05, "noisy"),           # 2.05 ms above: outside
    (9.96, "trusted"),          # 0.04 ms below: within ping's resolution
    (9.94, "noisy"),            # 0.06 ms below: faster than the physics, the shaping is not the plan's
]


@pytest.fixture(scope="module")
def plan_doc(tmp_path_factory) -> dict:
    exp = tmp_path_factory.mktemp("exp") / "e.yaml"
    exp.write_text(EXPERIMENT)
    res = wearlab("plan", str(exp), "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"] == 6 and [c["id"] for c in doc["claims"]] == ["http-total", "https-total"]
    return doc


def _probe(median_ms: float) -> dict:
    return {"probe": "ping 10 ICMP echoes watch -> server", "path": ["watch", "server"],
            **fidelity.judge(CONFIGURED_MS, [median_ms] * 10)}


def _shard_dir(root: Path, plan: dict, index: int, probe: dict | None) -> Path:
    """Shard index/SHARDS's results directory as a run writes it (runs.csv with its runs' totals)."""
    d = root / f"shard{index}"
    (d / "series").mkdir(parents=True)
    (d / "plan.json").write_text(json.dumps(plan))
    (d / "metadata.json").write_text(json.dumps({
        "experiment": plan["experiment"], "status": "complete", "shard": {"index": index, "count": SHARDS},
        "machine": {"kernel": "Linux test", "hostname": f"node{index}"},
        "columns": {"params": ["protocol", "size"], "metrics": {"wire_total_s": {"unit": "s", "summarised": True}}},
        **({"fidelity": probe} if probe is not None else {})}))
    with (d / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "repetition", "protocol", "size", "status", "run_seed", "wire_total_s"])
        for n in Shard(index, SHARDS).runs(6):
            rep, proto = (n - 1) // 2 + 1, ["http", "https"][(n - 1) % 2]
            w.writerow([n, rep, proto, 1000, "ok", "", TOTAL_S[proto][rep - 1]])
    return d


def _merged(root: Path, plan: dict, median_ms: float) -> Path:
    probes = {1: _probe(10.2), 2: _probe(11.0), 3: _probe(median_ms), 4: None}
    dirs = [_shard_dir(root, plan, i, probes[i]) for i in range(1, SHARDS + 1)]
    assert merge.merge(root / "merged", dirs, Console(file=io.StringIO())) == 0
    return root / "merged"


def _check(d: Path, *, as_json: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = check.check_command([d], as_json=as_json, console=Console(file=out, width=120),
                             err_console=Console(file=err, width=10_000))
    return rc, out.getvalue(), " ".join(err.getvalue().split())


@pytest.mark.parametrize("median_ms, trust", EDGES)
def test_check_flags_the_claims_of_a_noisy_shard_and_keeps_their_verdicts(tmp_path, plan_doc, median_ms, trust):
    d = _merged(tmp_path, plan_doc, median_ms)
    assert "fidelity" not in json.loads((d / "metadata.json").read_text())   # each shard's is in `shards`
    rc, out, err = _check(d, as_json=True)
    doc, = json.loads(out)                                   # warnings on stderr: stdout is JSON alone
    claims = {c["id"]: c for c in doc["claims"]}
    # The verdicts are the runs', scored as if no node had been probed.
    plan, rows = check.load(d)
    assert {c["id"]: c["verdict"] for c in doc["claims"]} == {r.id: r.verdict for r in check.evaluate(plan, rows)} \
        == {"http-total": "reproduced", "https-total": "reproduced"}
    assert rc == 0                                           # flagged, never failed
    assert doc["fidelity"]["not_probed"] == ["4-of-4"] and doc["fidelity"]["rule"] == fidelity.RULE
    assert [m["trust"] for m in doc["fidelity"]["machines"]] == ["trusted", "trusted", trust, "not probed"]
    assert "shards not probed: 4-of-4" in err and "nothing says whether their node was quiet" in err
    assert (claims["http-total"]["noisy_runs"], claims["http-total"]["noisy_from"]) == (0, [])
    if trust == "noisy":
        assert doc["fidelity"]["noisy"] == [NOISY]
        assert (claims["https-total"]["noisy_runs"], claims["https-total"]["noisy_from"], claims["https-total"]["runs"]) \
            == (1, [NOISY], 3)
        assert f"noisy shards: {NOISY}" in err and fidelity.RULE in err and f"median {median_ms} ms" in err
        assert "verdicts of claims with runs from them are unchanged" in err
    else:
        assert doc["fidelity"]["noisy"] == [] and claims["https-total"]["noisy_runs"] == 0
        assert "noisy" not in err


def test_check_says_so_on_the_verdict_line_and_in_claims_json(tmp_path, plan_doc):
    d = _merged(tmp_path, plan_doc, 12.05)
    # The merge's own claims.json already names the noisy shard behind the https claim.
    written = {c["id"]: c for c in json.loads((d / "claims.json").read_text())}
    assert written["https-total"]["noisy_from"] == [NOISY] and written["http-total"]["noisy_from"] == []
    rc, out, err = _check(d, as_json=False)
    assert rc == 0
    text = " ".join(out.split())
    assert "https-total: 1 of 3 runs from noisy node 3-of-4: timings suspect, verdict not re-judged" in text, text
    assert "http-total:" not in text                         # untouched: no line of its own
    assert out.count("noisy node") == 3                      # under its verdict, its line, the headline
    assert "2 reproduced, 0 not reproduced" in text and "1 with runs from a noisy node (flagged, not re-judged)" in text
    assert f"noisy shards: {NOISY}" in err


def test_the_cli_warns_on_stderr_and_exits_with_the_verdicts_status(tmp_path, plan_doc):
    d = _merged(tmp_path, plan_doc, 12.05)
    res = wearlab("check", str(d), "--json", timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)[0]["fidelity"]["noisy"] == [NOISY]
    assert f"noisy shards: {NOISY}" in " ".join(res.stderr.split()) and "Traceback" not in res.stderr


@pytest.mark.parametrize("median_ms, trust", [EDGES[0], EDGES[1]])
def test_one_machines_result_is_flagged_when_its_probe_was_noisy(tmp_path, plan_doc, median_ms, trust):
    """A shard's directory before any merge (one machine, its probe in its metadata): every run is its."""
    d = _shard_dir(tmp_path, plan_doc, 3, _probe(median_ms))
    rc, out, err = _check(d, as_json=True)
    doc, = json.loads(out)
    https = next(c for c in doc["claims"] if c["id"] == "https-total")
    assert https["runs"] == 1 and https["verdict"] == "inconclusive"   # 1 run: fewer than MIN_RUNS, as ever
    if trust == "noisy":
        assert (https["noisy_runs"], https["noisy_from"]) == (1, [NOISY]) and doc["fidelity"]["noisy"] == [NOISY]
        assert f"noisy machine: {NOISY}" in err
    else:
        assert https["noisy_runs"] == 0 and err == ""


def test_one_machine_without_a_probe_is_not_warned_about(tmp_path, plan_doc):
    d = _shard_dir(tmp_path, plan_doc, 3, None)
    rc, out, err = _check(d, as_json=True)
    doc, = json.loads(out)
    assert err == "" and doc["fidelity"]["noisy"] == [] and doc["fidelity"]["not_probed"] == []


def _row_text(page: str, claim_id: str) -> str:
    row = page.split(f'id="claim-{claim_id}"')[1].split("</tr>")[0]
    return row


def test_the_report_shows_each_shards_probe_and_marks_the_claims_it_touched(tmp_path, plan_doc):
    d = _merged(tmp_path, plan_doc, 12.05)
    page, index = (f.read_text() for f in html_report.write_report([d], tmp_path / "report", draw=False))
    assert "runs from noisy node: 3-of-4" in index
    section = page.split('<h2 id="fidelity">')[1].split("<h2")[0]
    assert "Fidelity" in section and fidelity.RULE in section.replace("&lt;", "<").replace("&gt;", ">")
    probe = section.split(f'id="probe-{NOISY}"')[1].split("</tr>")[0]
    # configured beside measured, and the verdict
    assert "10.0 ms" in probe and "12.05 ms" in probe and ">noisy<" in probe and "2.0 ms" in probe
    quiet = section.split('id="probe-1-of-4"')[1].split("</tr>")[0]
    assert "10.0 ms" in quiet and "10.2 ms" in quiet and ">trusted<" in quiet
    assert ">not probed<" in section.split('id="probe-4-of-4"')[1].split("</tr>")[0]
    assert 'href="#claim-https-total"' in section and 'href="#claim-http-total"' not in section
    assert "1 of 3 runs from noisy node 3-of-4" in _row_text(page, "https-total")
    assert "noisy" not in _row_text(page, "http-total")
    assert '<p class="noisy">Fidelity: runs from noisy node (3-of-4)' in page


def test_the_report_marks_the_claims_from_a_claims_json_written_before_the_flags(tmp_path, plan_doc):
    """claims.json from a wearlab before these fields: the page counts them from metadata.json."""
    d = _merged(tmp_path, plan_doc, 12.05)
    rows = json.loads((d / "claims.json").read_text())
    (d / "claims.json").write_text(json.dumps([{k: v for k, v in r.items() if k not in ("noisy_runs", "noisy_from")}
                                               for r in rows]))
    page = html_report.page_html(html_report.load(d))
    assert "1 of 3 runs from noisy node 3-of-4" in _row_text(page, "https-total")


def test_a_quiet_merge_has_no_warning_on_the_page(tmp_path, plan_doc):
    d = _merged(tmp_path, plan_doc, 11.95)
    page = html_report.page_html(html_report.load(d))
    assert '<p class="noisy">' not in page.replace('<p class="noisy">Fidelity: shard not probed (4-of-4)', "")
    assert "runs from noisy" not in page
