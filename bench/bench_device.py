"""Devices: how true a node's computation in its device's time is, and seed 000's watch handshake.

    .venv/bin/python bench/bench_device.py            (on the host, root; parts A and B run in the
                                                       UML guest through `wearlab runtime-exec`, part C is
                                                       `wearlab run`, which boots its own)
    .venv/bin/python bench/bench_device.py --quick    (fewer operations, 10 handshakes)

(A) The mechanism (devicecpu library, nodes.devicecpu): `openssl speed -elapsed` under it for every
    operation of seed 002's computer and of the LG G Watch R, padding by sleeping and by spinning,
    three rounds of a subset for the spread. Error per operation = ours / the device's table.
    Target: within 15 % wherever the device needs >= 2 us a call (below that the guest's own cost
    of the call shows: only "never faster than the device" is held - tests/test_devicecpu.py).
(B) The candidate the issue measured and rejected, for the record: cgroup v2 cpu.max at 10 % on a
    CPU-bound job of ~8 ms (what a device 10x slower would take 80 ms for), 30 times in the
    guest: wall-time median and range. Reported, no target.
(C) Seed 000's watch at the paper's set-up: experiments/device-watch.yaml (LG G Watch R, direct
    2.4 GHz WiFi) with TLS 1.0 ECDHE-RSA-AES128-SHA and the chain the paper's server sent (cert
    rsa2048/rsa2048/rsa2048/rsa2048), 1 KB, 30 HTTPS fetches. Compared like for like: the whole TLS
    handshake phase on the wire (wire_tls_handshake_s: TCP connected -> request sent, its round
    trips and the server included), as the paper's 147 ms is the whole phase of its trace - no
    round trips subtracted. Targets: median within 25 % of 147 ms, CV <= 10 % (padding by sleeping).
    The client's computation in it (device_cpu_handshake_s) is seed 000's 87 % of 147 ms by
    construction (the platform cost is derived from it: a calibration, reported, not a target).
    Also reported: the same with spinning, and without the device (this machine's speed).
(D) The per-byte cost: 500 KB over the same WiFi (10 Mbit/s), HTTP and HTTPS, 5 each: the data
    phase's rate as seed 000 gives it (data_rate_bps: the data phase's frames over the request ->
    the application's last read). Target: within 10 % of the fitted 2.6 / 2.1 Mbit/s (a calibration
    of the mechanism: the cost is fitted to those rates).
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, environment, env_with_host_load, median, table, verdict, write_result

from wearlab.catalog import CATALOG  # noqa: E402
from wearlab.model.devices import builtin_devices  # noqa: E402
from wearlab.model.experiment_file import load_experiment  # noqa: E402
from wearlab.plan.plan import plan  # noqa: E402

WEARLAB = [sys.executable, "-m", "wearlab"]
EXPERIMENT = ROOT / "experiments" / "device-watch.yaml"
SEED_000_HANDSHAKE_S = 0.147
SEED_000_CLIENT_S = 0.87 * 0.147
SEED_000_RATES = {"http": 2.6e6, "https": 2.1e6}
PAPER_SET_UP = ("--set", "tls_version=1.0", "--set", "cert=rsa2048/rsa2048/rsa2048/rsa2048")
FLOOR_S = 2e-6
TOLERANCE = 0.15
INSIDE = ROOT / "build" / "bench-device-inside.json"


# --- (A) and (B): in the guest -------------------------------------------------------------------


def calibration(quick: bool) -> dict:
    from wearlab.run.cryptobench import GROUPS, speed, target

    out: dict = {"runs": []}
    subset = ("rsa2048", "ecdsap256", "ecdhp256", "ecdhx25519", "sha256", "aes-128-cbc", "aes-128-gcm")
    plans = [("vehicle-embedded-computer", "sleep", [g.name for g in GROUPS] if not quick else list(subset)),
             ("lg-g-watch-r", "sleep", [g.name for g in GROUPS] if not quick else list(subset)),
             ("lg-g-watch-r", "spin", list(subset))]
    rounds = [("lg-g-watch-r", "sleep", list(subset))] * (0 if quick else 2)
    with tempfile.TemporaryDirectory() as d:
        for i, (name, pad, groups) in enumerate(plans + rounds):
            device = builtin_devices()[name]
            t0 = time.monotonic()
            results = speed(device, [g for g in GROUPS if g.name in groups], 1, pad, Path(d) / str(i))
            rows = []
            for r in results:
                want = target(device, r)
                if want is None:
                    continue
                per_call = r.size / want if r.size else 1 / want
                rows.append({"key": r.key, "size": r.size, "ours_per_s": r.per_s, "table_per_s": want,
                             "ratio": r.per_s / want, "device_us_per_call": per_call * 1e6})
            out["runs"].append({"device": name, "pad": pad, "seconds": round(time.monotonic() - t0, 1), "rows": rows})
    return out


def cgroup_cpu_max(reps: int) -> dict:
    """A CPU-bound job of ~8 ms here, in a cgroup limited to 10 % of a CPU: what one CPU share
    would make of a device 10x slower (80 ms)."""
    from wearlab.runtime import cgroup

    root = cgroup.cgroup2_root()
    if root is None:
        return {"available": False, "why": "no cgroup2 mount"}
    d = root / "wearlab-bench-cpumax"
    try:
        (root / "cgroup.subtree_control").write_text("+cpu")
        d.mkdir(exist_ok=True)
        (d / "cpu.max").write_text("10000 100000")
    except OSError as e:
        return {"available": False, "why": f"cpu.max: {e}"}
    job = r"""
import hashlib, json, sys, time
def work(n):
    h = b"x" * 64
    for _ in range(n):
        h = hashlib.sha256(h).digest()
# calibrate n for ~8 ms of work outside the limit
n, t = 1000, 0.0
while t < 0.004:
    n *= 2
    s = time.perf_counter(); work(n); t = time.perf_counter() - s
n = int(n * 0.008 / t)
s = time.perf_counter(); work(n); base = time.perf_counter() - s
open(sys.argv[1] + "/cgroup.procs", "w").write(str(__import__("os").getpid()))
walls = []
for _ in range(int(sys.argv[2])):
    time.sleep(0.05)
    s = time.perf_counter(); work(n); walls.append(time.perf_counter() - s)
print(json.dumps({"job_s": base, "walls_s": walls}))
"""
    try:
        res = subprocess.run([sys.executable, "-c", job, str(d), str(reps)], capture_output=True, text=True,
                             timeout=120, check=True)
        got = json.loads(res.stdout)
    except (subprocess.SubprocessError, ValueError) as e:
        return {"available": False, "why": str(e)}
    finally:
        try:
            d.rmdir()
        except OSError:
            pass
    walls = got["walls_s"]
    want = got["job_s"] / 0.10
    return {"available": True, "quota": "10000/100000 (10 %)", "job_s": got["job_s"], "expected_s": want,
            "median_s": median(walls), "min_s": min(walls), "max_s": max(walls),
            "cv": statistics.stdev(walls) / statistics.mean(walls), "error": median(walls) / want - 1, "walls_s": walls}


def inside(quick: bool) -> int:
    doc = {"environment": environment(), "calibration": calibration(quick), "cgroup_cpu_max": cgroup_cpu_max(30)}
    INSIDE.parent.mkdir(parents=True, exist_ok=True)
    INSIDE.write_text(json.dumps(doc))
    return 0


# --- (C): the watch's handshake, with wearlab run ----------------------------------------------


def path_rtt(exp_file: Path) -> float:
    """Round trip of the client -> server path the cells use (watch - ap - server), from the plan."""
    p = plan(load_experiment(exp_file, CATALOG))
    topo, hops = p.topology, ["watch", "ap", "server"]
    rtt = 0.0
    for a, b in zip(hops, hops[1:]):
        link = topo.link_between(a, b)
        rtt += link.shape(a, b).delay_s + link.shape(b, a).delay_s
    return rtt


def handshakes(exp_file: Path, reps: int, env_extra: dict[str, str], out: Path) -> dict:
    argv = [*WEARLAB, "run", str(exp_file), "--set", "protocol=https", "--set", "size=1KB", *PAPER_SET_UP,
            "--repetitions", str(reps), "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, env={**env_with_host_load(), **env_extra},
                         timeout=1800, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    name = load_experiment(exp_file, CATALOG).name
    latest = out / name / "latest"
    rows = [r for r in csv.DictReader((latest / "runs.csv").open()) if r["status"] == "ok"]
    rtt = path_rtt(exp_file)
    # The whole handshake phase on the wire, as seed 000's 147 ms: nothing subtracted.
    hs = [float(r["wire_tls_handshake_s"]) for r in rows]
    dev = [float(r["device_cpu_handshake_s"]) for r in rows if r.get("device_cpu_handshake_s")]
    return {"runs": len(rows), "path_rtt_s": rtt, "handshake_s": hs, "median_s": median(hs),
            "cv": statistics.stdev(hs) / statistics.mean(hs) if len(hs) > 1 else None,
            "min_s": min(hs), "max_s": max(hs),
            "curl_median_s": median(float(r["tls_handshake_s"]) for r in rows),
            "device_cpu_handshake_median_s": median(dev) if dev else None,
            "results": str(latest.resolve())}


def rates(exp_file: Path, reps: int, out: Path) -> dict:
    """(D): 500 KB, HTTP and HTTPS at the paper's set-up: the data phase's rate per protocol."""
    argv = [*WEARLAB, "run", str(exp_file), "--set", "size=500KB", *PAPER_SET_UP, "--repetitions", str(reps),
            "--out", str(out)]
    res = subprocess.run(argv, capture_output=True, text=True, env=env_with_host_load(), timeout=1800, cwd=ROOT)
    if res.returncode != 0:
        raise SystemExit(f"`{' '.join(argv)}` failed:\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    latest = out / load_experiment(exp_file, CATALOG).name / "latest"
    rows = [r for r in csv.DictReader((latest / "runs.csv").open()) if r["status"] == "ok"]
    out_doc = {}
    for proto in ("http", "https"):
        got = [float(r["data_rate_bps"]) for r in rows if r["protocol"] == proto]
        out_doc[proto] = {"runs": len(got), "median_bps": median(got), "min_bps": min(got), "max_bps": max(got),
                          "paper_bps": SEED_000_RATES[proto], "error": median(got) / SEED_000_RATES[proto] - 1,
                          "wire_total_median_s": median(float(r["wire_total_s"]) for r in rows if r["protocol"] == proto),
                          "app_total_median_s": median(float(r["time_total"]) for r in rows if r["protocol"] == proto)}
    out_doc["results"] = str(latest.resolve())
    return out_doc


def without_device(exp_file: Path, into: Path) -> Path:
    text = exp_file.read_text().replace(", device: lg-g-watch-r", "").replace("name: device-watch", "name: device-watch-none")
    assert "device:" not in text.split("topology:")[1].split("links:")[0]
    p = into / "device-watch-none.yaml"
    p.write_text(text)
    return p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return inside(args.quick)
    if os.geteuid() != 0:
        sys.exit("needs root (wearlab run)")
    reps = 10 if args.quick else 30

    # (A), (B) in the guest
    res = subprocess.run([*WEARLAB, "runtime-exec", "--", sys.executable, str(Path(__file__).resolve()), "--inside",
                          *(["--quick"] if args.quick else [])], env=env_with_host_load(), cwd=ROOT)
    if res.returncode != 0 or not INSIDE.exists():
        raise SystemExit("the guest part failed")
    inside_doc = json.loads(INSIDE.read_text())
    INSIDE.unlink()

    cal = inside_doc["calibration"]
    rows, worst = [], {}
    for run in cal["runs"]:
        for r in run["rows"]:
            held = r["device_us_per_call"] >= FLOOR_S * 1e6
            key = (run["device"], run["pad"], r["key"], r["size"])
            worst.setdefault(key, []).append(r["ratio"])
            r["held"] = held
    for (dev, pad, key, size), ratios in worst.items():
        rows.append([dev[:12], pad, key, size or "-", len(ratios), min(ratios), max(ratios),
                     statistics.stdev(ratios) if len(ratios) > 1 else None])
    print(table(["device", "pad", "operation", "block", "rounds", "min ours/table", "max", "stdev"], rows,
                "(A) the mechanism: openssl speed -elapsed under devicecpu, ours / the device's table (UML guest)"))
    held = [r for run in cal["runs"] for r in run["rows"] if r["held"]]
    under = [r for run in cal["runs"] for r in run["rows"] if not r["held"]]
    cal_ok = all(abs(r["ratio"] - 1) <= TOLERANCE for r in held) and all(r["ratio"] <= 1 + TOLERANCE for r in under)
    errs = [abs(r["ratio"] - 1) for r in held]
    print(f"operations held to 15 %: {len(held)}, worst error {max(errs):.3f}, median {median(errs):.3f}")
    if under:
        print(f"cipher blocks the device does in < 2 us (never faster than the device): {len(under)}, ours/table "
              f"{min(r['ratio'] for r in under):.2f}-{max(r['ratio'] for r in under):.2f}")

    cg = inside_doc["cgroup_cpu_max"]
    if cg.get("available"):
        print(f"\n(B) cgroup cpu.max {cg['quota']} on a {cg['job_s'] * 1e3:.1f} ms job (30x): median "
              f"{cg['median_s'] * 1e3:.1f} ms for an expected {cg['expected_s'] * 1e3:.1f} ms "
              f"({cg['error']:+.0%}), range {cg['min_s'] * 1e3:.1f}-{cg['max_s'] * 1e3:.1f} ms, CV {cg['cv']:.0%}")
    else:
        print(f"\n(B) cgroup cpu.max: not measured ({cg.get('why')})")

    # (C)
    with tempfile.TemporaryDirectory(dir=ROOT / "build") as d:
        d = Path(d)
        sleep = handshakes(EXPERIMENT, reps, {"WEARLAB_DEVICE_PAD": "sleep"}, d / "sleep")
        spin = handshakes(EXPERIMENT, reps, {"WEARLAB_DEVICE_PAD": "spin"}, d / "spin")
        bare = handshakes(without_device(EXPERIMENT, d), reps, {}, d / "none")
        data = rates(EXPERIMENT, 3 if args.quick else 5, d / "rates")
    hs_rows = [[name, x["runs"], x["median_s"] * 1e3, x["min_s"] * 1e3, x["max_s"] * 1e3, x["cv"],
                (x["median_s"] / SEED_000_HANDSHAKE_S - 1) if name != "no device" else None,
                x["device_cpu_handshake_median_s"] * 1e3 if x["device_cpu_handshake_median_s"] else None]
               for name, x in (("lg-g-watch-r, sleep", sleep), ("lg-g-watch-r, spin", spin), ("no device", bare))]
    print()
    print(table(["client", "runs", "median ms", "min", "max", "CV", "vs 147 ms", "device CPU hs ms"], hs_rows,
                f"(C) TLS 1.0 ECDHE-RSA-AES128-SHA, leaf + 2 intermediates, over WiFi: the whole handshake phase "
                f"on the wire (path RTT {sleep['path_rtt_s'] * 1e3:.1f} ms; the client's computation is "
                f"{SEED_000_CLIENT_S * 1e3:.2f} ms by construction)"))
    print()
    print(table(["protocol", "runs", "data rate Mbit/s", "min", "max", "paper", "error", "wire total s", "app total s"],
                [[p, x["runs"], x["median_bps"] / 1e6, x["min_bps"] / 1e6, x["max_bps"] / 1e6, x["paper_bps"] / 1e6,
                  x["error"], x["wire_total_median_s"], x["app_total_median_s"]]
                 for p, x in ((p, data[p]) for p in ("http", "https"))],
                "(D) 500 KB over 10 Mbit/s WiFi: the watch's per-byte cost (fitted to seed 000's 2.6 / 2.1 Mbit/s)"))
    within = abs(sleep["median_s"] / SEED_000_HANDSHAKE_S - 1) <= 0.25
    steady = sleep["cv"] is not None and sleep["cv"] <= 0.10
    rated = all(abs(data[p]["error"]) <= 0.10 for p in ("http", "https"))
    doc = {"environment": environment(guest=inside_doc["environment"]), "calibration": cal,
           "cgroup_cpu_max": cg, "handshake": {"sleep": sleep, "spin": spin, "no_device": bare,
                                               "seed_000_s": SEED_000_HANDSHAKE_S, "seed_000_client_s": SEED_000_CLIENT_S,
                                               "compared": "the whole handshake phase on the wire, nothing subtracted"},
           "per_byte": data}
    path = write_result("device", doc)
    print(f"\nresults: {path}")
    return verdict({"(A) every operation within 15 % of its table (>= 2 us a call; never faster below)": cal_ok,
                    "(C) watch's whole handshake phase within 25 % of seed 000's 147 ms": within,
                    "(C) its CV over the runs <= 10 %": steady,
                    "(D) the watch's data rates within 10 % of the fitted 2.6 / 2.1 Mbit/s": rated})


if __name__ == "__main__":
    sys.exit(main())
