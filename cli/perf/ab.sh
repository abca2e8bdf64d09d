#!/usr/bin/env bash
# Alternating cpu.sh runs of two builds in one sitting: ab.sh DIR_A DIR_B [ROUNDS]
# (each DIR holds a `raftmq` and a `raftmq-node`; cpu.sh's variables apply).
set -u
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq "${3:-3}"); do
  for dir in "$1" "$2"; do
    echo "$r $dir: $(PATH=$dir:$PATH "$here/cpu.sh" 2>&1 | tail -1)"
  done
done
