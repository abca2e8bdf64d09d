#!/usr/bin/env bash
# Context switches per message and CPU ticks of each thread of each node (from /proc/<pid>/task)
# over a produce load on a fresh local 3-node cluster: which threads wake how often per send.
# Uses the `raftmq` and `raftmq-node` on PATH; UPARGS goes to `raftmq cluster up`.
#   P=1 F=1 T=6s cli/perf/wakeups.sh      UPARGS="--flush async" P=4 F=64 cli/perf/wakeups.sh
set -u
D=${D:-/var/tmp/raftmq-wakeups}; rm -rf "$D"
raftmq cluster up --dir $D --base-port 0 --segment-bytes 268435456 ${UPARGS:-} >/dev/null
trap 'raftmq cluster down --cluster "$D/cluster.toml" >/dev/null 2>&1 || true' EXIT
raftmq topic create --cluster $D/cluster.toml bench >/dev/null
LP=$(raftmq cluster status --cluster "$D/cluster.toml" --json | python3 -c '
import json, sys
print(next(n["id"] for n in json.load(sys.stdin)["nodes"] if n["role"] == "leader"))')
snap() { for p in $(pgrep -f "raftmq-node --config $D/"); do n=$(tr '\0' ' ' < /proc/$p/cmdline | grep -o "node-[0-9]"); for t in /proc/$p/task/*; do echo "$n $(cat $t/comm | tr ' ' _) ${t##*/} $(awk '/voluntary_ctxt_switches/{printf "%s ", $2}' $t/status) $(awk '{print $14+$15}' $t/stat)"; done; done; }
snap > $D/s0
raftmq bench produce --cluster $D/cluster.toml --producers ${P:-1} --in-flight ${F:-1} --duration ${T:-6s} --json > $D/r.json
snap > $D/s1
raftmq cluster down --cluster $D/cluster.toml >/dev/null; trap - EXIT
python3 - $D $LP <<'PY'
import json,sys,collections
d,lp=sys.argv[1],sys.argv[2]
r=json.loads(open(d+'/r.json').read().strip().splitlines()[-1]); n=r['messages']
print(f"{r['messages_per_s']:.0f} msg/s p50 {r['latency']['p50_us']/1000:.2f} ms; leader node-{lp}")
def load(f):
  m={}
  for l in open(f):
    p=l.split(); m[(p[0],p[1],p[2])]=(int(p[3]),int(p[4]),int(p[5]))
  return m
a,b=load(d+'/s0'),load(d+'/s1')
agg=collections.defaultdict(lambda:[0,0,0])
for k,v in b.items():
  o=a.get(k,(0,0,0)); g=agg[(k[0],k[1])]
  for i in range(3): g[i]+=v[i]-o[i]
for k in sorted(agg):
  v,nv,t=agg[k]
  if v+nv: print(f"{k[0]} {k[1]:18s} vol/msg {v/n:6.2f} invol/msg {nv/n:6.2f} cpu_ticks {t}")
PY
