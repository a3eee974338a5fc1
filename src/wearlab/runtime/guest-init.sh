#!/bin/sh
# PID 1 of a wearlab User-Mode Linux guest. The host passes WEARLAB_JOB (a host directory) on the
# kernel command line; the job holds mounts.txt (host paths to mount at the same path), env.sh
# and cmd.sh. The command's exit status goes to $WEARLAB_JOB/rc, then the guest powers off, so
# the guest never outlives its job.
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
# Delegate the controllers wearlab uses (CPU limits for wearable profiles) to child cgroups.
echo "+cpu +pids +memory" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
off() { sync; echo o > /proc/sysrq-trigger; sleep 10; }
job="$WEARLAB_JOB"
if [ -z "$job" ]; then echo "wearlab-guest: no WEARLAB_JOB on the kernel command line"; off; fi
mkdir -p "$job" && mount -t hostfs none "$job" -o "$job" || { echo "wearlab-guest: cannot mount job $job"; off; }
while IFS= read -r p; do
  [ -n "$p" ] || continue
  mkdir -p "$p" && mount -t hostfs none "$p" -o "$p" || echo "wearlab-guest: cannot mount $p"
done < "$job/mounts.txt"
hostname wearlab-guest
# Timers fire when asked: the default 50 us slack would add up to 50 us to every sleep of every
# process (pacing senders, probes); children inherit it from here.
echo 1 > /proc/self/timerslack_ns
ip link set lo up
. "$job/env.sh"
echo "wearlab-guest: ready"
sh "$job/cmd.sh" &
child=$!
# Host Ctrl-C arrives as a file (the host cannot signal guest processes): forward it as SIGINT.
# WEARLAB_STOP_POLL_S: how often it looks (a guest holding a deployed network looks less often).
# A shell loop forking `sleep` (~7.5 ms of the one-CPU guest each time). One python3 process that
# polls was tried (8f6b95e) and withdrawn: with it test_deploy's irtt through `wearlab exec` hung
# 2 times in 7 (0 in 4 without). The exec channel's serial line has a flow-control window since
# (run.node_exec); with both, irtt through exec still failed 1 time in 12, cause not caught, so
# the loop stays until a failure of it is.
( while [ ! -e "$job/stop" ]; do sleep "${WEARLAB_STOP_POLL_S:-0.3}"; done; kill -INT "$child" 2>/dev/null ) &
watcher=$!
wait "$child"
rc=$?
kill "$watcher" 2>/dev/null
echo "$rc" > "$job/rc"
off
