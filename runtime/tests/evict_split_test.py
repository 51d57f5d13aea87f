#!/usr/bin/env python3
"""tests/gpu/evict_split.py on a made-up probe run: every step comes out
as constructed, malformed records are skipped and counted, and a missing
directory is a clear error (no GPU needed)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, '..', '..', 'tests', 'gpu', 'evict_split.py')
OFF = 1_000_000          # host ns - %globaltimer ns


def fail(msg):
    print('FAIL evict_split:', msg)
    sys.exit(1)


def make(d):
    with open(os.path.join(d, 'tr.123'), 'w') as tr, \
            open(os.path.join(d, 'evp_1.7.txt'), 'w') as evp:
        tr.write('# gshare hold trace pid 123 prog test\n')
        tr.write(f'offset 5 {OFF}\n')
        tr.write('hold 1 2 x\n')                      # malformed: ignored
        for i in range(100):
            g = 10**9 + i * 10**6                   # flag raised
            first, last = g + 160, g + 5000 + i     # last: 5.000..5.099
            fin_in, fin_seq = last + 1000, last + 2400
            seen = fin_seq + OFF + 500
            sset = g + OFF - 3000
            tr.write(f'hold 0 0 0 0 {seen} {seen} 0 0 1 susp 0 {sset} '
                     f'{g} 0 0 0\n')
            evp.write(f'{i + 1} {first} {last} {fin_in} {fin_seq}\n')
        tr.write('hold 0 0 0 0 1 1 0 0 1 done 0 0 0 0 0 0\n')
        evp.write('garbage line\n')


def main():
    with tempfile.TemporaryDirectory() as d:
        make(d)
        out = subprocess.run([sys.executable, TOOL, d], capture_output=True,
                             text=True)
        if out.returncode != 0:
            fail(f'rc {out.returncode}: {out.stderr}')
        got = {}
        for line in out.stdout.splitlines():
            w = line.split()
            if len(w) == 9 and w[1] == 'p10':
                got[w[0]] = float(w[4])
        want = {'detect': 3.0, 'first': 0.16, 'last': 5.05, 'chain': 1.0,
                'fin': 1.4, 'hostsee': 0.5, 'total': 10.95}
        for k, v in want.items():
            if k not in got or abs(got[k] - v) > 0.011:
                fail(f'{k}: want p50 {v}, got {got.get(k)}\n{out.stdout}')
        if '100 evictions (1 malformed records skipped)' not in out.stdout:
            fail('count or skipped record missing:\n' + out.stdout)
    out = subprocess.run([sys.executable, TOOL, '/nonexistent/evp'],
                         capture_output=True, text=True)
    if out.returncode == 0 or 'not a directory' not in out.stderr:
        fail('missing directory: ' + out.stderr)
    print('PASS evict_split')


if __name__ == '__main__':
    main()
