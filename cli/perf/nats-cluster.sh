#!/usr/bin/env bash
# A 3-node NATS JetStream cluster on loopback (client ports 4221-4223, routes 6221-6223), data
# under $D (default /var/tmp/raftmq-nats); `nats-server` from Debian's package. Stops the one
# it started before. Stop it with: pkill -f "nats-server -c $D"
set -euo pipefail
D=${D:-/var/tmp/raftmq-nats}
pkill -f "nats-server -c $D" || true
sleep 0.5
rm -rf "$D"; mkdir -p "$D"
for i in 1 2 3; do
  routes=""
  for j in 1 2 3; do
    if [ "$j" != "$i" ]; then routes="$routes,\"nats-route://127.0.0.1:622$j\""; fi
  done
  mkdir -p "$D/n$i"
  cat > "$D/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:422$i
jetstream { store_dir: $D/n$i }
cluster { name: c1, listen: 127.0.0.1:622$i, routes: [${routes#,}] }
CONF
  nats-server -c "$D/n$i.conf" > "$D/n$i.log" 2>&1 &
done
sleep 3
