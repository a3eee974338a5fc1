"""Emulated link accuracy: RTT against the configured delay, TCP goodput against the configured rate.

Runs where netem lives (on this host if it has sch_netem, else inside the UML guest):

    .venv/bin/wearlab runtime-exec -- .venv/bin/python bench/bench_link.py [--quick]

RTT: a two-node link (client -- server) with a symmetric one-way delay d, so RTT = 2 d and every
round trip crosses netem twice (client egress, server egress). Measured three ways:
  ping      iputils ping, COUNT pings at INTERVAL (per-packet values are printed with 2-3
            significant digits, so its median is coarse; its summary average has microseconds);
  user      bench/icmp_probe.py: the same round trip as ping sees it, with microseconds;
  kernel    bench/icmp_probe.py: from the request entering the qdisc layer to the reply's kernel
            receive time, i.e. without the sender's user space: what netem itself adds.
Baselines: the bare veth (root qdiscs removed) and netem with delay 0 (what wearlab installs on
an unimpaired link); their difference is the cost of the two netem traversals.
Target: |median - configured| <= max(0.3 ms, 2 %).

Goodput: iperf3 (client -> server, -O 1) over `rate: R, delay: 5ms` for both shapers. The
configured rate is a wire rate (netem and htb count the 1514-byte Ethernet frame), goodput is TCP
payload (MSS 1448 of every 1514 bytes with timestamps), so goodput is also reported scaled to the
wire (x (MSS + 66) / MSS) and cross-checked with the sender's root qdisc byte counter. Target:
wire rate 95-100 % of configured.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from common import (BENCH, Stopwatch, environment, median, percentile, require_root_and_netem, table,
                    verdict, write_result)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from netutil import two_nodes  # noqa: E402  (the tests' two-node network, shared)
from wearlab.realize import tcjson  # noqa: E402

DELAYS_MS = [2.5, 5, 10, 25, 50, 100]
RATES_MBIT = [0.5, 1, 2, 5, 10, 20, 50]
SHAPERS = ["netem", "htb"]
HEADERS_B = 66  # Ethernet 14 + IPv4 20 + TCP 20 + TCP timestamps 12
# iperf3's receiver-side byte count over its own interval clock is good to a few 0.1 %: a wire
# rate of 100.2 % is "at the rate", not "above it". Pass band: 95 % .. 100 % + this.
WIRE_TOLERANCE_PCT = 0.5


def pair(link_body: str, shaper: str = "netem"):
    """client (wearable) -- server over one link given as a YAML flow-mapping body."""
    return two_nodes(None, link_body, shaper=shaper)


# -- RTT -------------------------------------------------------------------------------------

def ping(net, count: int, interval: float) -> dict:
    ip = net.addresses.address_of("server")
    out = net.run("client", ["ping", "-n", "-c", str(count), "-i", str(interval), ip],
                  timeout=count * interval + 60).stdout
    per = [float(l.split("time=")[1].split()[0]) for l in out.splitlines() if "time=" in l]
    m = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms", out)
    summ = dict(zip(("min", "avg", "max", "mdev"), map(float, m.groups()))) if m else {}
    return {"rtts_ms": per, "summary_ms": summ, "lost": count - len(per)}


def probe(net, count: int, interval: float) -> dict:
    ip = net.addresses.address_of("server")
    res = net.run("client", [sys.executable, str(BENCH / "icmp_probe.py"), ip, str(count), str(interval)],
                  timeout=count * (interval + 5) + 60)
    if res.returncode != 0:
        raise RuntimeError(f"icmp_probe failed: {res.stderr.strip()}")
    return json.loads(res.stdout)


def stats(xs: list[float]) -> dict:
    return {"n": len(xs), "median": median(xs), "p5": percentile(xs, 5), "p95": percentile(xs, 95),
            "min": min(xs) if xs else None, "max": max(xs) if xs else None}


def rtt_case(label: str, one_way_ms: float, count: int, interval: float, bare: bool = False) -> dict:
    with pair(f"delay: {one_way_ms}ms") as net:
        if bare:  # the veth as it comes: no qdisc at all (noqueue)
            for n in ("client", "server"):
                net.sh(n, "tc qdisc del dev eth0 root")
        qdiscs = {n: net.sh(n, "tc qdisc show dev eth0").strip() for n in ("client", "server")}
        p = ping(net, count, interval)
        pr = probe(net, count, interval)
    cfg = 2 * one_way_ms
    tol = max(0.3, 0.02 * cfg)
    user, kern, pst = stats(pr["user_ms"]), stats(pr["kernel_ms"]), stats(p["rtts_ms"])
    err_ping = pst["median"] - cfg
    err_user = user["median"] - cfg
    return {
        "label": label, "one_way_ms": one_way_ms, "configured_rtt_ms": cfg, "tolerance_ms": tol,
        "qdiscs": qdiscs, "ping": {**pst, "summary_ms": p["summary_ms"], "lost": p["lost"]},
        "user": {**user, "lost": pr["lost"]}, "kernel": kern,
        "error_ping_median_ms": err_ping, "error_user_median_ms": err_user,
        "error_kernel_median_ms": kern["median"] - cfg,
        "pass": abs(err_ping) <= tol and abs(err_user) <= tol if not bare and one_way_ms else None,
    }


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x: (a, b)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


# -- goodput ---------------------------------------------------------------------------------

def iperf_once(net, seconds: int) -> dict:
    ip = net.addresses.address_of("server")
    srv = net.popen("server", ["iperf3", "-s", "-1", "-B", ip], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while "5201" not in net.sh("server", "ss -Hltn 'sport = :5201'", check=False):
            if time.monotonic() > deadline or srv.poll() is not None:
                raise RuntimeError("iperf3 server did not start listening")
            time.sleep(0.1)
        cli = net.popen("client", ["iperf3", "-c", ip, "-t", str(seconds), "-O", "1", "-J"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Sample the sender's root qdisc over the steady part of the test: a direct wire rate.
        time.sleep(1.5)
        window = seconds - 1.0
        sample = net.sh("client", "date +%s.%N; tc -s -j qdisc show dev eth0; echo; "
                                  f"sleep {window}; date +%s.%N; tc -s -j qdisc show dev eth0", check=False)
        out, err = cli.communicate(timeout=seconds + 120)
        rep = json.loads(out) if out.strip().startswith("{") else {"error": err or out}
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()
    if "error" in rep:
        raise RuntimeError(f"iperf3: {rep['error']}")
    parts = re.split(r"^(\d+\.\d+)$", sample.strip(), flags=re.M)
    # ['', t0, tc0, t1, tc1]
    t0, tc0, t1, tc1 = float(parts[1]), parts[2], float(parts[3]), parts[4]
    b0, p0, _ = tcjson.counters(tcjson.root(tcjson.parse(tc0)))
    b1, p1, _ = tcjson.counters(tcjson.root(tcjson.parse(tc1)))
    end = rep["end"]
    mss = rep["start"].get("tcp_mss_default") or 1448
    return {
        "goodput_bps": end["sum_received"]["bits_per_second"],
        "sender_bps": end["sum_sent"]["bits_per_second"],
        "retransmits": end["sum_sent"].get("retransmits"),
        "mss": mss,
        "qdisc_wire_bps": (b1 - b0) * 8 / (t1 - t0),
        "qdisc_mean_frame_B": (b1 - b0) / max(1, p1 - p0),
        "qdisc_window_s": t1 - t0,
        "sender_cpu_pct": end.get("cpu_utilization_percent", {}).get("host_total"),
        "receiver_cpu_pct": end.get("cpu_utilization_percent", {}).get("remote_total"),
    }


def goodput_case(shaper: str, rate_mbit: float, delay_ms: float, seconds: int, reps: int) -> dict:
    rate = rate_mbit * 1e6
    runs = []
    with pair(f"rate: {rate_mbit}Mbit, delay: {delay_ms}ms", shaper=shaper) as net:
        plan = net.sh("client", "tc qdisc show dev eth0; tc class show dev eth0").strip()
        for _ in range(reps):
            runs.append(iperf_once(net, seconds))
        drops = tcjson.drops(tcjson.parse(net.sh("client", "tc -s -j qdisc show dev eth0")))
    g = median([r["goodput_bps"] for r in runs])
    mss = runs[0]["mss"]
    scaled = g * (mss + HEADERS_B) / mss
    wire = median([r["qdisc_wire_bps"] for r in runs])
    return {
        "shaper": shaper, "rate_mbit": rate_mbit, "delay_ms": delay_ms, "seconds": seconds,
        "qdiscs": plan, "runs": runs, "drops_total": drops,
        "goodput_mbit": g / 1e6, "goodput_pct": 100 * g / rate,
        "goodput_min_pct": 100 * min(r["goodput_bps"] for r in runs) / rate,
        "goodput_max_pct": 100 * max(r["goodput_bps"] for r in runs) / rate,
        "wire_scaled_pct": 100 * scaled / rate, "qdisc_wire_pct": 100 * wire / rate,
        "mss": mss, "retransmits": sum(r["retransmits"] or 0 for r in runs),
        "pass": 95.0 <= 100 * scaled / rate <= 100.0 + WIRE_TOLERANCE_PCT,
    }


# -- main ------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=50, help="pings per delay (default 50)")
    ap.add_argument("--interval", type=float, default=0.02, help="ping interval, s (default 0.02)")
    ap.add_argument("--seconds", type=int, default=6, help="iperf3 -t after 1 s omitted (default 6)")
    ap.add_argument("--reps", type=int, default=2, help="iperf3 runs per rate and shaper (default 2)")
    ap.add_argument("--goodput-delay", type=float, default=5.0, help="one-way delay for goodput, ms")
    ap.add_argument("--quick", action="store_true", help="fewer delays, rates and seconds (a smoke run)")
    ap.add_argument("--skip-rtt", action="store_true")
    ap.add_argument("--skip-goodput", action="store_true")
    a = ap.parse_args()
    require_root_and_netem()
    delays, rates = DELAYS_MS, RATES_MBIT
    if a.quick:
        delays, rates, a.count, a.seconds, a.reps = [5, 50], [2, 10], 20, 3, 1
    env = environment(shapers=SHAPERS)
    doc = {"benchmark": "link", "environment": env,
           "parameters": {"delays_ms": delays, "rates_mbit": rates, "ping_count": a.count,
                          "ping_interval_s": a.interval, "iperf_seconds": a.seconds, "iperf_omit_s": 1,
                          "iperf_reps": a.reps, "goodput_delay_ms": a.goodput_delay},
           "targets": {"rtt": "|median - configured| <= max(0.3 ms, 2 %)",
                       "goodput": "wire rate (goodput x (MSS+66)/MSS) within 95-100 % of configured",
                       "goodput_pass_band_pct": [95.0, 100.0 + WIRE_TOLERANCE_PCT]}}
    name = "link-quick" if a.quick else "link"  # a smoke run never overwrites the full result
    with Stopwatch() as total:
        if not a.skip_rtt:
            doc["rtt"] = rtt_section(delays, a.count, a.interval)
            write_result(name, doc)
        if not a.skip_goodput:
            doc["goodput"] = goodput_section(rates, a.goodput_delay, a.seconds, a.reps)
    doc["duration_s"] = total.s
    path = write_result(name, doc)
    print(f"\nwrote {path} ({total.s:.0f} s)")
    rtt_cases = [c for c in doc.get("rtt", {}).get("cases", [])]
    return verdict({
        "RTT within max(0.3 ms, 2 %) at every delay": all(c["pass"] for c in rtt_cases) if rtt_cases else None,
        "wire rate 95-100 % at every rate, both shapers":
            all(v["all_pass"] for v in doc["goodput"]["summary"].values()) if "goodput" in doc else None,
    })


def rtt_section(delays, count, interval) -> dict:
    base_bare = rtt_case("veth, no qdisc", 0, count, interval, bare=True)
    base_netem = rtt_case("netem delay 0", 0, count, interval)
    cases = [rtt_case(f"netem delay {d}ms", d, count, interval) for d in delays]
    rows = []
    for c in [base_bare, base_netem, *cases]:
        rows.append([c["label"], c["configured_rtt_ms"], c["ping"]["median"], c["ping"]["p5"], c["ping"]["p95"],
                     c["ping"]["summary_ms"].get("avg"), c["user"]["median"], c["user"]["p5"], c["user"]["p95"],
                     c["kernel"]["median"], c["error_user_median_ms"], c["tolerance_ms"] if c["pass"] is not None else None,
                     c["pass"]])
    print(table(["link", "cfg RTT", "ping med", "ping p5", "ping p95", "ping avg", "user med", "user p5",
                 "user p95", "kern med", "err(user)", "tol", "pass"], rows,
                title=f"\nRTT, ms ({count} probes at {interval * 1000:.0f} ms; ping per-packet values are "
                      "rounded by ping; user/kern = icmp_probe, microseconds)"))
    xs = [c["configured_rtt_ms"] for c in cases]
    a_k, b_k = fit(xs, [c["kernel"]["median"] for c in cases])
    a_u, b_u = fit(xs, [c["user"]["median"] for c in cases])
    netem_pair_cost = {k: base_netem[k]["median"] - base_bare[k]["median"] for k in ("user", "kernel")}
    bias = {
        "veth_rtt_median_ms": {k: base_bare[k]["median"] for k in ("ping", "user", "kernel")},
        "netem0_rtt_median_ms": {k: base_netem[k]["median"] for k in ("ping", "user", "kernel")},
        "netem_delay0_cost_per_traversal_ms": {k: v / 2 for k, v in netem_pair_cost.items()},
        "fit_kernel": {"intercept_ms": a_k, "slope": b_k,
                       "per_traversal_fixed_ms": a_k / 2, "proportional_pct": 100 * (b_k - 1)},
        "fit_user": {"intercept_ms": a_u, "slope": b_u,
                     "per_traversal_fixed_ms": a_u / 2, "proportional_pct": 100 * (b_u - 1)},
        "excess_per_traversal_ms": {f"{c['one_way_ms']}": c["error_kernel_median_ms"] / 2 for c in cases},
    }
    print(f"\nBase RTT (medians): bare veth ping-level {base_bare['user']['median']:.3f} ms, kernel-level "
          f"{base_bare['kernel']['median']:.3f} ms; netem delay 0: {base_netem['user']['median']:.3f} / "
          f"{base_netem['kernel']['median']:.3f} ms -> one netem traversal at delay 0 costs "
          f"{netem_pair_cost['kernel'] / 2 * 1000:.0f} us (kernel), {netem_pair_cost['user'] / 2 * 1000:.0f} us (ping-level)")
    print(f"Bias with delay (fit of median RTT = a + b x configured over {len(cases)} delays, 2 netem traversals "
          f"per RTT): kernel a = {a_k * 1000:.0f} us (= {a_k / 2 * 1000:.0f} us per traversal), "
          f"b = {b_k:.5f} ({100 * (b_k - 1):+.3f} %); ping-level a = {a_u * 1000:.0f} us, b = {b_u:.5f}")
    print("Excess over configured per netem traversal (kernel-level median / 2): " +
          ", ".join(f"{c['one_way_ms']} ms: {c['error_kernel_median_ms'] / 2 * 1000:+.0f} us" for c in cases))
    return {"baseline_veth": base_bare, "baseline_netem0": base_netem, "cases": cases, "bias": bias}


def goodput_section(rates, delay_ms, seconds, reps) -> dict:
    cases = []
    for shaper in SHAPERS:
        for r in rates:
            c = goodput_case(shaper, r, delay_ms, seconds, reps)
            cases.append(c)
            print(f"  {shaper:5s} {r:5g} Mbit/s: goodput {c['goodput_pct']:.1f} %, wire {c['wire_scaled_pct']:.1f} %",
                  flush=True)
    rows = [[c["shaper"], c["rate_mbit"], f"{c['goodput_mbit']:.3f}", f"{c['goodput_pct']:.2f}",
             f"{c['goodput_min_pct']:.2f}-{c['goodput_max_pct']:.2f}", f"{c['wire_scaled_pct']:.2f}",
             f"{c['qdisc_wire_pct']:.2f}", f"{median([r['qdisc_mean_frame_B'] for r in c['runs']]):.0f}",
             c["retransmits"], c["drops_total"], c["pass"]] for c in cases]
    print(table(["shaper", "rate Mbit", "goodput Mbit", "goodput %", "range %", "wire %", "qdisc wire %",
                 "frame B", "retrans", "drops", "pass"], rows,
                title=f"\nTCP goodput, iperf3 {seconds} s after 1 s omitted, {reps} run(s) each (median), "
                      f"one-way delay {delay_ms} ms; wire % = goodput x (MSS+66)/MSS; qdisc wire % = "
                      "sender root qdisc bytes/s (sampled by tc, +-1 %); pass: wire % in 95-100 "
                      f"(+{WIRE_TOLERANCE_PCT} measurement tolerance)"))
    summary = {}
    for shaper in SHAPERS:
        cs = [c for c in cases if c["shaper"] == shaper]
        devs = [abs(100 - c["wire_scaled_pct"]) for c in cs]
        summary[shaper] = {"mean_abs_dev_from_100_pct": sum(devs) / len(devs), "max_abs_dev_pct": max(devs),
                           "all_pass": all(c["pass"] for c in cs)}
    truer = min(SHAPERS, key=lambda s: summary[s]["mean_abs_dev_from_100_pct"])
    for s in SHAPERS:
        print(f"{s}: wire rate off 100 % by {summary[s]['mean_abs_dev_from_100_pct']:.2f} % on average "
              f"(max {summary[s]['max_abs_dev_pct']:.2f} %), all pass: {summary[s]['all_pass']}")
    print(f"truer shaper on this kernel: {truer}")
    return {"cases": cases, "summary": summary, "truer_shaper": truer}


if __name__ == "__main__":
    sys.exit(main())
