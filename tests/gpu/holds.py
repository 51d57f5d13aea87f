#!/usr/bin/env python3
"""Where the GPU's time goes between and within token holds.

Reads the GSHARE_TRACE files of jobs that shared one GPU (libgshare,
attached: one line per hold, host CLOCK_MONOTONIC ns, device times put on
the host's clock) and prints, for every hand-over from one process to
another, the GPU's idle time from the last block of the old holder to
the first block of the new one, split into its steps:

  seen     last block's exit  -> the old holder's host sees every report
  drain    reports seen        -> its streams report done
  reap     streams done        -> its executor returns (release follows)
  handover executor returns   -> the new holder's executor starts (the
                                 release, the agent, the grant, wake-up)
  prep     executor starts     -> the watcher's launch begins
  watcher  its launch          -> first launch of a kernel
  start    first launch        -> first block runs

and the time within holds between the kernels' spans (relaunch bubbles).
Usage: holds.py TRACE_FILE...   (e.g. OUT/trace.*)
       holds.py --alone TRACE_FILE...   (one job: each hold's steps)
"""
import statistics
import sys


def to_host(offs, d):
    """%globaltimer ns -> host ns, the offset interpolated in time."""
    if d == 0:
        return 0
    t = d + offs[0][1]
    if len(offs) == 1 or t <= offs[0][0]:
        return d + offs[0][1]
    for (t0, o0), (t1, o1) in zip(offs, offs[1:]):
        if t <= t1:
            return d + o0 + (o1 - o0) * (t - t0) / (t1 - t0)
    return d + offs[-1][1]


def load(paths, drift):
    holds = []
    for p in paths:
        offs, raw = [], []
        with open(p) as f:
            for ln in f:
                v = ln.split()
                if ln.startswith('# gshare hold trace') and 'prog' in v:
                    p = '%s.%s' % (v[v.index('prog') + 1], p.rsplit('.', 1)[-1])
                elif v and v[0] == 'offset':
                    offs.append((int(v[1]), int(v[2])))
                elif v and v[0] == 'hold':
                    raw.append(v)
        if not offs:
            continue
        if len(offs) > 1:
            drift.append((offs[-1][1] - offs[0][1]) /
                         (offs[-1][0] - offs[0][0]) * 1e6)
        for v in raw:
            ex, la, t0, t1, seen, exi, end, gpu = map(int, v[1:9])
            holds.append(dict(pid=p, exec=ex, launch=la,
                              tmin=to_host(offs, t0), tmax=to_host(offs, t1),
                              seen=seen, exit=exi, end=end, gpu=gpu,
                              rounds=int(v[9]), why=v[10],
                              wlaunch=int(v[11]) if len(v) > 11 else la,
                              sset=int(v[12]) if len(v) > 12 else 0,
                              wraise=to_host(offs, int(v[13]))
                              if len(v) > 13 and int(v[13]) else
                              (int(v[14]) if len(v) > 14 else 0),
                              tasks=int(v[15]) if len(v) > 15 else -1,
                              sync=int(v[16]) if len(v) > 16 else 0))
    return holds


def steps_between(a, b):
    """Where the time from hold a's last block to hold b's first goes:
    a's exit seen, its streams drained, reaped and released, then b's
    grant, preparation, watcher launch and first block (ns)."""
    return (('gap', b['tmin'] - a['tmax']), ('seen', a['seen'] - a['tmax']),
            ('drain', a['exit'] - a['seen']), ('reap', a['end'] - a['exit']),
            ('handover', b['exec'] - a['end']),
            ('prep', b['wlaunch'] - b['exec']),
            ('watcher', b['launch'] - b['wlaunch']),
            ('start', b['tmin'] - b['launch']))


def pct(a, b):
    return 100.0 * a / b if b else 0.0


def main(paths):
    drift = []
    hs = [h for h in load(paths, drift)
          if h['tmin'] and h['tmax'] > h['tmin']]
    if len(hs) < 2:
        print('holds: fewer than two holds with kernels')
        return 1
    hs.sort(key=lambda h: h['tmin'])
    pids = {h['pid'] for h in hs}
    # the window in which every job ran
    w0 = max(min(h['tmin'] for h in hs if h['pid'] == p) for p in pids)
    w1 = min(max(h['tmax'] for h in hs if h['pid'] == p) for p in pids)
    inw = [h for h in hs if h['tmin'] >= w0 and h['tmax'] <= w1]
    win = w1 - w0
    steps = {k: [] for k in ('gap', 'seen', 'drain', 'reap', 'handover',
                             'prep', 'watcher', 'start')}
    same = over = 0
    for a, b in zip(inw, inw[1:]):
        if b['tmin'] < a['tmax']:
            over += 1
            continue
        if a['pid'] == b['pid']:
            same += 1
        for k, v in steps_between(a, b):
            steps[k].append(v)
    spans = sum(h['tmax'] - h['tmin'] for h in inw)
    gpu = sum(h['gpu'] for h in inw)
    print('holds: %d processes, %d holds in a %.3f s window (%d ended by a '
          'suspend, %d done), %d hand-overs to the same process, %d '
          'overlapping' % (len(pids), len(inw), win / 1e9,
                           sum(h['why'] == 'susp' for h in inw),
                           sum(h['why'] == 'done' for h in inw), same, over))
    print('  GPU time in holds %.2f %% of the window; first block to last '
          'exit of holds %.2f %%; between kernels within holds %.2f %%' %
          (pct(gpu, win), pct(spans, win), pct(spans - gpu, win)))
    # evictions: suspend written -> the watcher raised the flag -> the
    # last block left, per process
    ev = {}
    early = 0
    for h in inw:
        if h['why'] == 'susp' and h['sset'] and h['wraise']:
            if h['sset'] < h['tmin']:
                early += 1	# suspended before its first block ran
                continue
            ev.setdefault(h['pid'], []).append(
                (h['wraise'] - h['sset'], h['tmax'] - h['wraise']))
    if early:
        print('  %d holds were suspended before their first block ran '
              '(left out below)' % early)
    for p in sorted(ev):
        a = [x for x, _ in ev[p]]
        b = [y for _, y in ev[p]]
        print('  eviction %s: written -> flag raised (watcher or host) median %.1f us (p90 '
              '%.1f, max %.1f); flag -> last exit median %.1f us (p90 '
              '%.1f), n=%d' % (
                  p.rsplit('/', 1)[-1], statistics.median(a) / 1e3,
                  sorted(a)[int(0.9 * (len(a) - 1))] / 1e3, max(a) / 1e3,
                  statistics.median(b) / 1e3,
                  sorted(b)[int(0.9 * (len(b) - 1))] / 1e3, len(a)))
    # the GPU busy with any hold (holds overlap when the token goes back
    # before the blocks have left: GSHARE_RELEASE=early)
    busy, cur0, cur1 = 0, None, None
    for h in inw:
        if cur1 is None or h['tmin'] > cur1:
            if cur1 is not None:
                busy += cur1 - cur0
            cur0, cur1 = h['tmin'], h['tmax']
        else:
            cur1 = max(cur1, h['tmax'])
    if cur1 is not None:
        busy += cur1 - cur0
    print('  GPU busy with some hold (union) %.2f %% of the window' %
          pct(busy, win))
    # work per GPU-second by hold length: what a short (or suspended)
    # hold loses against the process's longest holds
    for p in sorted(pids):
        mine = [h for h in inw if h['pid'] == p and h['tasks'] >= 0 and
                h['gpu'] > 0]
        if len(mine) < 10:
            continue
        mine.sort(key=lambda h: h['tmax'] - h['tmin'])
        top = mine[-max(1, len(mine) // 10):]
        ref = sum(h['tasks'] for h in top) / sum(h['gpu'] for h in top)
        allr = sum(h['tasks'] for h in mine) / sum(h['gpu'] for h in mine)
        half = mine[:len(mine) // 2]
        shr = sum(h['tasks'] for h in half) / sum(h['gpu'] for h in half)
        print('  work %s: %.3f tasks/us over all holds, %.1f %% of its '
              'longest tenth (spans >= %.0f us); the shorter half '
              '(spans < %.0f us) %.1f %%' % (
                  p.rsplit('/', 1)[-1], allr * 1e3, pct(allr, ref),
                  (top[0]['tmax'] - top[0]['tmin']) / 1e3,
                  (mine[len(mine) // 2]['tmax'] -
                   mine[len(mine) // 2]['tmin']) / 1e3, pct(shr, ref)))
    if drift:
        print('  clocks: host - %%globaltimer drifts %.1f .. %.1f ppm '
              '(interpolated)' % (min(drift), max(drift)))
    for k, v in steps.items():
        if not v:
            continue
        print('  %-8s median %8.1f us  mean %8.1f us  p90 %8.1f us  sum '
              '%6.2f %% of the window' % (
                  k, statistics.median(v) / 1e3, statistics.mean(v) / 1e3,
                  sorted(v)[int(0.9 * (len(v) - 1))] / 1e3,
                  pct(sum(v), win)))
    return 0


def alone(paths):
    """One job alone on its allocation: where each hold's time goes,
    from the grant to the release, and between holds (medians, us)."""
    holds = sorted(load(paths, []), key=lambda h: h['exec'])
    if not holds:
        print('no holds')
        return 1
    rows = {'gpu': [h['tmax'] - h['tmin'] for h in holds]}
    for a, b in zip(holds, holds[1:]):
        for k, v in steps_between(a, b):
            rows.setdefault(k, []).append(v)
    # the synchronize's own steps (traces that have its start): its
    # start -> the grant (the token's round trip), first launch -> the
    # first block, the last block -> the executor's end
    syn = [h for h in holds if h['sync'] and h['sync'] <= h['exec']]
    if syn:
        rows['sync -> grant'] = [h['exec'] - h['sync'] for h in syn]
        rows['grant -> executor end'] = [h['end'] - h['exec']
                                         for h in syn]
    print('%d holds (gpu: first to last block; the others as in the '
          'hand-over table, between one hold and the next)' % len(holds))
    for k, v in rows.items():
        if v:
            print('  %-28s median %9.1f us  mean %9.1f us' % (
                k, statistics.median(v) / 1e3, statistics.mean(v) / 1e3))
    return 0


if __name__ == '__main__':
    if sys.argv[1:2] == ['--alone']:
        sys.exit(alone(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
