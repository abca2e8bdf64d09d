#!/usr/bin/env bash
# System calls per message of the leader and of one follower, by thread, under a produce load
# on a fresh local 3-node cluster (every `sys_enter` for 3 s of the load, counted with perf).
# Uses the `raftmq` and `raftmq-node` found on PATH (build them in release first). Each call
# that puts a thread to sleep (epoll_wait, futex) is a wake-up, which costs tens of µs of CPU
# on a VM; a write to the runtime's eventfd from its own thread is tokio waking its driver.
#
#   cli/perf/syscalls.sh                       # 1 producer, 1 in flight
#   P=1 F=64 B=32 cli/perf/syscalls.sh         # the load's shape as in cpu.sh
set -euo pipefail
D=${D:-/var/tmp/raftmq-syscalls}
. "$(dirname "$0")/cluster.sh"
up_cluster
lpid=$(node_pid "$LP")
fpid=$(node_pid $((LP % 3 + 1)))
for who in leader:$lpid follower:$fpid; do
  (sleep 2; perf record -e raw_syscalls:sys_enter -c 1 -p "${who#*:}" -o "$D/${who%%:*}.data" \
    -- sleep 3 >/dev/null 2>&1) &
done
raftmq bench produce --cluster "$D/cluster.toml" --producers "${P:-1}" --in-flight "${F:-1}" \
  --batch "${B:-1}" --duration 6s --json > "$D/r.json"
wait
for who in leader follower; do
  perf script -i "$D/$who.data" -F comm,time,trace 2>/dev/null > "$D/$who.txt"
done
python3 - "$D" <<'PY'
import collections, json, re, sys
d = sys.argv[1]
r = json.loads(open(d + '/r.json').read().strip().splitlines()[-1])
rate = r['messages_per_s']
names = {}
try:
    for line in open('/usr/include/x86_64-linux-gnu/asm/unistd_64.h'):
        m = re.match(r'#define __NR_(\w+) (\d+)', line)
        if m:
            names[m.group(2)] = m.group(1)
except OSError:
    pass
print(f"{rate:.0f} msg/s; system calls per message over about 3 s of the load:")
for who in ('leader', 'follower'):
    c, times = collections.Counter(), []
    for line in open(f'{d}/{who}.txt'):
        f = line.split()
        if len(f) >= 4 and f[2] == 'NR':  # comm time: NR number (args)
            c[(f[0], f[3])] += 1
            times.append(float(f[1].rstrip(':')))
    total = sum(c.values())
    # The messages of the recorded span (from its first call to its last) at the load's rate.
    msgs = rate * (max(times) - min(times)) if len(times) > 1 else 0
    if msgs == 0:
        print(f"{who}: no system calls recorded")
        continue
    print(f"{who}: {total / msgs:.2f} per message")
    for (thread, nr), n in c.most_common(12):
        print(f"  {n / msgs:7.3f}  {thread:16s} {names.get(nr, nr)}")
PY
