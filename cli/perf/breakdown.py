"""Medians per send of the steps of a single send, from the trace events of a 3-node cluster's
node logs (see breakdown.sh). Usage: breakdown.py CLUSTER_DIR

Events: `appended` (raft-log writer: log_index, phys_offset), `flushed` (flusher: phys_offset
the flush covers), `batch dispatched` (apply: phys_offset of the entry), `batch committed and
applied` (leader pipeline: log_index). The leader is the node with pipeline events; the
first 50 sends are skipped (connection set-up)."""
import datetime
import re
import sys

LINE = re.compile(r'^(\S+Z)\s+\w+\s+\S+: (.*)$')
FIELD = re.compile(r'(\w+)=(\S+)')


def stamp(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').timestamp()


def read(path):
    ev = {'app': {}, 'flush': [], 'disp': {}, 'ans': {}}
    for line in open(path, errors='replace'):
        m = LINE.match(line.strip())
        if not m:
            continue
        t, rest = stamp(m.group(1)), m.group(2)
        k = dict(FIELD.findall(rest))
        if rest.startswith('appended') and 'log_index' in k:
            ev['app'][int(k['log_index'])] = (t, int(k['phys_offset']))
        elif rest.startswith('flushed'):
            ev['flush'].append((t, int(k['phys_offset'])))
        elif rest.startswith('batch dispatched'):
            ev['disp'][int(k['phys_offset'])] = t
        elif rest.startswith('batch committed and applied'):
            ev['ans'][int(k['log_index'])] = t
    return ev


def flushed_at(ev, t0, phys):
    """First flush at or after t0 that covers the record at phys."""
    return next((t for t, p in ev['flush'] if t >= t0 and p > phys), None)


def main(d):
    nodes = {n: read(f'{d}/node-{n}/node.log') for n in (1, 2, 3)}
    leader = max(nodes, key=lambda n: len(nodes[n]['ans']))
    lead = nodes[leader]
    steps = {
        'leader append -> leader flushed': [],
        'leader append -> follower append': [],
        'follower append -> follower flushed': [],
        'quorum flushed -> leader apply': [],
        'leader append -> leader apply': [],
        'leader apply -> answer ready': [],
    }
    for idx, t_ans in sorted(lead['ans'].items())[50:]:
        if idx not in lead['app']:
            continue
        t_app, phys = lead['app'][idx]
        lf = flushed_at(lead, t_app, phys)
        firsts = []
        for n, ev in nodes.items():
            if n != leader and idx in ev['app']:
                ft = ev['app'][idx][0]
                ff = flushed_at(ev, ft, phys)
                if ff is not None:
                    firsts.append((ff, ft))
        td = lead['disp'].get(phys)
        if lf is None or not firsts or td is None:
            continue
        ff, ft = min(firsts)
        for name, v in zip(steps, [lf - t_app, ft - t_app, ff - ft, td - max(lf, ff),
                                   td - t_app, t_ans - td]):
            steps[name].append(v)
    for name, v in steps.items():
        v.sort()
        if v:
            print(f'{name:38s} p50 {1e3 * v[len(v) // 2]:.3f} ms  '
                  f'p90 {1e3 * v[int(len(v) * .9)]:.3f} ms  (n={len(v)})')


if __name__ == '__main__':
    main(sys.argv[1])
