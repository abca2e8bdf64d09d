#!/usr/bin/env bash
# Per thread of every node and of the load generator, over a produce load on a fresh local
# 3-node cluster: context switches per message, CPU ticks, and from /proc/<pid>/task/*/schedstat
# the share of the measured time the thread ran and the share it waited in a run queue
# (runnable, no CPU given yet), with the mean wait per time it was put on a CPU. Then each CPU's
# busy, idle and iowait shares. Which threads wake how often per send, and how long each
# wake-up waits for a CPU. Uses the `raftmq` and `raftmq-node` on PATH; UPARGS goes to
# `raftmq cluster up`. The schedstat window is S seconds (4) starting 2 s into the load.
#   P=1 F=1 T=6s cli/perf/wakeups.sh      UPARGS="--flush async" P=4 F=64 cli/perf/wakeups.sh
#   P=1 F=64 B=32 T=8s cli/perf/wakeups.sh
set -u
D=${D:-/var/tmp/raftmq-wakeups}
S=${S:-4}
. "$(dirname "$0")/cluster.sh"
up_cluster
snap() { for p in $(pgrep -f "raftmq-node --config $D/"); do n=$(tr '\0' ' ' < /proc/$p/cmdline | grep -o "node-[0-9]"); for t in /proc/$p/task/*; do echo "$n $(cat $t/comm | tr ' ' _) ${t##*/} $(awk '/voluntary_ctxt_switches/{printf "%s ", $2}' $t/status) $(awk '{print $14+$15}' $t/stat)"; done; done; }
# name comm tid run_ns wait_ns slices, for the nodes and the load generator
sched() {
  for p in $(pgrep -f "raftmq-node --config $D/") $(pgrep -f "^raftmq bench produce"); do
    n=$(tr '\0' ' ' < /proc/$p/cmdline | grep -o "node-[0-9]" || echo load-generator)
    for t in /proc/$p/task/*; do echo "$n $(tr ' ' _ < $t/comm) ${t##*/} $(cat $t/schedstat 2>/dev/null)"; done
  done
  grep '^cpu[0-9]' /proc/stat | sed 's/^/CPU /'
}
snap > $D/s0
(sleep 2; date +%s.%N > $D/t0; sched > $D/q0; sleep "$S"; date +%s.%N > $D/t1; sched > $D/q1) &
raftmq bench produce --cluster $D/cluster.toml --producers ${P:-1} --in-flight ${F:-1} \
  --batch ${B:-1} --duration ${T:-6s} --json > $D/r.json
wait
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
# schedstat: run and run-queue wait over the window, per thread
secs=float(open(d+'/t1').read())-float(open(d+'/t0').read())
def sched(f):
  th,cpu={},{}
  for l in open(f):
    p=l.split()
    if p[0]=='CPU': cpu[p[1]]=[int(x) for x in p[2:]]
    elif len(p)==6: th[(p[0],p[1],p[2])]=(int(p[3]),int(p[4]),int(p[5]))
  return th,cpu
(t0,c0),(t1,c1)=sched(d+'/q0'),sched(d+'/q1')
print(f"over {secs:.1f} s: share of the time each thread ran / waited for a CPU, and the mean wait per run")
rows=collections.defaultdict(lambda:[0,0,0])
for k,v in t1.items():
  o=t0.get(k)
  if o is None: continue
  g=rows[(k[0],k[1])]
  for i in range(3): g[i]+=v[i]-o[i]
for k in sorted(rows):
  run,wait,sl=rows[k]
  if run < 0.005*secs*1e9: continue
  who='leader' if k[0]==f'node-{lp}' else ''
  print(f"{k[0]:14s} {who:6s} {k[1]:18s} ran {100*run/secs/1e9:4.0f}%  waited {100*wait/secs/1e9:4.0f}%  runs/s {sl/secs:6.0f}  wait/run {wait/max(sl,1)/1e3:5.0f} us")
for c in sorted(c1):
  dd=[y-x for x,y in zip(c0[c],c1[c])]; tot=sum(dd) or 1
  print(f"{c}: busy {100*(tot-dd[3]-dd[4])/tot:3.0f}%  idle {100*dd[3]/tot:3.0f}%  iowait {100*dd[4]/tot:3.0f}%")
PY
