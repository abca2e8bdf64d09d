#!/usr/bin/env bash
# Targets 1 to 3 against NATS JetStream R3 measured in the same sitting: for each round, the
# three cases on a fresh NATS cluster (natsbench), NATS stopped, then `raftmq bench suite` of
# the same cases with those figures (--nats-figures). Needs `nats-server` (apt-get install
# nats-server), natsbench built (cargo build --release in cli/perf/nats), and the release
# `raftmq` + `raftmq-node` on PATH.   ROUNDS=2 SECS=10 cli/perf/nats-vs-raftmq.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/nats/target/release/natsbench
export NATS_LEADER_URLS="n1=nats://127.0.0.1:4221,n2=nats://127.0.0.1:4222,n3=nats://127.0.0.1:4223"
D=${D:-/var/tmp/raftmq-nats}
secs=${SECS:-10}
for r in $(seq "${ROUNDS:-2}"); do
  D=$D "$here/nats-cluster.sh"
  single=$("$bench" nats://127.0.0.1:4221 1 1 "$secs")
  one=$("$bench" nats://127.0.0.1:4221 1 64 "$secs")
  four=$("$bench" nats://127.0.0.1:4221 4 64 "$secs")
  pkill -f "nats-server -c $D" || true
  echo "round $r NATS R3: 1 x 1: $single | 1 x 64: $one | 4 x 64: $four"
  sleep 1
  raftmq bench suite --dir "${SUITE_DIR:-/var/tmp}" --cases single,in-flight-64,four-by-64 \
    --duration "${secs}s" --nats-figures "single=${single%% *},in-flight-64=${one%% *},four-by-64=${four%% *}"
done
