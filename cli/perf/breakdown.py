"""Medians per entry of the steps of a send, from the trace events of a 3-node cluster's node
logs (see breakdown.sh). Usage: breakdown.py CLUSTER_DIR

Events: `appended` (raft-log writer: log_index, phys_offset), `flushed` (flusher: phys_offset
the flush covers), `append answer sent` (a follower's answer to an AppendEntries: log_index
it reached), `append answer received` (the leader's replication stream: log_index),
`apply started` (state machine: log_index), `append request out` (the leader's stream to a
follower takes an AppendEntries: target_node, log_index of its last entry), `append request
received` (a follower decoded one: log_index), `batch dispatched` (apply: phys_offset of the
entry), `batch committed and applied` (leader pipeline: log_index), `batch proposed` (leader
pipeline: waited_us since the batch's first send arrived). The leader is the node
with pipeline events; the follower of an entry is the one whose answer reached the leader
first; the first 50 entries are skipped (connection set-up)."""
import bisect
import datetime
import re
import sys

LINE = re.compile(r'^(\S+Z)\s+\w+\s+\S+: (.*)$')
FIELD = re.compile(r'(\w+)=(\S+)')


def stamp(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').timestamp()


def read(path):
    ev = {'app': {}, 'flush': [], 'disp': {}, 'ans': {}, 'sent': [], 'recv': [], 'apply': {},
          'waited': [], 'out': [], 'in': []}
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
        elif rest.startswith('append answer sent'):
            ev['sent'].append((t, int(k['log_index'])))
        elif rest.startswith('append request out'):
            ev['out'].append((t, int(k['target_node']), int(k['log_index'])))
        elif rest.startswith('append request received'):
            ev['in'].append((t, int(k['log_index'])))
        elif rest.startswith('append answer received'):
            ev['recv'].append((t, int(k['target_node']), int(k['log_index'])))
        elif rest.startswith('batch proposed'):
            ev['waited'].append(int(k['waited_us']) / 1e6)
        elif rest.startswith('apply started'):
            ev['apply'][int(k['log_index'])] = t
    return ev


def after(events, t0):
    """The events (time-ordered tuples, time first) from time t0 on."""
    i = bisect.bisect_left(events, (t0,))
    return (events[j] for j in range(i, len(events)))


def flushed_at(ev, t0, phys):
    """First flush at or after t0 that covers the record at phys."""
    return next((t for t, p in after(ev['flush'], t0) if p > phys), None)


def first_answer(events, t0, idx, key):
    """First answer (time, ...) at or after t0 that reaches idx."""
    return next((a for a in after(events, t0) if key(a) >= idx), None)


def main(d):
    nodes = {n: read(f'{d}/node-{n}/node.log') for n in (1, 2, 3)}
    leader = max(nodes, key=lambda n: len(nodes[n]['ans']))
    lead = nodes[leader]
    names = ['leader append -> leader flushed', 'leader append -> follower append',
             'follower append -> follower flushed', 'follower flushed -> answer sent',
             'answer sent -> answer at the leader', 'quorum flushed -> apply started',
             'apply started -> applied', 'leader append -> leader apply',
             'leader apply -> answer ready', 'follower append -> answer sent',
             'answer at the leader -> apply started']
    # Split of `leader append -> follower append`, from builds with the request events.
    hops = ['leader append -> request out', 'request out -> follower received',
            'follower received -> follower append']
    steps = {n: [] for n in names + hops}
    leader_last = 0
    for idx, t_ans in sorted(lead['ans'].items())[50:]:
        if idx not in lead['app']:
            continue
        t_app, phys = lead['app'][idx]
        lf = flushed_at(lead, t_app, phys)
        recv = first_answer(lead['recv'], t_app, idx, key=lambda a: a[2])
        td, ta = lead['disp'].get(phys), lead['apply'].get(idx)
        if lf is None or recv is None or td is None or ta is None:
            continue
        f = nodes[recv[1]]
        if idx not in f['app']:
            continue
        ft = f['app'][idx][0]
        ff = flushed_at(f, ft, phys)
        sent = first_answer(f['sent'], ft, idx, key=lambda a: a[1])
        if ff is None or sent is None:
            continue
        leader_last += lf > recv[0]
        quorum = max(lf, recv[0])
        for name, v in zip(names, [lf - t_app, ft - t_app, ff - ft, sent[0] - ff,
                                   recv[0] - sent[0], ta - quorum, td - ta, td - t_app,
                                   t_ans - td, sent[0] - ft, ta - recv[0]]):
            steps[name].append(v)
        out = first_answer(lead['out'], t_app, idx, key=lambda a: a[2] if a[1] == recv[1] else -1)
        got = first_answer(f['in'], out[0], idx, key=lambda a: a[1]) if out else None
        if got is not None:
            for name, v in zip(hops, [out[0] - t_app, got[0] - out[0], ft - got[0]]):
                steps[name].append(v)
    n = len(steps[names[0]])
    for name, v in steps.items():
        v.sort()
        if v:
            print(f'{name:38s} p50 {1e3 * v[len(v) // 2]:.3f} ms  '
                  f'p90 {1e3 * v[int(len(v) * .9)]:.3f} ms  (n={len(v)})')
    waited = sorted(lead['waited'])
    if waited:
        print(f"{'send arrived -> batch proposed':38s} p50 {1e3 * waited[len(waited) // 2]:.3f} ms  "
              f"p90 {1e3 * waited[int(len(waited) * .9)]:.3f} ms  (n={len(waited)} batches)")
    if n:
        print(f'the leader flushed after the first answer arrived: {100 * leader_last / n:.0f}% '
              'of the entries')


if __name__ == '__main__':
    main(sys.argv[1])
