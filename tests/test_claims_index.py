"""The seeds' claims index, experiments/seeds/claims.yaml, and the suite's experiments agree, both
ways: every claim an experiment of experiments/seeds/ states in `expect:` has its row in the
index naming that experiment, and every row naming an experiment is a claim of that file's
`expect:` (same seed, place in the paper and kind of evidence). Every row says which seed and
where in it, what the paper claims, the paper's value and the kind of evidence; a row without an
experiment is `status: not-yet-expressible` and says what it needs.

Read as plain YAML, not through wearlab's loader: the index is the map of every claim of
../shared/docs/seeds.md, and a claim that the loader would drop must still be found here.
(That every suite file loads, plans and runs is tests/test_shipped_experiments.py's.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import ROOT

SEEDS_DIR = ROOT / "experiments" / "seeds"
INDEX = SEEDS_DIR / "claims.yaml"
REQUIRED = ("id", "seed", "where", "claim", "paper", "evidence")
ALLOWED = {*REQUIRED, "experiment", "status", "needs"}
EVIDENCE = {"input", "calibration", "prediction"}
NOT_YET = "not-yet-expressible"
SEED = re.compile(r"\d{3}")


def _yaml(path: Path):
    return YAML(typ="safe").load(path.read_text())


def _seed(v) -> str:
    # `seed: 000` unquoted is the integer 0 in YAML; the seed files' numbers have three digits.
    return f"{v:03d}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def suite_files() -> list[Path]:
    return sorted(p for p in SEEDS_DIR.glob("*.yaml") if p != INDEX)


def index_rows() -> list[dict]:
    doc = _yaml(INDEX)
    assert isinstance(doc, dict) and isinstance(doc.get("claims"), list), f"{INDEX}: expected `claims:` with a list"
    return doc["claims"]


def stated() -> dict[str, tuple[str, dict]]:
    """Every claim of the suite's experiments: id -> (experiment, the claim as written)."""
    out: dict[str, tuple[str, dict]] = {}
    for path in suite_files():
        for c in _yaml(path).get("expect") or []:
            assert c["id"] not in out, f"claim id {c['id']} in both {out[c['id']][0]} and {_rel(path)}"
            out[c["id"]] = (_rel(path), c)
    return out


def test_the_suite_has_experiments_with_claims():
    files = suite_files()
    assert files, f"no experiments in {SEEDS_DIR}"
    empty = [_rel(p) for p in files if not _yaml(p).get("expect")]
    assert not empty, f"suite experiments without claims (expect:): {empty}"


def test_every_row_says_what_the_paper_claims_and_what_kind_of_evidence_it_is():
    problems = []
    for i, row in enumerate(index_rows()):
        at = f"claims[{i}] {row.get('id', '?')}"
        missing = [k for k in REQUIRED if row.get(k) in (None, "")]
        if missing:
            problems.append(f"{at}: missing {', '.join(missing)}")
        unknown = set(row) - ALLOWED
        if unknown:
            problems.append(f"{at}: unknown keys {sorted(unknown)} (a row has {sorted(ALLOWED)})")
        if row.get("evidence") not in EVIDENCE:
            problems.append(f"{at}: evidence {row.get('evidence')!r} is not one of {sorted(EVIDENCE)}")
        if not SEED.fullmatch(_seed(row.get("seed"))):
            problems.append(f"{at}: seed {row.get('seed')!r} is not a seed file's number (000 ... 004)")
        if ("experiment" in row) == ("status" in row):
            problems.append(f"{at}: needs exactly one of experiment: (where it is claimed) or status: {NOT_YET}")
        elif "status" in row:
            if row["status"] != NOT_YET:
                problems.append(f"{at}: status {row['status']!r}; the only status is {NOT_YET}")
            if not str(row.get("needs") or "").strip():
                problems.append(f"{at}: a row not yet expressible says what it needs (needs:)")
        elif "needs" in row:
            problems.append(f"{at}: needs: belongs to rows not yet expressible")
    assert not problems, "\n".join(problems)


def test_ids_are_unique_in_the_index():
    ids = [r.get("id") for r in index_rows()]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"ids in the index more than once: {twice}"


def test_every_claim_of_the_suite_is_in_the_index_with_its_experiment():
    rows = {r["id"]: r for r in index_rows()}
    problems = []
    for cid, (exp, claim) in stated().items():
        row = rows.get(cid)
        if row is None:
            problems.append(f"{exp}: claim {cid} has no row in {_rel(INDEX)}")
            continue
        if row.get("experiment") != exp:
            problems.append(f"{cid}: claimed in {exp}, but the index says "
                            f"{row.get('experiment') or row.get('status')}")
        source = claim.get("source") or {}
        if _seed(row.get("seed")) != _seed(source.get("seed")):
            problems.append(f"{cid}: seed {_seed(row.get('seed'))} in the index, {_seed(source.get('seed'))} in {exp}")
        if row.get("where") != source.get("where"):
            problems.append(f"{cid}: where {row.get('where')!r} in the index, {source.get('where')!r} in {exp}")
        if row.get("evidence") != claim.get("evidence"):
            problems.append(f"{cid}: evidence {row.get('evidence')} in the index, {claim.get('evidence')} in {exp}")
    assert not problems, "\n".join(problems)


def test_every_row_with_an_experiment_is_claimed_there():
    claims = stated()
    problems = []
    for row in index_rows():
        exp = row.get("experiment")
        if exp is None:
            continue
        if not (ROOT / exp).is_file():
            problems.append(f"{row['id']}: experiment {exp} does not exist")
        elif row["id"] not in claims or claims[row["id"]][0] != exp:
            problems.append(f"{row['id']}: not in {exp}'s expect:")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments").glob("*.yaml")), ids=lambda p: p.stem)
def test_other_experiments_do_not_reuse_the_indexs_ids(path):
    """The index's ids name the suite's claims; an experiment outside it that reused one would make
    a report's link ambiguous."""
    ids = {r["id"]: r.get("experiment") for r in index_rows()}
    reused = [c["id"] for c in _yaml(path).get("expect") or [] if c.get("id") in ids]
    assert not reused, f"{_rel(path)} reuses claim ids of {_rel(INDEX)}: {reused}"
