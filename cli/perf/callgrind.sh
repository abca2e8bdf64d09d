#!/usr/bin/env bash
# Instructions per message of each node (valgrind's callgrind: a count, not a time, so it
# compares builds on a noisy machine where CPU time cannot). All three nodes run under
# callgrind with instrumentation off; it is on only while the load runs. Under valgrind a
# send is about 20 times slower, so entries hold more messages than at full speed: compare
# builds with this script, not its figures with `cpu.sh`'s. Uses the `raftmq` and
# `raftmq-node` on PATH.
#
#   P=1 F=64 T=15s cli/perf/callgrind.sh     # one line per node: role, instr/msg, its file
#   callgrind_annotate --inclusive=yes <file> | head -60
set -euo pipefail
D=${D:-/var/tmp/raftmq-cg}
rm -rf "$D"; mkdir -p "$D"
node=$(command -v raftmq-node)
cat > "$D/node.sh" <<SH
#!/bin/sh
exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$D/cg.%p "$node" "\$@"
SH
chmod +x "$D/node.sh"
RAFTMQ_NODE_BIN="$D/node.sh" raftmq cluster up --dir "$D" --base-port 0 \
  --segment-bytes 268435456 >/dev/null
trap 'raftmq cluster down --cluster "$D/cluster.toml" >/dev/null 2>&1 || true' EXIT
raftmq topic create --cluster "$D/cluster.toml" bench >/dev/null
pids=$(pgrep -f "raftmq-node --config $D/node-" | sort -n)
for p in $pids; do callgrind_control -z "$p" >/dev/null; callgrind_control -i on "$p" >/dev/null; done
raftmq bench produce --cluster "$D/cluster.toml" --producers "${P:-1}" --in-flight "${F:-64}" \
  --batch "${B:-1}" --duration "${T:-15s}" --json > "$D/r.json"
for p in $pids; do callgrind_control -i off "$p" >/dev/null; callgrind_control -d "$p" >/dev/null; done
n=$(python3 -c "import json; print(json.loads(open('$D/r.json').read().strip().splitlines()[-1])['messages'])")
# The leader is the node that proposed (Pipeline::store, or submit where store is inlined, as
# with batches): under valgrind the status can name a node that has lost leadership, and a
# client's first seed may relay to the real leader.
for p in $pids; do
  f=$(ls -t "$D"/cg."$p".* | head -1)
  ir=$(grep '^totals:' "$f" | tail -1 | awk '{print $2}')
  store=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null |
    grep -m1 -E 'raftmq_node::pipeline::Pipeline::(store|submit)::\{\{closure\}\} \[' |
    awk '{gsub(",", "", $1); print $1}' || true)
  role=follower
  if [ "$(( ${store:-0} * 20 ))" -gt "$ir" ]; then role=leader; fi
  echo "$role $(( ir / n )) instr/msg ($n messages; $f)"
done | sort
