#!/bin/sh
# Run AFL++ targets in parallel chains, each `nice -n 19`, no CPU pinning:
#   ./campaign.sh target1:SECONDS,target2:SECONDS  target3:SECONDS,...
# Each argument is a chain run one target after the other; the chains run side by side (two
# chains = two cores). Outputs in out/campaign-<target>/ (not kept; figures in
# out/campaign-<target>/default/fuzzer_stats, logs in out/campaign-<target>.log).
# Build first: cargo afl build --release (README.md). CARGO (default: cargo) is the cargo
# that runs cargo-afl; AFL_TIMEOUT (ms, default 1000) is afl-fuzz's -t: generous, so that the
# slow paths of the P-521 targets (a few ms) are not taken for hangs.
set -eu
cd "$(dirname "$0")"
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1 AFL_NO_UI=1
mkdir -p out
chain() {
    for item in $(echo "$1" | tr ',' ' '); do
        t=${item%%:*}
        secs=${item#*:}
        rm -rf "out/campaign-$t"
        echo "$(date -u +%H:%M:%S) start $t (${secs}s)"
        nice -n 19 "${CARGO:-cargo}" afl fuzz -V "$secs" -t "${AFL_TIMEOUT:-1000}" -i "corpus/$t" \
            -o "out/campaign-$t" "target/release/fuzz_$t" > "out/campaign-$t.log" 2>&1 \
            || echo "afl-fuzz $t exited $?"
        echo "$(date -u +%H:%M:%S) done $t"
    done
}
pids=""
for c in "$@"; do
    chain "$c" &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
