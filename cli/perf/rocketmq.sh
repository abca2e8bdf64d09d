#!/usr/bin/env bash
# Produce through the RocketMQ port with the official Rust client (cluster-tests' example
# `rocketmq_bench`, crate `rocketmq` 5.0.0: one unary SendMessage per message) against the
# leader of a fresh local 3-node cluster. Prints one line: rate, p50, p99, and the CPU per
# message of the leader, each follower and the client process. Uses the `raftmq` and
# `raftmq-node` on PATH and the example built with
# `cargo build --release -p cluster-tests --example rocketmq_bench`.
#   CLIENTS=8 PROD=64 MSGS=40000 cli/perf/rocketmq.sh   # 64 sends in flight over 8 connections
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${BENCH:-$here/../../target/release/examples/rocketmq_bench}
D=${D:-/var/tmp/raftmq-rmq}
rm -rf "$D"
raftmq cluster up --dir "$D" --base-port 0 --segment-bytes 268435456 ${UPARGS:-} >/dev/null
trap 'raftmq cluster down --cluster "$D/cluster.toml" >/dev/null 2>&1 || true' EXIT
LP=$(raftmq cluster status --cluster "$D/cluster.toml" --json | python3 -c '
import json, sys
print(next(n["id"] for n in json.load(sys.stdin)["nodes"] if n["role"] == "leader"))')
addr=$(python3 - "$D/cluster.toml" "$LP" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], 'rb'))
print(next(n['rocketmq-addr'] for n in c['nodes'] if n['id'] == int(sys.argv[2])))
PY
)
lpid=$(pgrep -f "raftmq-node --config $D/node-$LP/")
pids=$(pgrep -f "raftmq-node --config $D/")
ticks() { for p in $pids; do awk -v p="$p" '{print p, $14 + $15}' "/proc/$p/stat"; done; }
ticks > "$D/t0"
/usr/bin/time -f "%U %S" -o "$D/time.txt" "$bench" "$addr" "${MSGS:-40000}" "${PROD:-64}" \
  "${SIZE:-1024}" 0 "${CLIENTS:-8}" 2>/dev/null | head -1 > "$D/r.json"
ticks > "$D/t1"
python3 - "$D" "$lpid" "$(getconf CLK_TCK)" <<'PY'
import json, sys
d, lpid, tck = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.loads(open(d + '/r.json').read())
n = r['messages']
t0 = dict(l.split() for l in open(d + '/t0'))
t1 = dict(l.split() for l in open(d + '/t1'))
per = {p: (int(t1[p]) - int(t0[p])) / tck * 1e6 / n for p in t0}
u, s = map(float, open(d + '/time.txt').read().split()[-2:])
fol = ' '.join('%.1f' % v for p, v in per.items() if p != lpid)
print(f"{r['messages_per_s']:.0f} msg/s p50 {r['p50_us'] / 1000:.2f} ms p99 {r['p99_us'] / 1000:.1f} ms; "
      f"CPU us/msg: leader {per[lpid]:.1f}, followers {fol}, client {(u + s) * 1e6 / n:.1f}")
PY
