#!/usr/bin/env python3
"""tests/gpu/bench_table.py on made-up sharing logs: the throughput, the
work per GPU-second and the GPU-time split come out as constructed, and a
job without a solo rate gives "no data" (no GPU needed)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, '..', '..', 'tests', 'gpu', 'bench_table.py')


def fail(msg, out=''):
    print('FAIL bench_table:', msg)
    print(out)
    sys.exit(1)


def log(path, job, rate, gpu_ms, n=6):
    """n one-second windows at rate, gpu_ms of GPU time each (the first
    and the last are dropped by the table, so make them odd)"""
    with open(path, 'w') as f:
        f.write('run %s start attached=1\n' % job)
        for i in range(n):
            r = rate * (3 if i in (0, n - 1) else 1)
            f.write('window %s %d t=%.3f units=%d rate=%.2f gpu_ms=%.2f '
                    'susp=0 evict_avg_us=0.0\n' % (job, i, i + 1.0,
                                                  int(r), r, gpu_ms))


def table(d):
    p = subprocess.run([sys.executable, TOOL, d], capture_output=True,
                       text=True, timeout=60)
    if p.returncode != 0:
        fail('exit %d' % p.returncode, p.stderr)
    return p.stdout


def main():
    with tempfile.TemporaryDirectory() as d:
        log(os.path.join(d, 'solo-eater.log'), 'eater', 1000, 990)
        log(os.path.join(d, 'solo-sgemm.log'), 'sgemm', 500, 990)
        # eater: 20 % of its solo work on 25 % of the GPU time (80 % per
        # GPU-second); sgemm: 75 % on 75 % (100 %)
        log(os.path.join(d, 'share2-agentt-0-eater-w1.log'), 'eater',
            200, 250)
        log(os.path.join(d, 'share2-agentt-1-sgemm-w3.log'), 'sgemm',
            375, 750)
        log(os.path.join(d, 'share2-ts-0-eater-w1.log'), 'eater', 450, 0)
        log(os.path.join(d, 'share2-ts-1-sgemm-w3.log'), 'sgemm', 225, 0)
        # a job with no solo rate
        log(os.path.join(d, 'share4-agentt-0-stencil-w1.log'), 'stencil',
            100, 100)
        out = table(d)
        want = [
            '5 2 jobs agentt share err mean 2.50 pp max 5.00 pp  '
            'throughput 95.0 % of solo  [eater:w1 20.0/25.0%, '
            'sgemm:w3 75.0/75.0%]',
            '  2 jobs agentt work per GPU-second: 95.0 % of solo over all '
            'jobs  [eater:w1 80.0, sgemm:w3 100.0]',
            '  2 jobs agentt GPU time: busy 100.0 % of wall; share of wall '
            'err mean 0.00 pp max 0.00 pp; share of busy time err mean '
            '0.00 pp max 0.00 pp  [25.0/25.0%, 75.0/75.0%]',
            '5 2 jobs ts    share err mean 25.00 pp max 30.00 pp  '
            'throughput 90.0 % of solo  [eater:w1 45.0/25.0%, '
            'sgemm:w3 45.0/75.0%]',
            # the work done, split: 20 / 95 and 75 / 95 of it
            '  2 jobs agentt split of the work done: err mean 3.95 pp max '
            '3.95 pp  [21.1/25.0%, 78.9/75.0%]',
            '  2 jobs ts    split of the work done: err mean 25.00 pp max '
            '25.00 pp  [50.0/25.0%, 50.0/75.0%]',
            '5 4 jobs agentt: no data',
        ]
        got = out.splitlines()
        for w in want:
            if w not in got:
                fail('missing line: %r' % w, out)
        # time-slicing has no GPU-time split and no work per GPU-second
        if any(l.startswith('  2 jobs ts') and 'split' not in l
               for l in got):
            fail('a GPU-time line for time-slicing', out)
    print('PASS bench_table: throughput, split of the work, work per '
          'GPU-second, GPU time, no data')


if __name__ == '__main__':
    main()
