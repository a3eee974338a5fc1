#!/bin/bash
# Two network namespaces (10.99.7.0/24), the real eno-bpf, iptables REDIRECT both ways:
# curl in "tcc" -> tcpcryptd (out) -> tcpcryptd (in) in "tcs" -> python http.server.
# Needs root, cgroup v2, BPF sock_ops. Cleans up after itself. The daemons run under
# nsenter --net (ip netns exec would remount /sys and hide the cgroup v2 mount).
set -u
BIN=${BIN:-$(dirname "$0")/../../target/release/tcpcryptd}
IPT=${IPT:-iptables}
W=$(mktemp -d)
CG=$( [ -e /sys/fs/cgroup/cgroup.controllers ] && echo /sys/fs/cgroup || echo /sys/fs/cgroup/unified )
cleanup() {
  kill $PC $PS $PH 2>/dev/null; wait $PC $PS $PH 2>/dev/null
  ip netns del tcc 2>/dev/null; ip netns del tcs 2>/dev/null
  rmdir $CG/tcpcryptd-smoke-c $CG/tcpcryptd-smoke-s 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
PC= PS= PH=
ip netns add tcc && ip netns add tcs
ip link add tcc0 netns tcc type veth peer name tcs0 netns tcs
ip -n tcc addr add 10.99.7.1/24 dev tcc0 && ip -n tcc link set tcc0 up && ip -n tcc link set lo up
ip -n tcs addr add 10.99.7.2/24 dev tcs0 && ip -n tcs link set tcs0 up && ip -n tcs link set lo up
head -c 3000000 /dev/urandom > "$W/blob"
(cd "$W" && exec ip netns exec tcs python3 -m http.server 8080 --bind 10.99.7.2 >/dev/null 2>&1) & PH=$!
nsenter --net=/run/netns/tcs "$BIN" run --eno bpf --cgroup $CG/tcpcryptd-smoke-s --iptables $IPT --out-port 0 --in-port 7002 \
  --service-port 8080 --control "$W/s.sock" --stats-file "$W/s.jsonl" 2>"$W/s.err" & PS=$!
nsenter --net=/run/netns/tcc "$BIN" run --eno bpf --cgroup $CG/tcpcryptd-smoke-c --iptables $IPT --out-port 7001 --in-port 0 \
  --out-dport 8080 --control "$W/c.sock" --stats-file "$W/c.jsonl" 2>"$W/c.err" & PC=$!
sleep 1.5
ip netns exec tcc curl -s --max-time 10 -o "$W/got" http://10.99.7.2:8080/blob
"$BIN" status --control "$W/c.sock" >/dev/null
cmp -s "$W/blob" "$W/got" && echo "byte-exact: yes" || echo "byte-exact: NO"; cat "$W/c.err" "$W/s.err"
sleep 0.3
echo "client: $(cat "$W/c.jsonl")"
echo "server: $(grep -v '"mode":"plain"' "$W/s.jsonl" | head -1)"
ip netns exec tcc $IPT -t nat -S | grep -c TCPCRYPTD | sed 's/^/client chains+rules while running: /'
kill $PC; wait $PC 2>/dev/null; PC=
ip netns exec tcc $IPT -t nat -S | grep -c TCPCRYPTD | sed 's/^/client chains+rules after SIGTERM: /'
grep -q '"mode":"tcpcrypt"' "$W/c.jsonl" && grep -q '"mode":"tcpcrypt"' "$W/s.jsonl" && echo "PASS" || echo "FAIL"
