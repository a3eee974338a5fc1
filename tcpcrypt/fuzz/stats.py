#!/usr/bin/env python3
"""One markdown table row per target from out/campaign-<t>/default/fuzzer_stats, in
CAMPAIGN.md's columns:  ./stats.py established eno_diff ..."""
import os, sys, datetime

def stats(t):
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out", "campaign-" + t, "default", "fuzzer_stats")
    d = {}
    for line in open(p):
        k, _, v = line.partition(":")
        d[k.strip()] = v.strip()
    return d

print("| target | start (UTC) | duration | execs | execs/s | paths (queue) | edges (map) | stability | crashes | hangs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for t in sys.argv[1:]:
    d = stats(t)
    start = datetime.datetime.fromtimestamp(int(d["start_time"]), datetime.timezone.utc).strftime("%H:%M")
    secs = int(d.get("run_time", 0))
    execs = int(d["execs_done"])
    print(f"| `fuzz_{t}` | {start} | {secs // 60} min | {execs:,} | {execs / max(secs, 1):,.0f} | "
          f"{d['corpus_count']} ({d['corpus_found']} new) | {d['edges_found']} ({d['bitmap_cvg']}) | "
          f"{d['stability']} | **{d['saved_crashes']}** | {d['saved_hangs']} |")
