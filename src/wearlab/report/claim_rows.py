"""The claims of a results directory as the report and the plots read them: the rows of
`claims.json` (written by `wearlab check`, report.check), each joined with the claim as the plan
resolved it (plan.json's `claims`: its cells and the contrast or trend over which parameter), so a
plot can put the paper's value where it belongs.

Where `claims.json` is absent (a run not yet checked) the check is computed here, in memory, by
report.check; where the plan states claims the check cannot score, they are shown as stated -
never a row with an empty cell.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wearlab.model import quantities
from wearlab.model.unit_input import parse_duration, parse_size
from wearlab.report.results import CLAIMS_FILE

NOT_CHECKED = "not checked"
NOT_SCORED = "not scored"
VERDICTS = ("reproduced", "not reproduced", "inconclusive", NOT_SCORED, NOT_CHECKED)


@dataclass
class Claim:
    """One row of claims.json (report.check.ClaimResult's fields) with the plan's cells."""

    id: str
    claim: str = ""
    source: str = ""
    evidence: str = ""
    why: str = ""
    note: str = ""
    remark: str = ""                 # the check's: why inconclusive, runs left out
    metric: str = ""
    statistic: str = "median"
    kind: str = "value"              # value | ratio | difference | trend
    unit: str = ""
    ours: float | None = None
    ours_low: float | None = None
    ours_high: float | None = None
    paper_low: float | None = None
    paper_high: float | None = None
    paper_text: str = ""
    tolerance: str = ""
    difference: float | None = None  # ours - the paper's nearest bound (0 inside)
    difference_rel: float | None = None
    verdict: str = NOT_CHECKED
    runs: int | None = None
    cells: dict[str, Any] = field(default_factory=dict)
    contrast: dict[str, Any] | None = None     # {kind, over, numerator, denominator}
    trend: dict[str, Any] | None = None        # {over, direction}
    noisy_runs: int = 0                        # of `runs`, those from a node whose fidelity probe was noisy
    noisy_from: list[str] = field(default_factory=list)    # those nodes (report.machine_trust)

    def quantity(self) -> quantities.Unit | None:
        """The unit its numbers are in: none for ratios and trends (plain numbers)."""
        if self.kind in ("ratio", "trend") or self.unit not in quantities.UNITS:
            return None
        return quantities.unit(self.unit)

    def fmt(self, v: float | None) -> str:
        if v is None:
            return "–"
        if self.kind == "trend":
            return f"ρ {v:+.2f}"
        q = self.quantity()
        text = q.format(v) if q is not None else f"{v:.3g}"
        return ("+" + text) if self.kind == "difference" and v > 0 else text

    def paper_show(self) -> str:
        if self.paper_text:
            return self.paper_text
        lo, hi = self.paper_low, self.paper_high
        if self.kind == "trend" and self.trend:
            return f"{self.trend.get('direction', '')} (ρ ≥ 0.8 the right way)"
        if lo is None and hi is None:
            return "–"
        if lo is None or hi is None or lo == hi:
            return self.fmt(lo if hi is None else hi)
        return f"{self.fmt(lo)} – {self.fmt(hi)}"

    def ours_show(self) -> str:
        if self.ours is None:
            if self.evidence == "input":
                return "– (an input: the model takes the paper's number)"
            return "– (not measured)" if self.verdict != NOT_CHECKED else "– (not checked)"
        text = self.fmt(self.ours)
        if self.ours_low is not None and self.ours_high is not None:
            low, high = self.fmt(self.ours_low), self.fmt(self.ours_high)
            if not low == high == text:
                text += f" [{low}, {high}]"
        return text

    def difference_show(self) -> str:
        """How far ours lies from the paper's range (its nearest bound)."""
        if self.difference is None:
            return "–"
        if self.difference == 0:
            return "inside"
        q = self.quantity()
        amount = q.format(abs(self.difference)) if q is not None else f"{abs(self.difference):.3g}"
        sign = "+" if self.difference > 0 else "−"
        rel = f" ({self.difference_rel * 100:+.1f} %)".replace("-", "−") if self.difference_rel is not None else ""
        return f"{sign}{amount}{rel}"

    def explanation(self) -> str:
        """Why ours and the paper's differ (note), or why it holds by construction (why)."""
        return " ".join(s.strip() for s in (self.why, self.note) if s and s.strip())

    def what(self) -> str:
        """What it measures: 'median of wire_total_s, https / http over protocol at size=500000'."""
        out = f"{self.statistic} of {self.metric}" if self.metric else ""
        c = self.contrast or {}
        if c:
            op = "/" if c.get("kind") == "ratio" else "−"
            out += f", {c.get('numerator')} {op} {c.get('denominator')} over {c.get('over')}"
        if self.trend:
            out += f", {self.trend.get('direction')} over {self.trend.get('over')} (Spearman ρ)"
        if self.cells:
            out += " at " + ", ".join(f"{k}={v}" for k, v in self.cells.items())
        return out.strip(", ")


def number(v: Any) -> float | None:
    """A CSV or JSON cell as a finite number, else None (empty, text, a bool, inf, nan)."""
    if v is None or v == "" or isinstance(v, bool):
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def source_text(source: Any) -> str:
    if isinstance(source, dict):
        seed = source.get("seed")
        parts = [f"seed {seed}" if seed not in (None, "") else "", str(source.get("where") or "")]
        return ", ".join(p for p in parts if p)
    return str(source or "")


def from_row(row: dict[str, Any], spec: dict[str, Any] | None = None) -> Claim:
    """A claims.json row (and the plan's claim, if known) as a Claim."""
    spec = spec or {}

    def get(k: str, default: Any = None) -> Any:
        v = row.get(k)
        return spec.get(k, default) if v is None or v == "" else v

    contrast = get("contrast") if isinstance(get("contrast"), dict) else None
    trend = get("trend") if isinstance(get("trend"), dict) else None
    kind = str(row.get("kind") or ("trend" if trend else contrast.get("kind") if contrast else "value"))
    runs = row.get("runs")
    return Claim(
        id=str(get("id", "?")), claim=str(get("claim", "")), source=source_text(get("source")),
        evidence=str(get("evidence", "")), why=str(get("why", "") or ""), note=str(get("note", "") or ""),
        remark=str(row.get("remark") or ""), metric=str(get("metric", "") or ""),
        statistic=str(get("statistic", "median")), kind=kind, unit=str(get("unit", "") or ""),
        ours=number(row.get("ours")), ours_low=number(row.get("ours_low")), ours_high=number(row.get("ours_high")),
        paper_low=number(get("paper_low")), paper_high=number(get("paper_high")),
        paper_text=str(get("paper_text", "") or ""), tolerance=str(get("tolerance", "") or ""),
        difference=number(row.get("difference")), difference_rel=number(row.get("difference_rel")),
        verdict=str(row.get("verdict") or NOT_CHECKED),
        runs=int(runs) if isinstance(runs, (int, float)) and not isinstance(runs, bool) else None,
        cells=dict(get("cells") or {}), contrast=contrast, trend=trend,
        noisy_runs=int(row.get("noisy_runs") or 0), noisy_from=[str(x) for x in row.get("noisy_from") or []])


def planned(results: Path) -> list[dict[str, Any]]:
    """The claims the plan resolved (plan.json's `claims`)."""
    p = results / "plan.json"
    if not p.is_file():
        return []
    try:
        doc = json.loads(p.read_text())
    except ValueError:
        return []
    claims = doc.get("claims") if isinstance(doc, dict) else None
    return [c for c in claims or [] if isinstance(c, dict) and c.get("id")]


def _checked(results: Path) -> list[dict[str, Any]] | None:
    """report.check's verdicts for a directory without claims.json (nothing written)."""
    from dataclasses import asdict

    from wearlab.report import check, machine_trust

    try:
        plan, rows = check.load(results)
        return [asdict(r) for r in check.evaluate(plan, rows, machine_trust.read_metadata(results))]
    except Exception:   # `wearlab check` says what is wrong with the directory; the page shows them unchecked
        return None


def load(results: Path) -> list[Claim]:
    """The claims of a results directory, in the order the experiment states them: claims.json's
    rows, else the check computed now, else the plan's claims unchecked."""
    specs = planned(results)
    by_id = {str(s["id"]): s for s in specs}
    path = results / CLAIMS_FILE
    rows: list[dict[str, Any]] | None = None
    if path.is_file():
        doc = json.loads(path.read_text())
        rows = doc.get("claims", []) if isinstance(doc, dict) else doc
        rows = _with_noisy_runs(results, rows) if specs else rows
    elif specs:
        rows = _checked(results)
    if rows is None:
        return [from_row({"verdict": NOT_SCORED if s.get("evidence") == "input" else NOT_CHECKED}, s) for s in specs]
    return [from_row(r, by_id.get(str(r.get("id")))) for r in rows if isinstance(r, dict)]


def _with_noisy_runs(results: Path, rows: list[Any]) -> list[Any]:
    """claims.json's rows, each with the noisy nodes behind it: as written by a check that knew
    (report.check), else counted now from metadata.json (a claims.json from before the probe's flags)."""
    from wearlab.report import machine_trust

    if all(isinstance(r, dict) and "noisy_from" in r for r in rows):
        return rows
    if not machine_trust.noisy(machine_trust.read_metadata(results)):
        return rows
    checked = {str(r.get("id")): r for r in _checked(results) or []}
    return [{**r, **{k: checked[str(r.get("id"))][k] for k in ("noisy_runs", "noisy_from")}}
            if isinstance(r, dict) and str(r.get("id")) in checked else r for r in rows]


def verdict_counts(claims: list[Claim]) -> dict[str, int]:
    counts = {v: 0 for v in VERDICTS}
    for c in claims:
        counts[c.verdict if c.verdict in counts else NOT_CHECKED] += 1
    return counts


def cell_matches(cells: dict[str, Any], row: dict[str, Any]) -> bool:
    """Whether a runs.csv row (or a cell's values) is one of the claim's cells. A parameter that
    does not apply to the row ("": TLS settings of plain HTTP) does not exclude it, as in the plan."""
    return all(row.get(k) in ("", None) and k in row or same_value(want, row.get(k)) for k, want in cells.items())


def same_value(want: Any, have: Any) -> bool:
    """A claim's value (plan.json: as the cells hold it; or as written in YAML, "500KB") against
    a runs.csv field ("500000", "False", "5.000000")."""
    if have is None:
        return False
    if isinstance(want, list):
        return any(same_value(w, have) for w in want)
    w, h = str(want).strip(), str(have).strip()
    if w.lower() == h.lower():
        return True
    hv = number(h)
    if hv is None:
        return False
    if number(w) is not None:
        return math.isclose(float(w), hv, rel_tol=1e-9)
    for parse in (parse_size, lambda t: parse_duration(t, bare_unit="s")):
        try:
            return math.isclose(float(parse(w)), hv, rel_tol=1e-9)
        except (ValueError, TypeError):
            continue
    return False
