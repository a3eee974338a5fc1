"""Run one experiment on the kernel we are on (the host, or inside a UML guest).

Order: build the network, start node services, start captures, then repetitions × cells with
repetitions outermost (interleaving cells spreads slow drifts of the machine over all cells), a
row written and flushed after every run, metadata and summary at the end. Whatever happens
(a failed run, Ctrl-C, SIGTERM), teardown runs and what was measured stays on disk.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console

from wearlab.errors import EnvironmentProblem
from wearlab.measure.capture import ClientCapture
from wearlab.measure.curl import CURL_TIMES
from wearlab.measure.phases import PHASES, WIRE_TIMES
from wearlab.model.experiment import Experiment
from wearlab.model.topology import Role
from wearlab.nodes.kinds import kind_for
from wearlab.nodes.server import HTTP_PORT, HTTPS_PORTS
from wearlab.realize import network
from wearlab.report import metadata, results
from wearlab.report.summary import https_http_ratios, summarize, to_document
from wearlab.report.table import print_summary
from wearlab.run import http_get
from wearlab.run.progress import Progress
from wearlab.runtime import probe

PARAM_COLUMNS = ("protocol", "size", "path", "tls_version", "cipher", "cert")
METRIC_COLUMNS = (*WIRE_TIMES, *CURL_TIMES, "tls_handshake_s", "http_code", "size_download", "speed_download_bps",
                  *[f"bytes_{d}_{p}" for p in PHASES for d in ("up", "down")],
                  "bytes_up_total", "bytes_down_total", "packets_up_total", "packets_down_total",
                  "local_port")
COLUMNS = ["run", "repetition", *PARAM_COLUMNS, "status", "error", *METRIC_COLUMNS, "started_utc", "wall_s"]


class Interrupted(Exception):
    """SIGTERM or SIGINT during an experiment."""


def _raise_interrupted(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def needs_netem(exp: Experiment) -> bool:
    return any(l.forward.needs_netem() or l.reverse.needs_netem() or l.forward.rate_bps
               or l.reverse.rate_bps for l in exp.topology.links)


def check_kernel(exp: Experiment) -> None:
    if needs_netem(exp):
        p = probe.probe_qdisc("netem")
        if not p.works:
            raise EnvironmentProblem(
                f"this kernel ({probe.kernel_release()}) has no sch_netem qdisc ({p.detail}), which "
                f"the links of {exp.topology.name} need for delay/loss/rate; run with `--runtime uml` "
                "(or `--runtime auto`) to use a User-Mode Linux guest whose kernel has it. "
                "wearlab never runs without the configured impairments.")


def run_experiment(exp: Experiment, out_dir: Path, *, runtime_label: str, shaper: str = "netem",
                   console: Console | None = None) -> int:
    """Run all runs into out_dir (already created). Returns the exit status."""
    console = console or Console()
    run_id = f"{os.getpid()}-{secrets.token_hex(3)}"
    started = datetime.now(timezone.utc)
    meta: dict[str, Any] = {
        "experiment": exp.name, "experiment_file": exp.file, "experiment_sha256": metadata.sha256(exp.file),
        "topology_file": exp.topology.file, "topology_sha256": metadata.sha256(exp.topology.file),
        "seed": exp.seed, "repetitions": exp.repetitions, "shaper": shaper,
        "started_utc": started.isoformat(), "run_id": run_id, "command": os.environ.get("WEARLAB_ARGV"),
        "git_commit": metadata.git_commit(Path(__file__).resolve().parent),
        "machine": metadata.machine(runtime_label), "versions": metadata.versions(),
        "notes": [],
        "status": "running",
    }
    results.write_yaml(out_dir / "experiment.yaml", exp.to_document())
    results.write_yaml(out_dir / "topology.yaml", exp.topology.to_document())
    results.write_json(out_dir / "metadata.json", meta)
    runs = results.RunsCsv(out_dir / "runs.csv", COLUMNS)
    old = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    net = None
    services = []
    capture = None
    rows: list[dict[str, Any]] = []
    status = 0
    try:
        t0 = time.monotonic()
        seeded = probe.probe_feature("netem seed")
        if not seeded.works:
            meta["notes"].append(f"netem on this kernel cannot be seeded ({seeded.detail}): its loss and "
                                 "jitter draws differ run to run; wearlab's own randomness (file contents) "
                                 "uses `seed`.")
        net = network.build(exp.topology, run_id=run_id, shaper=shaper,
                            seed=exp.seed if seeded.works else None)
        meta["netem_seeds"] = net.netem_seeds
        setup = meta["setup"] = {"network_s": round(time.monotonic() - t0, 3), "shaping_notes": net.notes}
        t = time.monotonic()
        services = _start_services(net, exp)
        setup["services_s"] = round(time.monotonic() - t, 3)
        w = exp.workload
        capture_intfs = [i.name for i in net.addresses.interfaces[w.client]]
        t = time.monotonic()
        capture = ClientCapture(net, w.client, capture_intfs, out_dir / "captures")
        setup["captures_s"] = round(time.monotonic() - t, 3)
        t = time.monotonic()
        snap = net.snapshot()
        meta["qdiscs_before"] = {n: v["qdiscs"] for n, v in snap.items()}
        meta["sysctls"] = {n: v["sysctls"] for n, v in snap.items()}
        meta["offloads"] = {n: v["offloads"] for n, v in snap.items()}
        meta["addresses"] = {n: [vars(i) for i in intfs] for n, intfs in net.addresses.interfaces.items()}
        meta["routes"] = net.addresses.routes
        setup["dumps_s"] = round(time.monotonic() - t, 3)
        setup["total_s"] = round(time.monotonic() - t0, 3)
        results.write_json(out_dir / "metadata.json", meta)
        cacert = str(services_ca(services))
        agent = http_get.FetchAgent(net, w.client)
        services.append(agent)
        meta["client"] = {"kind": "fetch agent (pycurl, persistent process, fresh handle per run)",
                          "libcurl": agent.libcurl,
                          "tls_groups": "X25519:P-256:X448:P-521:P-384 (OpenSSL 3.0 defaults)"}
        results.write_json(out_dir / "metadata.json", meta)
        cells = exp.cells()
        meta["warmup"] = _warm_up(net, agent, exp, cells, cacert)
        meta["equivalent_curl"] = [
            {"cell": c, "client": w.client,
             "argv": http_get.equivalent_curl(net, w, c, cacert=cacert, timeout_s=exp.timeout_s)}
            for c in cells]
        results.write_json(out_dir / "metadata.json", meta)
        total = len(cells) * exp.repetitions
        n = 0
        pending: Pending | None = None
        with Progress(console, total, exp.name) as progress:
            try:
                for rep in range(1, exp.repetitions + 1):
                    for cell in cells:
                        n += 1
                        nxt = _one_run(net, agent, exp, cell, rep, n, cacert)
                        # The previous run's teardown is on the wire by now: finish its row.
                        if pending is not None:
                            rows.append(_finish(pending, capture, runs, progress))
                        pending = nxt
            finally:
                if pending is not None:
                    rows.append(_finish(pending, capture, runs, progress))
        meta["status"] = "complete"
    except (Interrupted, KeyboardInterrupt) as e:
        meta["status"] = f"interrupted ({e or 'SIGINT'})"
        console.print(f"[yellow]interrupted: {len(rows)} runs are kept in {out_dir}[/yellow]")
        status = 130
    except Exception as e:
        meta["status"] = f"error: {e}"
        raise
    finally:
        try:
            if net is not None:
                try:
                    meta["qdiscs_after"] = net.qdisc_dump()
                except Exception as e:  # noqa: BLE001
                    meta["qdiscs_after"] = f"unavailable: {e}"
            if capture is not None:
                capture.stop()
            for s in services:
                s.stop()
        finally:
            if net is not None:
                net.teardown()
            runs.close()
            meta["finished_utc"] = datetime.now(timezone.utc).isoformat()
            results.write_json(out_dir / "metadata.json", meta)
            for s, h in old.items():
                signal.signal(s, h)
    _write_summary(out_dir, exp, rows, console)
    failed = sum(1 for r in rows if r["status"] != "ok")
    if failed:
        console.print(f"[red]{failed} of {len(rows)} runs failed; see runs.csv (status, error)[/red]")
    console.print(f"results: {out_dir}")
    return status


def services_ca(services) -> Path:
    for s in services:
        if getattr(s, "ca", None):
            return s.ca
    raise RuntimeError("no server started")


def _start_services(net, exp: Experiment) -> list:
    w = exp.workload
    sizes = sorted({c["size"] for c in exp.cells()})
    started = []
    server = kind_for(Role.SERVER)(net, w.server)
    server.start(sizes=sizes, seed=exp.seed)
    started.append(server)
    server_ip = net.addresses.address_of(w.server)
    ports = [HTTP_PORT, *HTTPS_PORTS.values()]
    for path in sorted({c["path"] for c in exp.cells()}):
        if exp.topology.nodes[path].role == Role.PHONE:
            phone = kind_for(Role.PHONE)(net, path)
            phone.start(relay_to=[(server_ip, p) for p in ports])
            started.append(phone)
    return started


def _warm_up(net, agent, exp: Experiment, cells: list[dict[str, Any]], cacert: str) -> dict[str, Any]:
    """One unrecorded fetch of the smallest size per (protocol, path, TLS settings): the first
    use of a code path (library initialisation, page faults, a route) is not the link's cost."""
    smallest = min(c["size"] for c in cells)
    seen, failures = set(), []
    for c in cells:
        key = tuple((k, v) for k, v in c.items() if k != "size")
        if key in seen:
            continue
        seen.add(key)
        try:
            http_get.fetch(net, agent, exp.workload, {**c, "size": smallest}, cacert=cacert,
                           timeout_s=exp.timeout_s)
        except Exception as e:  # noqa: BLE001 - the measured run will record the failure
            failures.append(f"{dict(key)}: {e}")
    return {"fetches": len(seen), "size": smallest, "recorded": False, "failures": failures}


@dataclass
class Pending:
    """A run whose fetch is done and whose connection bytes are still to be cut from the capture."""

    row: dict[str, Any]
    intf: str | None = None
    client: tuple[str, int] | None = None
    tls_version: str | None = None


def _one_run(net, agent, exp: Experiment, cell: dict[str, Any], rep: int, n: int,
             cacert: str) -> Pending:
    row: dict[str, Any] = {"run": n, "repetition": rep, **{p: cell.get(p, "") for p in PARAM_COLUMNS},
                           "started_utc": datetime.now(timezone.utc).isoformat()}
    t0 = time.monotonic()
    pending = Pending(row)
    try:
        m = http_get.fetch(net, agent, exp.workload, cell, cacert=cacert, timeout_s=exp.timeout_s)
        row.update({k: m[k] for k in m if k in METRIC_COLUMNS})
        pending.intf = next(i.name for i in net.addresses.interfaces[exp.workload.client]
                            if i.ip == m["local_ip"])
        pending.client = (m["local_ip"], m["local_port"])
        pending.tls_version = cell["tls_version"] if cell["protocol"] == "https" else None
        row["status"] = "ok"
    except (Interrupted, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - a failed run is recorded and the rest go on
        row["status"] = "failed"
        row["error"] = str(e).replace("\n", " ")[:500]
    row["wall_s"] = time.monotonic() - t0
    return pending


def _finish(p: Pending, capture, runs: results.RunsCsv, progress) -> dict[str, Any]:
    """Add the run's bytes per phase from the capture, write its row, report progress."""
    row = p.row
    if row["status"] == "ok":
        try:
            pb = capture.connection_bytes(p.intf, p.client, p.tls_version)
            if pb is None:
                raise RuntimeError("the connection is missing from the packet capture")
            row.update(pb.as_row())
        except Exception as e:  # noqa: BLE001
            row["status"] = "failed"
            row["error"] = f"capture: {e}"[:500]
    runs.append(row)
    progress.advance(row)
    return row


def _write_summary(out_dir: Path, exp: Experiment, rows: list[dict[str, Any]], console: Console) -> None:
    varied = [p for p in PARAM_COLUMNS if len({str(r.get(p, "")) for r in rows} - {""}) > 1]
    cells = summarize(rows, list(PARAM_COLUMNS))
    ratios = https_http_ratios(cells)
    results.write_json(out_dir / "summary.json", to_document(cells, ratios))
    if rows:
        print_summary(console, exp.name, cells, ratios, varied or ["protocol"])
