#!/usr/bin/env python3
"""Split forced suspend+resume cycles into their steps.

usage: cycle_split.py TRACE [TRACE...]

TRACE is the runtime's hold trace (GSHARE_TRACE=PREFIX writes
PREFIX.PID) of a run with forced suspensions and no agent, e.g.

    GSHARE_TRACE=DIR/cy GSHARE_FORCE_SUSPEND_US=1000 gs-mech cycle

Each suspended hold and the hold after it make one cycle.  Prints
p10/p50/p90 in us of:

  raise     suspend written -> the host raised the flag
  drain     flag raised -> the last block's exit (device clock)
  hostsee   last exit -> the host saw its report
  turn      host saw it -> the next hold's first launch (host work)
  start     next hold's first launch -> its first block
  gap       last exit -> the next hold's first block (no block of
            the job on the GPU)
  cycle     suspend written -> the next hold's first block

Cycles whose next hold began with a chained relaunch (GSHARE_CHAIN=1)
are shown apart, with, instead of turn and start:

  callend   suspend written -> the relaunch's call returned (host)
  call      the call's own time
  exitcall  the call returned -> the last block's exit (negative: the
            leaving kernel was done before the call returned)

Device times go to the host clock with the trace's latest offset
line of the same gs_init (host - %globaltimer, which holds the one-way bus time, ~0.5-1 us).
"""
import os
import sys

from evict_split import report


def sections(path):
    """The holds of each gs_init (a '# gshare hold trace' line each)."""
    secs, out, off = [], [], None
    with open(path) as f:
        for line in f:
            if line.startswith('# gshare hold trace'):
                if out:
                    secs.append(out)
                out, off = [], None
                continue
            w = line.split()
            if not w:
                continue
            try:
                if w[0] == 'offset' and len(w) >= 3:
                    off = int(w[2])
                elif w[0] == 'hold' and len(w) >= 15 and off is not None:
                    ch = w[17:20] if len(w) >= 20 else ['0', '0', '0']
                    out.append({'launch': int(w[2]), 'tmin': int(w[3]),
                                'tmax': int(w[4]), 'seen': int(w[5]),
                                'why': w[10], 'sset': int(w[12]),
                                'hraise': int(w[14]), 'off': off,
                                'chained': int(ch[0]), 'chq': int(ch[1]),
                                'chc': int(ch[2])})
            except ValueError:
                continue
    if out:
        secs.append(out)
    return secs


def split(name, hs):
    rows, chrows = [], []
    for h, n in zip(hs, hs[1:]):
        if (h['why'] != 'susp' or h['sset'] == 0 or h['tmax'] == 0 or
                n['tmin'] == 0 or n['launch'] == 0):
            continue
        o = h['off']
        raise_ = h['hraise'] if h['hraise'] else h['sset']
        if n['chained']:
            # the next hold began with the launch queued at this
            # suspend: its steps are the call's, not a turn's
            chrows.append({
                'drain': h['tmax'] + o - raise_,
                'hostsee': h['seen'] - (h['tmax'] + o),
                'callend': h['chq'] - h['sset'],
                'call': h['chc'],
                'exitcall': h['tmax'] + o - h['chq'],
                'gap': n['tmin'] - h['tmax'],
                'cycle': n['tmin'] + o - h['sset'],
            })
            continue
        rows.append({
            'raise': raise_ - h['sset'],
            'drain': h['tmax'] + o - raise_,
            'hostsee': h['seen'] - (h['tmax'] + o),
            'turn': n['launch'] - h['seen'],
            'start': n['tmin'] + o - n['launch'],
            'gap': n['tmin'] - h['tmax'],
            'cycle': n['tmin'] + o - h['sset'],
        })
    if rows:
        print(f'{name}: {len(rows)} cycles of {len(hs)} holds, '
              'relaunched after the report')
        report(rows, (.1, .5, .9))
    if chrows:
        print(f'{name}: {len(chrows)} cycles of {len(hs)} holds, chained')
        report(chrows, (.1, .5, .9))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        if not os.path.isfile(p):
            sys.exit(f'cycle_split.py: {p}: no such file')
        for i, hs in enumerate(sections(p)):
            split(f'{os.path.basename(p)} #{i + 1}', hs)


if __name__ == '__main__':
    main()
