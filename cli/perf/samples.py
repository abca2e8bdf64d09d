#!/usr/bin/env python3
"""Where a profile's samples go, from `perf script` output of a call-graph recording.

  PERF=1 PERF_ARGS="--call-graph dwarf,16384" cli/perf/cpu.sh
  perf script -i /var/tmp/raftmq-cpu/perf.data > /var/tmp/p.txt
  cli/perf/samples.py /var/tmp/p.txt parts                # share of each part of a node
  cli/perf/samples.py /var/tmp/p.txt count dedup crc32    # samples with a frame containing each
  cli/perf/samples.py /var/tmp/p.txt leaves dedup         # top leaf symbols under `dedup`
  cli/perf/samples.py /var/tmp/p.txt callers mi_malloc    # our frames above `mi_malloc`

A sample counts once per question, whatever its depth. `parts` puts a sample in the first part
(in the order below) one of whose frames matches; threads of their own come first.
"""

import argparse
import collections
import sys

# (name, substring of a frame); a sample goes to the first that matches.
PARTS = [
    ("replication (openraft ReplicationCore)", "ReplicationCore"),
    ("peer client (network::client, streams)", "raftmq_node::network::client"),
    ("SendStream handler", "raftmq_node::service::stream"),
    ("pipeline", "raftmq_node::pipeline"),
    ("apply (state machine)", "raftmq_store::sm"),
    ("openraft sm worker", "openraft::core::sm"),
    ("log append (raft-log)", "raftmq_raft_log"),
    ("openraft core", "openraft::core::raft_core"),
    ("openraft other", "openraft::"),
    ("HTTP/2 (h2: its sockets, tonic's codecs under it)", "h2::"),
    ("hyper", "hyper::"),
    ("tonic", "tonic::"),
    ("tokio", "tokio::"),
]
THREADS = [("flusher thread", "raftlog-flush"), ("zero-ahead thread", "raftlog-zero")]
OURS = ("raftmq", "prost::", "tonic::codec", "tonic::server", "h2::proto", "h2::codec",
        "hyper::", "openraft::")


def samples(path):
    """Yields (thread name, frames leaf first) per sample of `perf script` output."""
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            if not line.strip():
                if comm is not None:
                    yield comm, frames
                comm, frames = None, []
            elif not line.startswith((" ", "\t")):
                comm, frames = line.split()[0], []
            else:
                frames.append(line.strip())
    if comm is not None:
        yield comm, frames


def symbol(frame):
    """The symbol of a frame line (`addr symbol+off (dso)`), without offset and dso."""
    parts = frame.split(None, 1)
    s = parts[1].rsplit(" (", 1)[0] if len(parts) > 1 else frame
    return s.split("+0x")[0][:110]


def part_of(comm, frames):
    for name, prefix in THREADS:
        if comm.startswith(prefix):
            return name
    if not comm.startswith(("tokio-rt", "raftmq-node", "raftmq")):
        return "other thread"
    for name, key in PARTS:
        if any(key in f for f in frames):
            return name
    return "unattributed"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("file", help="output of `perf script` (with call graphs)")
    ap.add_argument("question", choices=["parts", "count", "leaves", "callers"])
    ap.add_argument("keys", nargs="*", help="frame substrings (count: each; leaves, callers: one)")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    if a.question != "parts" and not a.keys:
        sys.exit(f"{a.question} needs at least one frame substring")

    total, kernel = 0, collections.Counter()
    tally = collections.Counter()
    mids = collections.Counter()
    for comm, frames in samples(a.file):
        total += 1
        if a.question == "parts":
            p = part_of(comm, frames)
            tally[p] += 1
            if frames and frames[0].endswith("([kernel.kallsyms])"):
                kernel[p] += 1
        elif a.question == "count":
            for k in a.keys:
                if any(k in f for f in frames):
                    tally[k] += 1
        elif a.question == "leaves":
            if any(a.keys[0] in f for f in frames):
                tally[symbol(frames[0])] += 1
                mid = next((f for f in frames if any(o in f for o in OURS)), None)
                if mid:
                    mids[symbol(mid)] += 1
        else:  # callers
            for i, f in enumerate(frames):
                if a.keys[0] in f:
                    chain = [symbol(x) for x in frames[i + 1:] if any(o in x for o in OURS)]
                    tally[" <- ".join(chain[:3]) or "(none of ours)"] += 1
                    break
    if total == 0:
        sys.exit(f"{a.file}: no samples (is it `perf script` output?)")
    pct = lambda n: f"{100 * n / total:5.1f}%"
    if a.question == "parts":
        for name, n in tally.most_common():
            print(f"{pct(n)}  (kernel {100 * kernel[name] / n:3.0f}%)  {name}")
    elif a.question == "count":
        for k in a.keys:
            print(f"{tally[k]:6d} {pct(tally[k])}  {k}")
    else:
        for name, n in tally.most_common(a.top):
            print(f"{n:6d} {pct(n)}  {name}")
        if a.question == "leaves":
            print(f"--- the innermost frame of ours (or prost, tonic, h2, hyper, openraft) above them:")
            for name, n in mids.most_common(a.top):
                print(f"{n:6d} {pct(n)}  {name}")
    print(f"{total} samples")


if __name__ == "__main__":
    main()
