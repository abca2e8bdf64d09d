# Sourced by the profiling scripts (not run): the fresh local 3-node cluster each of them
# measures, with the `raftmq` and `raftmq-node` found on PATH.
#
#   up_cluster [SEGMENT_BYTES]   # in $D (emptied first; segments of $SEG or 256 MiB unless given;
#                                # $UPARGS goes to `raftmq cluster up`), topic `bench`
#                                # created, taken down when the script exits; sets LP to
#                                # the leader's node id. FREE=N: the nodes are restarted with
#                                # N written segment files each in their pool of free segments
#                                # (`recycle-segments`; UPARGS must raise it to N), as a node
#                                # that has run through its retention holds them
#   node_pid N                   # the pid of node N's raftmq-node

up_cluster() {
  rm -rf "$D"; mkdir -p "$D"
  raftmq cluster up --dir "$D" --base-port 0 --segment-bytes "${1:-${SEG:-268435456}}" ${UPARGS:-} \
    >/dev/null
  trap 'raftmq cluster down --cluster "$D/cluster.toml" >/dev/null 2>&1 || true' EXIT
  raftmq topic create --cluster "$D/cluster.toml" bench >/dev/null
  if [ "${FREE:-0}" -gt 0 ]; then
    raftmq cluster down --cluster "$D/cluster.toml" >/dev/null
    local seg=${1:-${SEG:-268435456}} c i
    for c in "$D"/node-*/data/commitlog; do
      for i in $(seq 1 "$FREE"); do
        dd if=/dev/zero of="$c/seed-$i.free" bs=4M count=$((seg >> 22)) status=none
      done
    done
    sync
    raftmq cluster up --dir "$D" >/dev/null 2>&1
  fi
  LP=$(raftmq cluster status --cluster "$D/cluster.toml" --json | python3 -c '
import json, sys
print(next(n["id"] for n in json.load(sys.stdin)["nodes"] if n["role"] == "leader"))')
}

node_pid() {
  pgrep -f "raftmq-node --config $D/node-$1/"
}
