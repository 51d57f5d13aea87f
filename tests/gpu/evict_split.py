#!/usr/bin/env python3
"""Split gs-mech-probe's evictions into their steps.

usage: evict_split.py DIR [TASK_US...]

DIR holds what one run of
    GSHARE_TRACE=DIR/tr gs-mech-probe evict --raw DIR
wrote: the runtime's trace (DIR/tr.PID: per suspended hold, when the
suspend was written and the watcher raised the flag, when the host saw the
last report and the round ended, with the clocks' offset) and the probe's
records (DIR/evp_<task>.txt: per round, when its blocks saw the flag and
when the last block entered gs__finish and stored its report's seq, in
%globaltimer ns).  A record is joined to the hold whose flag was raised
last before its first block saw it.  Prints p10/p50/p90/p99 in us of:

  detect   suspend written -> the watcher raised the flag (includes the
           one-way PCIe time of the offset probe, ~0.5-1 us)
  first    flag -> the first block saw it
  last     flag -> the last block saw it (the tail of the running tasks)
  chain    last block saw it -> the last block out entered gs__finish
  fin      gs__finish -> its report's seq stored
  hostsee  seq stored -> the host saw it (clock offset as in detect)
  total    suspend written -> the round's end (the eviction sample)
"""
import bisect
import os
import sys


def holds(d):
    names = [f for f in os.listdir(d) if f.startswith('tr.')]
    if len(names) != 1:
        sys.exit(f'{d}: want one tr.PID file, found {len(names)}')
    out, off = [], None
    with open(os.path.join(d, names[0])) as f:
        for line in f:
            w = line.split()
            try:
                if w and w[0] == 'offset':
                    off = int(w[2])
                elif (w and w[0] == 'hold' and len(w) >= 14 and
                      w[10] == 'susp'):
                    if off is None or int(w[12]) == 0:
                        continue
                    # the flag raised by the watcher warp (device
                    # clock), else by the host (its clock)
                    wr = int(w[13])
                    if wr == 0 and int(w[14]) != 0:
                        wr = int(w[14]) - off
                    if wr == 0:
                        continue
                    out.append({'seen': int(w[5]), 'exit': int(w[6]),
                                'sset': int(w[12]), 'wraise': wr,
                                'wset': int(w[12]) - off, 'off': off})
            except ValueError:
                continue
    out.sort(key=lambda h: h['wset'])
    return out


def pct(v, p):
    return v[min(len(v) - 1, int(p * len(v)))]


def report(rows, ps=(.1, .5, .9, .99)):
    """One line per step of rows (dicts of ns): its percentiles in us."""
    for k in rows[0]:
        v = sorted(r[k] / 1000.0 for r in rows)
        print(f'  {k:8s} ' + '  '.join(f'p{round(p * 100)} {pct(v, p):8.2f}'
                                      for p in ps))


def split(d, task, hs):
    keys = [h['wset'] for h in hs]
    rows, bad = [], 0
    with open(os.path.join(d, f'evp_{task}.txt')) as f:
        for line in f:
            try:
                _, first, last, fin_in, fin_seq = map(int, line.split())
            except ValueError:
                bad += 1
                continue
            i = bisect.bisect_right(keys, first) - 1
            if i < 0 or first - keys[i] > 100000:
                continue
            h = hs[i]
            o = h['off']
            rows.append({
                'seen0': first - h['wset'],
                'detect': h['wraise'] - (h['sset'] - o),
                'first': first - h['wraise'],
                'last': last - h['wraise'],
                'chain': fin_in - last,
                'fin': fin_seq - fin_in,
                'hostsee': h['seen'] - (fin_seq + o),
                'total': h['exit'] - h['sset'],
            })
    print(f'task {task} us: {len(rows)} evictions' +
          (f' ({bad} malformed records skipped)' if bad else ''))
    if not rows:
        return
    report(rows)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    if not os.path.isdir(d):
        sys.exit(f'evict_split.py: {d}: not a directory')
    tasks = sys.argv[2:] or ['1.7', '16', '160']
    hs = holds(d)
    for t in tasks:
        if os.path.exists(os.path.join(d, f'evp_{t}.txt')):
            split(d, t, hs)


if __name__ == '__main__':
    main()
