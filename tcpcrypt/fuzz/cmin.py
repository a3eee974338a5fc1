#!/usr/bin/env python3
"""Minimize a campaign's queue into the corpus, as CAMPAIGN.md describes: edge coverage of
every queue entry by `afl-showmap -i` (batch mode: the bundled afl-cmin hangs on persistent
targets), then for each edge not already reached by the corpus the smallest input reaching it;
kept inputs are copied to corpus/<t>/cmin-<sha1 prefix>.

    ./cmin.py TARGET AFL_SHOWMAP [QUEUE_DIR...]   (after ./campaign.sh; default queue:
                                                   out/campaign-TARGET/default/queue)
Prints: edges of the corpus, of corpus + kept inputs, and the number of files added.
"""
import hashlib, os, shutil, subprocess, sys, tempfile

def showmap(afl_showmap, binary, indir, outdir):
    env = dict(os.environ, AFL_NO_AFFINITY="1", AFL_SKIP_CPUFREQ="1", AFL_QUIET="1")
    subprocess.run(["nice", "-n", "19", afl_showmap, "-q", "-i", indir, "-o", outdir, "-t", "5000", "--", binary],
                   env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    maps = {}
    for f in os.listdir(outdir):
        with open(os.path.join(outdir, f)) as fh:
            maps[f] = {line.split(":")[0] for line in fh if line.strip()}
    return maps

def main():
    t = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    afl_showmap = sys.argv[2] if len(sys.argv) > 2 else shutil.which("afl-showmap") or ""
    binary = os.path.join(here, "target/release/fuzz_" + t)
    corpus = os.path.join(here, "corpus", t)
    queues = sys.argv[3:] or [os.path.join(here, "out", "campaign-" + t, "default", "queue")]
    qm, where = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        cm = showmap(afl_showmap, binary, corpus, os.path.join(tmp, "c"))
        for i, queue in enumerate(queues):
            for f, edges in showmap(afl_showmap, binary, queue, os.path.join(tmp, f"q{i}")).items():
                qm[f"{i}/{f}"] = edges
                where[f"{i}/{f}"] = os.path.join(queue, f)
    have = set().union(*cm.values()) if cm else set()
    base = len(have)
    sizes = {f: os.path.getsize(where[f]) for f in qm}
    best = {}
    for f, edges in qm.items():
        for e in edges - have:
            if e not in best or (sizes[f], f) < (sizes[best[e]], best[e]):
                best[e] = f
    # Greedy: smallest first, keep an input only if it still adds an edge.
    kept, covered = [], set(have)
    for f in sorted(set(best.values()), key=lambda f: (sizes[f], f)):
        if qm[f] - covered:
            kept.append(f)
            covered |= qm[f]
    existing = {hashlib.sha1(open(os.path.join(corpus, f), "rb").read()).hexdigest() for f in os.listdir(corpus)}
    added = 0
    for f in kept:
        data = open(where[f], "rb").read()
        h = hashlib.sha1(data).hexdigest()
        if h in existing:
            continue
        with open(os.path.join(corpus, "cmin-" + h[:12]), "wb") as out:
            out.write(data)
        added += 1
    print(f"{t}: corpus edges {base}, with kept inputs {len(covered)}, files added {added}")

main()
