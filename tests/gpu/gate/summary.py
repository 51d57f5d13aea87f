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
rs_ = [r for r in range(1, 10) if rate(f"mlp_plain{r}") and
       rate(f"mlp_gate{r}")]
mp = [rate(f"mlp_plain{r}") for r in rs_]
mg = [rate(f"mlp_gate{r}") for r in rs_]
if mp:
    pair = sorted((p - g) / p for p, g in zip(mp, mg))
    print("mlp plain " + "/".join(f"{x:.0f}" for x in mp) + " gated " +
          "/".join(f"{x:.0f}" for x in mg) +
          f" -> {100 * (sum(mp) - sum(mg)) / sum(mp):+.2f} % of the sums; "
          f"pair by pair median {100 * pair[len(pair) // 2]:+.2f} % "
          f"(range {100 * pair[0]:+.1f} ... {100 * pair[-1]:+.1f} %)")

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
                                                        "w2_", "w1000_",
                                                        "w500_")):
            continue
        i = f.index("evictions")
        try:
            print(f"latency {f[0]}: evictions {f[i + 1]} p50 "
                  f"{f[i + 3]} us p99 {f[i + 5]} us max {f[i + 7]} us")
        except IndexError:
            pass
if os.path.exists(os.path.join(d, "wrongpu.txt")):
    print("wrong GPU: " + open(os.path.join(d, "wrongpu.txt")).read().strip())


# ---- GATE_PHASES=timeline: hold traces (GSHARE_GATE_TRACE) ------------
def traces(label):
    """{job number: [hold dicts]} from OUT_DIR/trace/LABEL.N.PID."""
    td = os.path.join(d, "trace")
    out = {}
    if not os.path.isdir(td):
        return out
    for fn in sorted(os.listdir(td)):
        parts = fn.split(".")
        if len(parts) < 3 or ".".join(parts[:-2]) != label:
            continue
        holds = []
        for line in open(os.path.join(td, fn)):
            if line.startswith("#"):
                continue
            f = [int(x) for x in line.split()]
            holds.append(dict(zip(("grant", "first", "susp_set",
                                   "susp_seen", "release", "gpu", "subs",
                                   "idle"), f)))
        out.setdefault(int(parts[-2]), []).extend(holds)
    return out


def timeline(label, solo_label):
    tr = traces(label)
    if not tr:
        return
    ns = sorted(tr)
    fin = {n: final.get((label, n)) for n in ns}
    if not all(fin.values()):
        return
    t0 = min(f["t0"] for f in fin.values()) * 1e9
    t1 = min(f["t0"] + f["seconds"] for f in fin.values()) * 1e9
    wall = t1 - t0
    solo_rate = rate(solo_label)
    print(f"timeline {label}: window {wall / 1e9:.2f} s (all jobs running)")
    allh = []
    for n in ns:
        for h in tr[n]:
            if h["grant"] >= t0 and h["release"] and h["release"] <= t1:
                allh.append(dict(h, n=n))
    allh.sort(key=lambda h: h["grant"])
    held = sum(h["release"] - h["grant"] for h in allh)
    gpu = sum(h["gpu"] for h in allh)
    start = [h["first"] - h["grant"] for h in allh if h["first"]]
    susp = [h for h in allh if not h["idle"] and h["susp_set"]]
    notice = [h["susp_seen"] - h["susp_set"] for h in susp
              if h["susp_seen"] >= h["susp_set"]]
    drain = [h["release"] - h["susp_seen"] for h in susp if h["susp_seen"]]
    gaps = [b["grant"] - a["release"] for a, b in zip(allh, allh[1:])
            if b["grant"] >= a["release"]]
    over = sum(1 for a, b in zip(allh, allh[1:]) if b["grant"] < a["release"])

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2] / 1e3 if xs else float("nan")

    def mean(xs):
        return sum(xs) / len(xs) / 1e3 if xs else float("nan")
    print(f"  holds {len(allh)} ({len(susp)} suspended, "
          f"{sum(h['idle'] for h in allh)} idle), overlapping {over}")
    print(f"  held {100 * held / wall:.1f} % of the window, GPU time "
          f"accounted in holds {100 * gpu / wall:.1f} % "
          f"({100 * gpu / held:.1f} % of held)")
    print(f"  grant -> first submission: median {med(start):.1f} us, "
          f"mean {mean(start):.1f} us, "
          f"sum {100 * sum(start) / wall:.2f} % of the window")
    print(f"  suspend written -> seen: median {med(notice):.1f} us; "
          f"seen -> release (drain): median {med(drain):.1f} us, "
          f"mean {mean(drain):.1f} us")
    print(f"  release -> next grant (hand-over, no holder): median "
          f"{med(gaps):.1f} us, mean {mean(gaps):.1f} us, sum "
          f"{100 * sum(gaps) / wall:.2f} % of the window")
    if solo_rate:
        its = sum(f["iters"] for f in fin.values())
        per = [gpu / its / 1e6] if its else []
        # iterations the holds' GPU time would have done at the solo rate
        print(f"  GPU ms per iteration in holds {per[0]:.3f} vs solo "
              f"{1e3 / solo_rate:.3f} ms/it -> kernels "
              f"{100 * (per[0] * solo_rate / 1e3 - 1):+.1f} % slower")
        tot = sum(f["rate"] for f in fin.values()) / solo_rate
        print(f"  total normalized {tot:.3f}")


def smi(label):
    fn = os.path.join(d, "smi", label + ".csv")
    if not os.path.exists(fn):
        return
    sm, pw = [], []
    reasons = {}
    for line in open(fn):
        f = [x.strip() for x in line.split(",")]
        if len(f) < 5:
            continue
        try:
            c, p = float(f[1].split()[0]), float(f[3].split()[0])
        except (ValueError, IndexError):
            continue
        u = f[5].split()[0] if len(f) > 5 else ""
        if u and u != "0":
            sm.append(c)
            pw.append(p)
            if len(f) > 6:
                reasons[f[6]] = reasons.get(f[6], 0) + 1
    if sm:
        sm.sort()
        print(f"clocks {label}: SM MHz median {sm[len(sm) // 2]:.0f} "
              f"(min {sm[0]:.0f}), power median "
              f"{sorted(pw)[len(pw) // 2]:.0f} W, {len(sm)} busy samples, "
              f"throttle reasons {reasons}")


if jobs("tl_gate"):
    for s_ in ("tl_solo_a", "tl_ts", "tl_gate", "tl_solo_b"):
        smi(s_)
    ra, rb = rate("tl_solo_a"), rate("tl_solo_b")
    if ra and rb:
        print(f"timeline solo matmul before {ra:.1f} after {rb:.1f} it/s")
        final[("tl_solo", 1)] = {"rate": (ra + rb) / 2}
    ts = [rate("tl_ts", n) for n in jobs("tl_ts")]
    if ts and ra and rb:
        print(f"time-slicing total normalized {sum(ts) / ((ra + rb) / 2):.3f}")
    for lab in ("tl_gate",):
        timeline(lab, "tl_solo")
        split(lab, [20, 30, 50])
        got = [rate(lab, n) for n in jobs(lab)]
        if got and ra and rb:
            sr = (ra + rb) / 2
            print("  guarantee (rate / solo vs share): " + ", ".join(
                f"{100 * g / sr:.1f} % vs {s} %"
                for g, s in zip(got, (20, 30, 50))))

# accounting over each kind's timed loop: the agent's GPU time in the
# holds granted after the loop started (the gate's trace carries the
# figures it reported) against the loop's own events, whole loop and
# per synchronized group
for k in ("matmul", "transformer", "cnn", "mlp"):
    tr = traces(f"ac_{k}").get(1)
    f = final.get((f"ac_{k}", 1))
    if not tr or not f:
        continue
    t0 = f["t0"] * 1e9 - 1e6
    rep = sum(h["gpu"] for h in tr if h["grant"] >= t0) / 1e6
    print(f"accounting {k} (timed loop): agent {rep:.1f} ms vs whole loop "
          f"{f['loop_ms']:.1f} ms -> "
          f"{100 * (rep - f['loop_ms']) / f['loop_ms']:+.2f} %; vs the sum "
          f"of synchronized groups {f['gpu_ms']:.1f} ms -> "
          f"{100 * (rep - f['gpu_ms']) / f['gpu_ms']:+.2f} %")

# GATE_PHASES=win05: rates normalized to the solo rates, per window
for w in ("1000", "500"):
    for s_, kinds in ((f"w{w}_trmm", ("transformer", "matmul")),
                      (f"w{w}_mm13", ("matmul", "matmul")),
                      (f"w{w}_mix", ("mlp", "matmul"))):
        ns = jobs(s_)
        if not ns:
            continue
        norm = [rate(s_, n) / solo[k] if solo.get(k) else float("nan")
                for n, k in zip(ns, kinds)]
        print(f"{s_}: normalized {[round(x, 3) for x in norm]} total "
              f"{sum(norm):.3f}")
