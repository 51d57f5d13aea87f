"""Summarize tests/gpu/gate/run.sh results: OUT_DIR/sets.jsonl (per-1 s
windows and final rates of every job) and acct.jsonl (the agent's GPU
time per gated job).  Prints the figures docs/benchmarks.md records."""
import json
import os
import sys

d = sys.argv[1]
win, final, acct = {}, {}, {}
for line in open(os.path.join(d, "sets.jsonl")) if os.path.exists(
        os.path.join(d, "sets.jsonl")) else []:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    s, n = r["tag"].rsplit(".", 1)
    if "final" in r:
        final[(s, int(n))] = r
    else:
        win.setdefault((s, int(n)), {})[r["win"]] = r["it"]
if os.path.exists(os.path.join(d, "acct.jsonl")):
    for line in open(os.path.join(d, "acct.jsonl")):
        r = json.loads(line)
        acct[(r["set"], r["n"])] = r


def jobs(s):
    return sorted(n for (x, n) in final if x == s)


def rate(s, n=1):
    r = final.get((s, n))
    return r["rate"] if r else None


solo = {"matmul": rate("mm_solo"), "mlp": rate("mlp_solo"),
        "transformer": rate("tr_solo")}
print("solo rates (it/s):", {k: round(v, 2) for k, v in solo.items() if v})


def split(s, weights):
    ns = jobs(s)
    if not ns:
        return
    rates = [rate(s, n) for n in ns]
    tot = sum(rates)
    print(f"{s}: rates {[round(r, 1) for r in rates]} shares "
          f"{[round(100 * r / tot, 1) for r in rates]} %")
    if solo["matmul"]:
        print(f"  total normalized throughput {tot / solo['matmul']:.3f}")
    if weights:
        wsum = sum(weights)
        worst = 0.0
        common = set.intersection(*(set(win.get((s, n), {})) for n in ns))
        ws = sorted(w for w in common if w >= 2)
        for w in ws:
            its = [win[(s, n)][w] for n in ns]
            t = sum(its)
            if t == 0:
                continue
            for i, n in enumerate(ns):
                worst = max(worst, abs(100 * its[i] / t -
                                       100 * weights[i] / wsum))
        print(f"  weights {weights}: worst 1 s window error {worst:.1f} pp "
              f"over {len(ws)} windows")


split("mm_ts", [1, 1, 1])
split("mm_gate", [1, 2, 5])
split("mm_gate13", [1, 3])
def guarantee(label, what):
    """Each matmul job's rate over the solo rate against its share."""
    split(label, [20, 30, 50])
    if solo["matmul"] and jobs(label):
        got = [rate(label, n) / solo["matmul"] for n in jobs(label)]
        print(f"  {what} (rate / solo rate vs share): " +
              ", ".join(f"{100 * g:.1f} % vs {s} %" for g, s in
                        zip(got, (20, 30, 50))))


guarantee("mm_gate_sh", "guarantee")
guarantee("s8_gate_sh", "guarantee at 8 ms slices")
for k in ("cnn", "transformer"):
    p = rate(f"kn_plain_{k}")
    for v in ("poll1000", "win3000"):
        g = rate(f"kn_{v}_{k}")
        if p and g:
            print(f"knob {k} {v}: plain {p:.2f} gated {g:.2f} -> "
                  f"{100 * (p - g) / p:+.2f} %")
for k in ("cnn", "transformer"):
    p, g = rate(f"w2_plain_{k}"), rate(f"w2_gate_{k}")
    if p and g:
        print(f"window 2 ms {k}: plain {p:.2f} gated {g:.2f} -> "
              f"{100 * (p - g) / p:+.2f} %")
split("w2_mm13", [1, 3])
mp = [rate(f"mlp_plain{r}") for r in (1, 2, 3)]
mg = [rate(f"mlp_gate{r}") for r in (1, 2, 3)]
if all(mp) and all(mg):
    print("mlp plain " + "/".join(f"{x:.0f}" for x in mp) + " gated " +
          "/".join(f"{x:.0f}" for x in mg) +
          f" -> {100 * (sum(mp) - sum(mg)) / sum(mp):+.2f} %")

for k in ("transformer", "cnn", "mlp", "matmul"):
    ps = [rate(f"oh_plain{r}_{k}") for r in (1, 2)]
    gs = [rate(f"oh_gate{r}_{k}") for r in (1, 2)]
    if ps[0] and gs[0] and not (ps[1] and gs[1]):
        # one plain/gated pair (run.sh's final phase)
        print(f"overhead {k}: plain {ps[0]:.2f} it/s gated {gs[0]:.2f} "
              f"it/s -> {100 * (ps[0] - gs[0]) / ps[0]:+.2f} %")
    if all(ps) and all(gs):
        p, g = sum(ps) / 2, sum(gs) / 2
        print(f"overhead {k}: plain {ps[0]:.2f}/{ps[1]:.2f} it/s gated "
              f"{gs[0]:.2f}/{gs[1]:.2f} it/s -> {100 * (p - g) / p:+.2f} % "
              f"(plain-to-plain drift {100 * (ps[1] - ps[0]) / ps[0]:+.2f} %)")
    for r in (1, 2):
        a = acct.get((f"oh_gate{r}_{k}", 1))
        f = final.get((f"oh_gate{r}_{k}", 1))
        if a and f:
            truth = f["gpu_ms"] + f.get("warm_ms", 0)
            rep = a["gpu_ns"] / 1e6
            print(f"  accounting {k}: agent {rep:.1f} ms vs events "
                  f"{truth:.1f} ms -> {100 * (rep - truth) / truth:+.2f} %")

for s, kinds in (("mix_ts", ("mlp", "matmul")), ("mix_gate", ("mlp", "matmul")),
                 ("duty_ts", ("matmul", "transformer")),
                 ("duty_gate", ("matmul", "transformer"))):
    ns = jobs(s)
    if not ns:
        continue
    norm = []
    for n, k in zip(ns, kinds):
        r, sr = rate(s, n), solo.get(k)
        norm.append(r / sr if r and sr else float("nan"))
    print(f"{s}: normalized {[round(x, 3) for x in norm]} total "
          f"{sum(norm):.3f}")
for (s, n), a in sorted(acct.items()):
    print(f"acct {s}.{n}: gpu {a['gpu_ns'] / 1e9:.3f} s held "
          f"{a['held_ns'] / 1e9:.3f} s suspensions {a['suspensions']}")

# eviction latency (the gate's exit line: suspend seen -> its last
# kernel done), per job of the latency sets
if os.path.exists(os.path.join(d, "gate.txt")):
    for line in open(os.path.join(d, "gate.txt")):
        f = line.split()
        if "evictions" not in f or not f[0].startswith(("lat_", "mm_gate",
                                                        "w2_")):
            continue
        i = f.index("evictions")
        try:
            print(f"latency {f[0]}: evictions {f[i + 1]} p50 "
                  f"{f[i + 3]} us p99 {f[i + 5]} us max {f[i + 7]} us")
        except IndexError:
            pass
if os.path.exists(os.path.join(d, "wrongpu.txt")):
    print("wrong GPU: " + open(os.path.join(d, "wrongpu.txt")).read().strip())
