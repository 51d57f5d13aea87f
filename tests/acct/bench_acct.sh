#!/bin/sh
# Accounting benchmarks:
#  1. store insert rate: acct_fill writes 200,000 samples through the store
#     module, one transaction per tick of 16 allocations (the agent's
#     write pattern), WAL + synchronous=NORMAL; target >= 10,000 samples/s;
#  2. gsacct -j over a store of 1,000,000 samples (1,000 allocations x
#     1,000 ticks): best of 5 runs, wall time; target <= 100 ms.
set -u
B=${B:-build}
fill=$B/tests/acct/acct_fill
gsacct=$B/node-agent/gsacct/gsacct
tmp=$(mktemp -d /tmp/gs-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "bench 200000 16" | "$fill" "$tmp/ins.db" || exit 1
echo "bench 1000000 1000" | "$fill" "$tmp/big.db" > "$tmp/fill.txt" || exit 1
sed 's/^insert/fill (1000 per tick)/' "$tmp/fill.txt"
n=$(sqlite3 -readonly "$tmp/big.db" "SELECT COUNT(*) FROM samples")
[ "$n" = 1000000 ] || { echo "bench: store has $n samples"; exit 1; }
/usr/bin/python3 - "$gsacct" "$tmp/big.db" <<'PY'
import subprocess, sys, time
gsacct, db = sys.argv[1], sys.argv[2]
def best(args):
    t = []
    for _ in range(5):
        a = time.perf_counter()
        out = subprocess.run([gsacct, "--store", db] + args,
                             capture_output=True, text=True, check=True)
        t.append(time.perf_counter() - a)
    return min(t) * 1e3, out.stdout
ms, out = best(["-j", "900500"])
assert "900500" in out, out
print("gsacct -j 900500 over 1000000 samples: %.1f ms (best of 5)" % ms)
ms2, out = best(["-j", "900500", "--plot", db + ".svg", "-S", "2023-11-14"])
print("gsacct -j 900500 --plot (reads the job's 1000 samples): %.1f ms" % ms2)
ms3, out = best(["-S", "2023-11-14", "-X", "-n"])
print("gsacct -S (all 1000 allocations): %.1f ms" % ms3)
ms4, out = best(["-j", "900500", "-S", "2023-11-14T22:20", "-E",
                 "2023-11-14T22:30", "-T"])
print("gsacct -j 900500 -T (sums its samples in a 10-minute window): %.1f ms"
      % ms4)
ms5, out = best(["-S", "2023-11-14", "-T", "-X", "-n"])
print("gsacct -S -T (sums all 1000000 samples): %.1f ms" % ms5)
if ms > 100:
    sys.exit("gsacct -j above the 100 ms target")
PY
