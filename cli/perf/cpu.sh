#!/usr/bin/env bash
# CPU per message of each process (and optionally a perf profile of one node) under a produce
# load on a fresh local 3-node cluster. Uses the `raftmq` and `raftmq-node` found on PATH
# (build them in release first). Prints one line: rate, p50, p99, CPU us/msg of the leader,
# the followers and the load generator (utime+stime from /proc and getrusage), messages per
# Raft entry (the leader's appended index over the load), the machine's idle CPU time (and how
# much of that was I/O wait: no runnable thread while an I/O was outstanding), and the share
# the host stole meanwhile (steal above ~5%: the host was busy, rerun).
# The VM's speed swings by a fifth within minutes; a change to one process shows best as its
# CPU per message over that of a process the change leaves alone, in the same run.
#
#   P=4 F=64 B=1 T=10s cli/perf/cpu.sh            # 4 producers x 64 in flight, single sends
#   PERF=1 cli/perf/cpu.sh                         # + perf record of the leader (5 s)
#   PERF=1 FOLLOWER=1 cli/perf/cpu.sh              # + perf record of a follower
#   PERF=1 PERF_ARGS="--call-graph dwarf,16384" cli/perf/cpu.sh   # call graphs (no frame pointers)
#   perf report -i $D/perf.data --no-children --sort dso,symbol -g none --stdio
#   ROCKETMQ=1 CLIENTS=8 P=64 MSGS=40000 cli/perf/cpu.sh
#     # the load through the leader's RocketMQ port instead: the official Rust client
#     # (cluster-tests' example `rocketmq_bench`, one unary SendMessage per message; build it
#     # with `cargo build --release -p cluster-tests --example rocketmq_bench`), P sending
#     # tasks of one send in flight each over CLIENTS client instances (connections)
set -euo pipefail
D=${D:-/var/tmp/raftmq-cpu}
. "$(dirname "$0")/cluster.sh"
up_cluster
TCK=$(getconf CLK_TCK)
pids=$(pgrep -f "raftmq-node --config $D/")
ticks() { for p in $pids; do awk -v p="$p" '{print p, $14 + $15}' "/proc/$p/stat"; done; }
appended() { raftmq cluster status --cluster "$D/cluster.toml" --json | python3 -c '
import json, sys
print(next(n.get("appended") or 0 for n in json.load(sys.stdin)["nodes"] if n["role"] == "leader"))'; }
appended > "$D/a0"
ticks > "$D/t0"
head -1 /proc/stat > "$D/s0"
lpid=$(node_pid "$LP")
ppid=$lpid
if [ -n "${FOLLOWER:-}" ]; then ppid=$(node_pid $((LP % 3 + 1))); fi
if [ -n "${PERF:-}" ]; then
  (sleep 2; perf record -F 999 ${PERF_ARGS:--g} -p "$ppid" -o "$D/perf.data" -- sleep 5 >/dev/null 2>&1) &
fi
if [ -n "${ROCKETMQ:-}" ]; then
  bench=${BENCH:-$(cd "$(dirname "$0")" && pwd)/../../target/release/examples/rocketmq_bench}
  addr=$(python3 - "$D/cluster.toml" "$LP" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], 'rb'))
print(next(n['rocketmq-addr'] for n in c['nodes'] if n['id'] == int(sys.argv[2])))
PY
)
  /usr/bin/time -f "%U %S" -o "$D/time.txt" "$bench" "$addr" "${MSGS:-40000}" "${P:-64}" \
    "${SIZE:-1024}" 0 "${CLIENTS:-8}" 2>/dev/null > "$D/out.json"
  head -1 "$D/out.json" > "$D/r.json"  # its produce line (the consume phase has no consumer)
else
  /usr/bin/time -f "%U %S" -o "$D/time.txt" raftmq bench produce --cluster "$D/cluster.toml" \
    --producers "${P:-4}" --in-flight "${F:-64}" --batch "${B:-1}" --duration "${T:-10s}" --json > "$D/r.json"
fi
wait
ticks > "$D/t1"
appended > "$D/a1"
head -1 /proc/stat > "$D/s1"
python3 - "$D" "$TCK" "$lpid" <<'PY'
import json, sys
d, tck, lpid = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.loads(open(d + '/r.json').read().strip().splitlines()[-1])
n = r['messages']
lat = r.get('latency', r)  # rocketmq_bench prints its percentiles at the top level
t0 = dict(l.split() for l in open(d + '/t0'))
t1 = dict(l.split() for l in open(d + '/t1'))
u, s = map(float, open(d + '/time.txt').read().split()[-2:])
per = {p: (int(t1[p]) - int(t0[p])) / tck * 1e6 / n for p in t0}
s0, s1 = ([int(x) for x in open(d + f).read().split()[1:]] for f in ('/s0', '/s1'))
ds = [b - a for a, b in zip(s0, s1)]
steal = 100 * ds[7] / max(sum(ds[:8]), 1) if len(ds) > 7 else 0.0
idle = 100 * (ds[3] + ds[4]) / max(sum(ds[:8]), 1)
iowait = 100 * ds[4] / max(sum(ds[:8]), 1)
entries = max(int(open(d + '/a1').read()) - int(open(d + '/a0').read()), 1)
fol = ' '.join('%.2f' % v for p, v in per.items() if p != lpid)
print(f"{r['messages_per_s']:.0f} msg/s p50 {lat['p50_us'] / 1000:.2f} ms "
      f"p99 {lat['p99_us'] / 1000:.1f} ms; CPU us/msg: leader {per[lpid]:.2f}, "
      f"followers {fol}, load generator {(u + s) * 1e6 / n:.2f}; {n / entries:.1f} msg/entry; "
      f"idle {idle:.0f}% ({iowait:.0f}% of it I/O wait), steal {steal:.0f}%")
PY
