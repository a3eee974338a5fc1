"""`wearlab report RESULTS... [--out DIR]`: one self-contained HTML page per results directory and
an index for the suite (docs/results.md#the-report).

A page shows, for one experiment: every claim (ours, the paper's, the difference, the kind of
evidence, the verdict and why they differ), the figures of `plots.draw` inline as base64 PNG,
the medians per cell, each machine's fidelity probe (report.machine_trust: configured beside
measured RTT, trusted or noisy; the claims with runs from a noisy one are marked), and what makes
the result reproducible (metadata.json: kernel, runtime,
versions, seeds, the plan's digest, qdiscs, sysctls, offloads, assumed values). The index lists
every experiment with its claims' verdict counts and, where the experiments come with a claims
index (`claims.yaml` beside them, experiments/seeds/), every claim of the map - run or not yet
expressible. Nothing is fetched: no scripts, fonts or images from anywhere.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from wearlab.errors import InputError, Problem
from wearlab.model import quantities
from wearlab.measure import fidelity
from wearlab.report import claim_rows, machine_trust, plots
from wearlab.report.claim_rows import Claim
from wearlab.report.results import read_runs
from wearlab.report.summary import summarize
from wearlab.report.table import noisy_note

INDEX = "index.html"
CLAIMS_INDEX = "claims.yaml"        # beside the suite's experiments: every claim of seeds.md
VERDICT_CLASS = {"reproduced": "ok", "not reproduced": "bad", "inconclusive": "meh", "not scored": "info",
                 "not checked": "none", "not run": "none", "not yet expressible": "none",
                 "trusted": "ok", "noisy": "bad", "not probed": "none"}
EVIDENCE_TEXT = {"input": "input: a number the model takes from the paper (shown, not scored)",
                 "calibration": "calibration: holds by construction once the inputs are right",
                 "prediction": "prediction: the model was not tuned to it"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;
 padding:16px 24px;color:#1b1b1b;background:#fff}
h1{font-size:24px;margin:8px 0 4px}h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}
nav{font-size:13px;color:#555}nav a{color:#1a5fb4}nav.contents{margin:2px 0 8px}
.facts{color:#444;margin:2px 0 10px}.desc{margin:4px 0}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:13px}
th,td{border:1px solid #d6d6d6;padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
table.claims,table.fixed{table-layout:fixed}table.claims td{font-size:12.5px}
.claimtext small{font-size:11px}
th{background:#f3f3f3;font-weight:600}
td.num{text-align:right}
.v{display:inline-block;padding:1px 7px;border-radius:9px;font-weight:600;white-space:nowrap}
.v.ok{background:#d9f2dd;color:#14532d}.v.bad{background:#fbd9d6;color:#7f1d1d}
.v.meh{background:#fdf0c8;color:#713f12}.v.info{background:#dde9fb;color:#1e3a8a}.v.none{background:#eee;color:#444}
.ev{font-size:12px;color:#333}
.claimtext small{color:#555}
.why{color:#333}.why.missing{color:#7f1d1d}
figure{margin:10px 0 22px}figure img{max-width:100%;height:auto;border:1px solid #e3e3e3}
figcaption{color:#444;font-size:13px;margin-top:3px}
.missing-figs{color:#555;font-style:italic}
details{margin:4px 0}summary{cursor:pointer;color:#1a5fb4}
pre{background:#f7f7f7;padding:6px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
dl.meta{display:grid;grid-template-columns:220px minmax(0,1fr);gap:2px 12px;font-size:13px}
dl.meta dt{font-weight:600;color:#333}dl.meta dd{margin:0;word-break:break-all}
.counts span{margin-right:10px}th .v{white-space:normal;font-size:12px}
.noisy{color:#713f12;font-weight:600}
"""


@dataclass
class Page:
    """One results directory as the report shows it."""

    results: Path
    experiment: str
    file: str                                   # the page's file name in the report directory
    meta: dict[str, Any]
    plan: dict[str, Any]
    runs: list[dict[str, str]]
    claims: list[Claim]
    drawing: plots.Drawing | None = None
    figures_png: list[tuple[plots.Figure, bytes]] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return sum(1 for r in self.runs if r.get("status") == "ok")


# -- finding results --------------------------------------------------------------------------

def results_dirs(args: list[Path]) -> list[Path]:
    """What `wearlab check` takes as RESULTS (report.check.find_results): a results directory, an
    experiment's (its `latest`), or a suite's (each experiment's latest under it)."""
    from wearlab.report.check import find_results

    dirs = find_results(args)
    missing = [Problem(str(d), None, None, "no metadata.json: not a complete results directory") for d in dirs
               if not (d / "metadata.json").is_file()]
    if missing:
        raise InputError(missing)
    return dirs


def load(results: Path) -> Page:
    meta = json.loads((results / "metadata.json").read_text())
    plan_file = results / "plan.json"
    plan = json.loads(plan_file.read_text()) if plan_file.is_file() else {}
    runs = read_runs(results / "runs.csv") if (results / "runs.csv").is_file() else []
    experiment = str(meta.get("experiment") or plan.get("experiment") or results.parent.name)
    return Page(results, experiment, f"{experiment}.html", meta, plan, runs, claim_rows.load(results))


# -- writing -----------------------------------------------------------------------------------

def write_report(dirs: list[Path], out: Path, *, draw: bool = True) -> list[Path]:
    """The pages and the index; returns the files written (the index last)."""
    pages = [load(d) for d in dirs]
    names: dict[str, int] = {}
    for p in pages:
        names[p.experiment] = names.get(p.experiment, 0) + 1
    for p in pages:
        if names[p.experiment] > 1:
            p.file = f"{p.experiment}-{p.results.resolve().name}.html"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for p in pages:
        if draw:
            d = plots.draw(p.results, p.claims)
            try:
                p.drawing = d
                p.figures_png = [(f, f.png()) for f in d.figures]
            finally:
                d.close()
        path = out / p.file
        path.write_text(page_html(p))
        written.append(path)
    index = out / INDEX
    index.write_text(index_html(pages))
    written.append(index)
    return written


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _verdict(v: str, runs: int | None = None) -> str:
    extra = f" ({runs} run{'s' if runs != 1 else ''})" if runs is not None and v != claim_rows.NOT_SCORED else ""
    return f'<span class="v {VERDICT_CLASS.get(v, "none")}">{_e(v)}</span>{_e(extra)}'


def _head(title: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>\n")


def _stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def claims_table(claims: list[Claim]) -> str:
    if not claims:
        return ('<p class="missing-figs">This experiment states no claims (no <code>expect:</code>): nothing '
                "here is compared with a paper.</p>")
    counts = claim_rows.verdict_counts(claims)
    head = '<p class="counts">' + "".join(f"<span>{_verdict(v)} {n}</span>" for v, n in counts.items() if n) + "</p>"
    rows = []
    for c in claims:
        why = c.explanation()
        if not why:
            if c.verdict == "not reproduced":
                why_html = '<span class="why missing">no reason recorded (the claim has no <code>note:</code>)</span>'
            elif c.verdict == "reproduced":
                why_html = '<span class="why">agrees: nothing to explain</span>'
            elif c.verdict == "inconclusive":
                why_html = '<span class="why">undecided: see the verdict</span>' if c.remark else \
                    '<span class="why">undecided: ours\' interval crosses the edge of the paper\'s band</span>'
            else:
                why_html = '<span class="why">–</span>'
        else:
            why_html = f'<span class="why">{_e(why)}</span>'
        tol = f"<br><small>tolerance {_e(c.tolerance)}</small>" if c.tolerance not in ("", "0") else ""
        remark = f"<br><small>{_e(c.remark)}</small>" if c.remark else ""
        if c.noisy_runs:
            remark = (f'<br><small class="noisy">{_e(noisy_note(c.noisy_runs, c.runs, c.noisy_from))}</small>'
                      + remark)
        rows.append(
            f'<tr class="claim" id="claim-{_e(c.id)}">'
            f'<td class="claimtext"><b>{_e(c.id)}</b><br>{_e(c.claim or "–")}<br>'
            f"<small>{_e(' · '.join(x for x in (c.source or 'no source given', c.what()) if x))}</small></td>"
            f'<td class="ev" title="{_e(EVIDENCE_TEXT.get(c.evidence, c.evidence))}">{_e(c.evidence or "–")}</td>'
            f'<td class="num">{_e(c.ours_show())}</td>'
            f'<td class="num">{_e(c.paper_show())}{tol}</td>'
            f"<td>{_e(c.difference_show())}</td>"
            f"<td>{_verdict(c.verdict, c.runs)}{remark}</td>"
            f"<td>{why_html}</td></tr>")
    cols = "".join(f'<col style="width:{w}%">' for w in (31, 8, 13, 12, 10, 11, 15))
    return (head + f'<table class="claims"><colgroup>{cols}</colgroup><thead><tr><th>claim</th><th>evidence</th>'
            "<th>ours [95 % interval]</th><th>paper</th><th>difference from the paper's range</th><th>verdict</th>"
            "<th>why they differ</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _cells_table(p: Page) -> str:
    metrics_meta = p.meta.get("columns", {}).get("metrics", {}) or {}
    metrics = [m for m, d in metrics_meta.items() if isinstance(d, dict) and d.get("summarised")]
    params = list(p.meta.get("columns", {}).get("params") or [])
    varied = [k for k in params if len({r.get(k, "") for r in p.runs} - {""}) > 1]
    if not p.runs:
        return '<p class="missing-figs">runs.csv holds no runs.</p>'
    cells = summarize(p.runs, params, metrics)
    metrics = [m for m in metrics if any(m in c.stats for c in cells)]
    head = "".join(f"<th>{_e(k.split('.')[-1])}</th>" for k in varied) + "<th>runs ok / failed</th>" + "".join(
        f"<th>{_e(metrics_meta[m].get('label') or m)}<br><small>{_e(m)}</small></th>" for m in metrics)
    body = []
    for c in cells:
        tds = "".join(f"<td>{_e(plots._shown(k, c.params.get(k, '')))}</td>" for k in varied)
        tds += f'<td class="num">{c.ok} / {c.failed}</td>'
        for m in metrics:
            if m in c.stats:
                q1, med, q3 = c.stats[m]
                u = quantities.UNITS.get(metrics_meta[m].get("unit", ""))
                text = u.format_spread(med, q3 - q1) if u else f"{med:.3g} [{q3 - q1:.2g}]"
            else:
                text = "–"
            tds += f'<td class="num">{_e(text)}</td>'
        body.append(f"<tr>{tds}</tr>")
    return (f"<p>Median [IQR] over each cell's successful runs.</p><table><thead><tr>{head}</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


def _ms(doc: dict[str, Any], key: str) -> str:
    v = doc.get(key)
    return f"{v} ms" if isinstance(v, (int, float)) and not isinstance(v, bool) else "–"


def fidelity_section(p: Page) -> str:
    """Each node's fidelity probe: the path's configured RTT beside the median it measured, the
    verdict by the probe's rule, and the runs it contributed."""
    nodes = machine_trust.machines(p.meta)
    if all(m.probe is None for m in nodes) and not machine_trust.merged(p.meta):
        return ('<p class="missing-figs">No fidelity probe in metadata.json (a wearlab before the probe): '
                "nothing says whether the node was quiet.</p>")
    rows = []
    for m in nodes:
        f = m.probe or {}
        runs = "all" if m.runs is None else str(len(m.runs))
        reason = f.get("reason") or ("no fidelity in its metadata: a wearlab before the probe" if m.probe is None else "")
        rows.append(f'<tr class="probe" id="probe-{_e(m.label)}"><td>{_e(m.label)}</td><td>{_e(f.get("probe") or "–")}</td>'
                    f'<td class="num">{_e(_ms(f, "configured_rtt_ms"))}</td><td class="num">{_e(_ms(f, "median_ms"))}</td>'
                    f'<td class="num">{_e(_ms(f, "max_ms"))}</td><td class="num">{_e(_ms(f, "allowed_excess_ms"))}</td>'
                    f"<td>{_verdict(m.trust)}</td><td>{_e(reason or '–')}</td><td class=\"num\">{_e(runs)}</td></tr>")
    touched = [c for c in p.claims if c.noisy_runs]
    noisy = [m.label for m in nodes if m.trust == "noisy"]
    after = ""
    if noisy:
        after = (f'<p class="noisy">Noisy: {_e(", ".join(noisy))}. Their runs are kept and no verdict is re-judged; '
                 f"their timings are suspect. Claims with runs from them: "
                 + (", ".join(f'<a href="#claim-{_e(c.id)}">{_e(c.id)}</a>' for c in touched) or "none")
                 + ".</p>")
    return (f"<p>Before its first run each node pings from the workload's client to its server and compares the "
            f"median round trip with the path's configured RTT: {_e(fidelity.RULE)} (calibrated on quiet nodes: "
            f"<code>src/wearlab/measure/fidelity.py</code>).</p>"
            '<table class="fixed"><colgroup>' + "".join(f'<col style="width:{w}%">' for w in (8, 19, 9, 9, 9, 9, 10, 21, 6))
            + '</colgroup><thead><tr><th>node</th><th>probe</th><th>configured RTT</th><th>median RTT</th><th>max RTT</th>'
            "<th>allowed above</th><th>verdict</th><th>why</th><th>runs</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>" + after)


def _figures(p: Page) -> str:
    if p.drawing is None:
        return ""
    out = []
    for section, title in plots.SECTIONS.items():
        figs = [(f, png) for f, png in p.figures_png if f.section == section]
        if not figs and section not in p.drawing.missing:
            continue
        out.append(f'<section id="{section}"><h3>{_e(title)}</h3>')
        for f, png in figs:
            out.append(f'<figure id="fig-{_e(f.name)}"><img alt="{_e(f.title)}" src="data:image/png;base64,'
                       f'{base64.b64encode(png).decode()}"><figcaption><b>{_e(f.title)}.</b> {_e(f.caption)}'
                       "</figcaption></figure>")
        if not figs:
            out.append(f'<p class="missing-figs">No {_e(title)} figures: {_e(p.drawing.missing[section])}.</p>')
        out.append("</section>")
    for section, why in p.drawing.missing.items():
        if section not in plots.SECTIONS:
            out.append(f'<p class="missing-figs">No figures for {_e(section)}: {_e(why)}.</p>')
    return "".join(out)


def _dl(items: list[tuple[str, Any]]) -> str:
    return '<dl class="meta">' + "".join(
        f"<dt>{_e(k)}</dt><dd>{v if isinstance(v, _Raw) else _e(v)}</dd>"
        for k, v in items if v not in (None, "", [], {})) + "</dl>"


class _Raw(str):
    """Already HTML."""


def _assumptions(doc: Any, where: str = "") -> list[tuple[str, str]]:
    """Every value metadata marks as assumed: a key `assumed`, `*_assumed` or `assumptions` (with its
    reason), or a figure whose `basis` is assumed (with its source)."""
    out: list[tuple[str, str]] = []
    if isinstance(doc, dict):
        if doc.get("basis") == "assumed":       # a device figure's provenance (model/devices.py)
            why = doc.get("assumed") or doc.get("source") or doc.get("why") or ""
            value = {k: v for k, v in doc.items() if k not in ("basis", "assumed", "source", "why")}
            return [(where, f"{json.dumps(value, default=str)}: {why}" if value else str(why))]
        for k, v in doc.items():
            here = f"{where}.{k}" if where else str(k)
            if "assum" in str(k).lower() and v not in (None, False, "", [], {}):
                out.append((here, v if isinstance(v, str) else json.dumps(v, default=str)))
            else:
                out += _assumptions(v, here)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _assumptions(v, f"{where}[{i}]")
    return out


def _qdiscs(doc: dict[str, Any]) -> str:
    rows = []
    for node, qs in (doc or {}).items():
        for q in qs or []:
            if not isinstance(q, dict) or q.get("kind") in ("noqueue",):
                continue
            opts = json.dumps(q.get("options", {}), separators=(",", ":"), default=str)
            rows.append(f"<tr><td>{_e(node)}</td><td>{_e(q.get('dev', ''))}</td><td>{_e(q.get('kind', ''))}</td>"
                        f"<td>{_e(q.get('handle', ''))}</td><td>{_e(q.get('parent', 'root'))}</td>"
                        f"<td><code>{_e(opts)}</code></td></tr>")
    if not rows:
        return "–"
    return _Raw("<details><summary>" + f"{len(rows)} qdiscs" + "</summary><table><thead><tr><th>node</th><th>dev</th>"
                "<th>kind</th><th>handle</th><th>parent</th><th>options</th></tr></thead><tbody>" + "".join(rows)
                + "</tbody></table></details>")


def _kv_details(doc: dict[str, Any], what: str) -> str:
    if not doc:
        return "–"
    rows = []
    for node, kv in doc.items():
        if isinstance(kv, dict):
            for k, v in kv.items():
                text = v if isinstance(v, str) else json.dumps(v, default=str)
                rows.append(f"<tr><td>{_e(node)}</td><td>{_e(k)}</td><td><code>{_e(text)}</code></td></tr>")
    return _Raw(f"<details><summary>{len(rows)} {what}</summary><table><tbody>" + "".join(rows)
                + "</tbody></table></details>")


RUN_SEEDS_SHOWN = 400   # rows of series/seeds.csv on the page; the file has them all


def _run_seeds(results: Path) -> Any:
    """Every seed each run used (series/seeds.csv, plan.seeds: from the run's identity) and what
    each netem direction sent and dropped in the run: what the build's seeds above became."""
    import csv

    f = results / "series" / "seeds.csv"
    if not f.is_file():
        return "–"
    with f.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return "–"
    runs = sorted({r.get("run", "") for r in rows}, key=lambda x: int(x) if x.isdigit() else 0)
    body = "".join(
        f"<tr><td>{_e(r.get('run'))}</td><td>{_e(r.get('what'))}</td><td>{_e(r.get('target') if r.get('what') != 'run' else 'identity')}</td>"
        f"<td><code>{_e(r.get('seed'))}</code></td><td>{_e(r.get('packets'))}</td><td>{_e(r.get('drops'))}</td></tr>"
        for r in rows[:RUN_SEEDS_SHOWN])
    more = f"<p>{len(rows) - RUN_SEEDS_SHOWN} more rows in series/seeds.csv</p>" if len(rows) > RUN_SEEDS_SHOWN else ""
    return _Raw("<details><summary>" + _e(f"{len(runs)} runs, {len(rows)} seeds (series/seeds.csv)") + "</summary>"
                "<table><thead><tr><th>run</th><th>what</th><th>target</th><th>seed</th><th>packets</th><th>drops</th>"
                "</tr></thead><tbody>" + body + "</tbody></table>" + more + "</details>")


def reproducibility(p: Page) -> str:
    m, mach = p.meta, p.meta.get("machine", {}) or {}
    seeds = m.get("netem_seeds") or {}
    seed_text = _Raw("<details><summary>" + _e(f"{len(seeds)} link directions") + "</summary><table><tbody>" + "".join(
        f"<tr><td>{_e(k)}</td><td><code>{_e(v)}</code></td></tr>" for k, v in seeds.items())
        + "</tbody></table></details>") if seeds else "–"
    versions = m.get("versions") or {}
    ver_text = _Raw("<details><summary>" + _e(", ".join(f"{k} {str(v).split()[0] if k != 'wearlab' else v}"
                                                     for k, v in list(versions.items())[:4]) + " ...")
                    + "</summary><table><tbody>" + "".join(
                        f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in versions.items())
                    + "</tbody></table></details>") if versions else "–"
    kernel = mach.get("kernel", "")
    if mach.get("uml_kernel_build"):
        kernel += (f" (User-Mode Linux guest: {mach.get('uml_kernel_build')}; "
                   f"host kernel {mach.get('host_kernel_release', '?')})")
    items: list[tuple[str, Any]] = [
        ("command", m.get("command")),
        ("git commit", m.get("git_commit")),
        ("started", m.get("started_utc")),
        ("status", m.get("status")),
        ("experiment file", f"{m.get('experiment_file', '')} (sha256 {m.get('experiment_sha256', '?')})"),
        ("topology file", f"{m.get('topology_file') or 'inline'} (sha256 {m.get('topology_sha256', '?')})"
         if m.get("topology_sha256") else m.get("topology_file")),
        ("plan digest", m.get("plan_sha256")),
        ("plan digest in the runtime", m.get("host_plan_sha256") if m.get("host_plan_sha256") != m.get("plan_sha256")
         else None),
        ("runtime", mach.get("runtime")),
        ("kernel", kernel),
        ("guest root filesystem", mach.get("uml_rootfs")),
        ("CPU", f"{mach.get('cpus', '?')} CPU(s); {mach.get('uml_host_idle', '')}".strip("; ")),
        ("memory", f"{int(mach['mem_total_kb']) // 1024} MiB" if mach.get("mem_total_kb") else None),
        ("shaper", m.get("shaper")),
        ("kernel features", ", ".join(m.get("kernel_features") or [])),
        ("seed", m.get("seed")),
        ("netem seeds at the build", seed_text),
        ("seeds of each run", _run_seeds(p.results)),
        ("repetitions", m.get("repetitions")),
        ("versions", ver_text),
        ("qdiscs before the runs", _qdiscs(m.get("qdiscs_before") or {})),
        ("sysctls", _kv_details(m.get("sysctls") or {}, "sysctls")),
        ("offloads", _kv_details({n: {f"{dev} {k}": v for dev, kv in (d or {}).items() for k, v in (kv or {}).items()}
                                  for n, d in (m.get("offloads") or {}).items()}, "offload settings")),
        ("warm-up", "; ".join(sorted({str(w["warm_up"]) for w in m.get("warmup") or []
                                      if isinstance(w, dict) and w.get("warm_up")}))),
        ("devices", _Raw("<details><summary>" + _e(", ".join(f"{n}: {d.get('device', '?') if isinstance(d, dict) else d}"
                                                             for n, d in m["devices"].items()))
                         + "</summary><pre>" + _e(json.dumps(m["devices"], indent=1, default=str)) + "</pre></details>")
         if isinstance(m.get("devices"), dict) and m.get("devices") else None),
        ("notes", "; ".join(map(str, m.get("notes") or []))),
    ]
    assumed = _assumptions({"devices": m.get("devices"), "workload_facts": m.get("workload_facts"),
                            "plan devices": p.plan.get("devices")})
    out = _dl(items)
    if assumed:
        out = ("<h3>Assumed values</h3><p>Numbers no source gives, and why they were chosen:</p><table><tbody>"
               + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in assumed) + "</tbody></table>" + out)
    return out


def _contents(p: Page) -> str:
    links = [("claims", f"claims ({len(p.claims)})")]
    if p.drawing is not None:
        links += [(sec, title) for sec, title in plots.SECTIONS.items()
                  if any(f.section == sec for f, _ in p.figures_png)]
    links += [("cells", "per cell"), ("fidelity", "fidelity"), ("reproduce", "reproducibility")]
    return '<nav class="contents">' + " · ".join(f'<a href="#{k}">{_e(t)}</a>' for k, t in links) + "</nav>"


def _fidelity_warning(p: Page) -> str:
    noisy = [m.label for m in machine_trust.noisy(p.meta)]
    quiet = [m.label for m in machine_trust.unprobed(p.meta)]
    parts = ([f"runs from noisy node{'s' * (len(noisy) > 1)} ({', '.join(noisy)}): their timings are suspect"]
             if noisy else []) + ([f"shard{'s' * (len(quiet) > 1)} not probed ({', '.join(quiet)})"] if quiet else [])
    if not parts:
        return ""
    return f'<p class="noisy">Fidelity: {_e("; ".join(parts))} - see <a href="#fidelity">fidelity</a>.</p>'


def page_html(p: Page) -> str:
    m = p.meta
    cells = len(p.plan.get("cells") or []) or None
    failed = len(p.runs) - p.ok
    facts = [f"workload {p.meta.get('workload') or p.plan.get('workload', '?')}",
             f"{len(p.runs)} runs ({p.ok} ok{f', {failed} failed' if failed else ''})"]
    if cells:
        facts.append(f"{cells} cells × {m.get('repetitions', '?')} repetitions")
    facts.append(f"started {m.get('started_utc', '?')}")
    out = [_head(f"wearlab report: {p.experiment}"),
           f'<nav><a href="{INDEX}">all experiments</a> · wearlab report, {_e(_stamp())}</nav>',
           f"<h1>{_e(p.experiment)}</h1>",
           f'<p class="desc">{_e(p.plan.get("description", ""))}</p>',
           f'<p class="facts">{_e(" · ".join(facts))}<br>results: <code>{_e(p.results)}</code></p>',
           _contents(p), _fidelity_warning(p),
           '<h2 id="claims">Claims: ours beside the paper\'s</h2>', claims_table(p.claims),
           '<h2 id="figures">Figures</h2>', _figures(p),
           '<h2 id="cells">Per cell</h2>', _cells_table(p),
           '<h2 id="fidelity">Fidelity: was each node quiet?</h2>', fidelity_section(p),
           '<h2 id="reproduce">What makes it reproducible</h2>', reproducibility(p),
           "</body></html>\n"]
    return "\n".join(out)


# -- the index ---------------------------------------------------------------------------------

def _claims_indexes(pages: list[Page]) -> list[tuple[Path, list[dict[str, Any]]]]:
    """The claims indexes (claims.yaml) beside the experiments these results ran."""
    found: dict[Path, list[dict[str, Any]]] = {}
    for p in pages:
        f = p.meta.get("experiment_file") or p.plan.get("file")
        if not f:
            continue
        idx = Path(f).parent / CLAIMS_INDEX
        if idx.resolve() in {k.resolve() for k in found} or not idx.is_file():
            continue
        try:
            doc = YAML(typ="safe").load(idx.read_text())
        except Exception:   # a broken index is the claims' test's to report; the report goes on
            continue
        entries = doc.get("claims", []) if isinstance(doc, dict) else doc
        found[idx] = [e for e in entries or [] if isinstance(e, dict)]
    return list(found.items())


def _count(v: str, n: int) -> str:
    return f'<span class="v {VERDICT_CLASS.get(v, "none")}">{n}</span>' if n else "–"


def _when(stamp: Any) -> str:
    """2026-11-25T18:51:02.01+00:00 -> 2026-11-25 18:51 UTC."""
    try:
        return datetime.fromisoformat(str(stamp)).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    except ValueError:
        return str(stamp or "–")


def index_html(pages: list[Page]) -> str:
    totals = {v: 0 for v in claim_rows.VERDICTS}
    rows = []
    for p in pages:
        counts = claim_rows.verdict_counts(p.claims)
        for v, n in counts.items():
            totals[v] += n
        tds = "".join(f'<td class="num">{_count(v, n)}</td>' for v, n in counts.items())
        noisy = [m.label for m in machine_trust.noisy(p.meta)]
        flag = (f'<br><small class="noisy">runs from noisy node{"s" * (len(noisy) > 1)}: {_e(", ".join(noisy))}</small>'
                if noisy else "")
        rows.append(f'<tr><td><a href="{_e(p.file)}">{_e(p.experiment)}</a><br><small>'
                    f'{_e(p.plan.get("description", ""))}</small>{flag}</td>'
                    f"<td>{_e(p.meta.get('workload', ''))}</td>"
                    f'<td class="num">{p.ok} / {len(p.runs)}</td>{tds}<td class="num">{len(p.figures_png)}</td>'
                    f"<td><small>{_e(_when(p.meta.get('started_utc')))}</small></td></tr>")
    head = "".join(f"<th>{_verdict(v)}</th>" for v in claim_rows.VERDICTS)
    total_row = "".join(f'<td class="num"><b>{_count(v, n)}</b></td>' for v, n in totals.items())
    cols = "".join(f'<col style="width:{w}%">' for w in (31, 8, 7, 9, 10, 9, 8, 8, 6, 10))
    out = [_head("wearlab report"), f"<nav>wearlab report, {_e(_stamp())}</nav>",
           "<h1>wearlab report</h1>",
           f'<p class="facts">{len(pages)} experiment{"s" if len(pages) != 1 else ""}; '
           f"{sum(totals.values())} claims: "
           + ", ".join(f"{n} {v}" for v, n in totals.items() if n) + "</p>",
           '<h2 id="experiments">Experiments and their claims\' verdicts</h2>',
           f'<table class="fixed"><colgroup>{cols}</colgroup><thead><tr><th>experiment</th><th>workload</th>'
           f"<th>runs ok</th>{head}<th>figures</th><th>started</th></tr></thead><tbody>{''.join(rows)}"
           f'<tr><td colspan="3"><b>all</b></td>{total_row}<td></td><td></td></tr></tbody></table>']
    by_id = {c.id: (p, c) for p in pages for c in p.claims}
    for idx, entries in _claims_indexes(pages):
        cols = "".join(f'<col style="width:{w}%">' for w in (40, 13, 10, 15, 22))
        out.append(f'<h2 id="map">Every claim of the seeds ({_e(idx)})</h2><table class="fixed"><colgroup>{cols}'
                   "</colgroup><thead><tr><th>claim</th><th>seed, where</th><th>evidence</th><th>paper</th>"
                   "<th>status</th></tr></thead><tbody>")
        for e in entries:
            cid = str(e.get("id", "?"))
            evidence = str(e.get("evidence") or "–")
            if cid in by_id:
                p, c = by_id[cid]
                evidence = c.evidence or evidence
                status = f'{_verdict(c.verdict, c.runs)} <a href="{_e(p.file)}#claim-{_e(cid)}">{_e(p.experiment)}</a>'
            elif e.get("status"):
                needs = e.get("needs")
                status = _verdict(str(e["status"]).replace("-", " ")) + (f" needs {_e(needs)}" if needs else "")
            else:
                status = _verdict("not run") + f" {_e(e.get('experiment', ''))}"
            paper = e.get("paper")
            where = claim_rows.source_text({"seed": e.get("seed"), "where": e.get("where")})
            out.append(f'<tr class="claim"><td><b>{_e(cid)}</b><br>{_e(e.get("claim", "–"))}</td>'
                       f"<td>{_e(where or '–')}</td><td>{_e(evidence)}</td>"
                       f"<td>{_e(paper if paper not in (None, '') else '–')}</td><td>{status}</td></tr>")
        out.append("</tbody></table>")
    out.append("</body></html>\n")
    return "\n".join(out)
