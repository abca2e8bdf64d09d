#!/usr/bin/env bash
# Where a send's time goes: sends (P producers, F in flight each, batches of B messages; 1, 1
# and 1 by default) on a fresh local 3-node cluster with the nodes' trace events on, then
# breakdown.py over the three node logs (medians per Raft entry). Uses the `raftmq` and
# `raftmq-node` found on PATH; UPARGS goes to `raftmq cluster up`. (With `--flush async` the
# "flushed" rows mean nothing.)
#   N=3000 cli/perf/breakdown.sh        F=64 N=200000 cli/perf/breakdown.sh
#   UPARGS="--flush async" P=4 F=64 N=400000 cli/perf/breakdown.sh
#   F=64 B=32 N=1000000 cli/perf/breakdown.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
D=${D:-/var/tmp/raftmq-breakdown}
export RUST_LOG=${RUST_LOG:-warn,raftmq_raft_log::writer=trace,raftmq_raft_log::flusher=trace,raftmq_store::sm::machine=trace,raftmq_store::sm::dispatch=debug,raftmq_node::pipeline=debug,raftmq_node::network::server=trace,raftmq_node::network::streams=trace,raftmq_node::network::stream_append=trace,raftmq_node::network::append_replies=trace}
. "$here/cluster.sh"
up_cluster 67108864
sleep 1
raftmq bench produce --cluster "$D/cluster.toml" --producers "${P:-1}" --in-flight "${F:-1}" --batch "${B:-1}" --count "${N:-3000}"
raftmq cluster down --cluster "$D/cluster.toml" >/dev/null
python3 "$here/breakdown.py" "$D"
