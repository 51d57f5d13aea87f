#!/usr/bin/env python3
"""The persistent loop's rate within its rounds, per gs_init.

usage: round_rates.py TRACE [TRACE...]

TRACE is a job's hold trace (GSHARE_TRACE=PREFIX writes PREFIX.PID).
For each gs_init in it (a '# gshare hold trace' line each; `gs-mech
cycle` makes five: immediate, queued, 1ms, 4ms, 10ms) prints the
rounds, their block-tasks per us between each round's first block and
its last block's exit, and the mean round.  The rate leaves out what
happens between rounds (the drain's idle slots after the last exit,
the relaunch), so a lower rate in the forced gs_inits than in the
queued one is the loop itself running slower after suspensions.
"""
import sys

NAMES = ['immediate', 'queued', '1ms', '4ms', '10ms']


def inits(path):
    out, cur = [], None
    with open(path) as f:
        for line in f:
            if line.startswith('# gshare hold trace'):
                cur = []
                out.append(cur)
                continue
            w = line.split()
            if cur is None or len(w) < 8 or w[0] != 'round':
                continue
            try:
                tmin, tmax, tasks = int(w[2]), int(w[3]), int(w[7])
            except ValueError:
                continue
            if tmin and tmax > tmin:
                cur.append((tmin, tmax, tasks))
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in argv[1:]:
        for i, rs in enumerate(inits(path)):
            name = NAMES[i] if i < len(NAMES) else str(i)
            if not rs:
                print(f'{path}: {name}: no rounds')
                continue
            span = sum(r[1] - r[0] for r in rs)
            tasks = sum(r[2] for r in rs)
            print(f'{path}: {name}: rounds={len(rs)} '
                  f'tasks_per_us={tasks / span * 1e3:.2f} '
                  f'mean_round_us={span / len(rs) / 1e3:.1f}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
