"""Summary of tests/gpu/mem/run.sh: reads OUT_DIR/results.jsonl, writes
OUT_DIR/summary.md and prints it.  Exit 1 when a check failed, or was
skipped outside a dry run (MEMGPU_DRY), or nothing was checked.
  summary.py OUT_DIR"""
import json
import os
import statistics
import sys

d = sys.argv[1]
dry = bool(os.environ.get("MEMGPU_DRY"))
rows = []
path = os.path.join(d, "results.jsonl")
if os.path.exists(path):
    for line in open(path):
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass

out = ["# GPU memory limits through the launch gate%s" %
       (" (DRY RUN: stand-in driver)" if dry else ""), "",
       "## Checks", "", "| check | result | measured |", "|---|---|---|"]
bad = 0
checks = [r for r in rows if "check" in r]
for r in checks:
    word = {True: "PASS", False: "FAIL", None: "SKIP"}[r["ok"]]
    if r["ok"] is False or (r["ok"] is None and not dry):
        bad += 1
    out.append("| %s | %s | %s |" % (r["check"], word,
                                     r["detail"].replace("|", "/")))
if not checks:
    bad += 1
    out.append("| (no check ran) | FAIL | |")

pairs = {}
for r in rows:
    if r.get("bench") == "pair":
        pairs.setdefault((r["size"], r["label"]), []).append(r["us"])
if pairs:
    out += ["", "## cuMemAlloc_v2 + cuMemFree_v2 pair (ctypes on libcuda, "
            "through the gate's hooks when gated; preload: the gate loaded, "
            "no allocation: hooks pass through)", "",
            "| size | plain µs | gated µs | preload µs | gated / plain | "
            "preload / plain | plain run-to-run | target ≤ 1.05 |",
            "|---|---|---|---|---|---|---|---|"]
    for size in ("4KiB", "1MiB", "64MiB", "1GiB"):
        pl, ga = pairs.get((size, "plain"), []), pairs.get((size, "gated"), [])
        pr = pairs.get((size, "preload"), [])
        if not pl or not ga:
            out.append("| %s | %s | %s | - | - | - | - | - |" %
                       (size, pl, ga))
            continue
        mp, mg = statistics.median(pl), statistics.median(ga)
        mr = statistics.median(pr) if pr else 0
        spread = max(pl) / min(pl) if min(pl) > 0 else 0
        out.append("| %s | %.2f | %.2f | %s | %.3f | %s | %.3f | %s |" %
                   (size, mp, mg, "%.2f" % mr if pr else "-", mg / mp,
                    "%.3f" % (mr / mp) if pr else "-", spread,
                    "met" if mg / mp <= 1.05 else "missed"))

ab = {}
for r in rows:
    if r.get("bench") == "ab":
        ab.setdefault((r["size"], r["label"]), []).append(r)
if ab:
    out += ["", "## The same pairs in one process: the gate's hooks against "
            "the driver's own entry points, alternating batches (each "
            "run's medians; plain: no gate, both sides the driver — the "
            "method's noise)", "",
            "| size | gated: hooks / driver µs (each run) | ratio | "
            "plain: same / driver (each run) | ratio | target ≤ 1.05 |",
            "|---|---|---|---|---|---|"]
    for size in ("4KiB", "1MiB", "64MiB", "1GiB"):
        g_, p_ = ab.get((size, "gated"), []), ab.get((size, "plain"), [])
        if not g_:
            continue

        def runs(rs):
            return " ".join("%.2f/%.2f" % (r["hook_us"], r["direct_us"])
                            for r in rs)

        def ratio(rs):
            return statistics.median(r["hook_us"] / r["direct_us"]
                                     for r in rs) if rs else 0
        rg = ratio(g_)
        out.append("| %s | %s | %.3f | %s | %s | %s |" % (
            size, runs(g_), rg, runs(p_) if p_ else "-",
            "%.3f" % ratio(p_) if p_ else "-",
            "met" if rg <= 1.05 else "missed"))

steps = {}
for r in rows:
    if r.get("bench") == "step":
        steps.setdefault(r["label"], []).append(r)
if steps:
    out += ["", "## PyTorch training step (transformer layer, warm "
            "allocator)", "",
            "| runs | warm step ms (each run) | first step ms | segments "
            "created while warm |", "|---|---|---|---|"]
    med = {}
    for lab in ("plain", "gated"):
        rs = steps.get(lab, [])
        if rs:
            med[lab] = statistics.median(r["ms"] for r in rs)
        out.append("| %s | %s | %s | %s |" % (
            lab, " ".join("%.3f" % r["ms"] for r in rs),
            " ".join("%.1f" % r["first_ms"] for r in rs),
            " ".join(str(r["segments"]) for r in rs)))
    if len(med) == 2 and med["plain"] > 0:
        pl = [r["ms"] for r in steps["plain"]]
        out += ["", "warm step gated / plain: %.4f (plain run-to-run "
                "%.4f)" % (med["gated"] / med["plain"],
                           max(pl) / min(pl))]

out += ["", "%d check(s), %d not passed%s" % (
    len(checks), bad, "" if dry else " (SKIP counts as not passed)")]
text = "\n".join(out) + "\n"
with open(os.path.join(d, "summary.md"), "w") as f:
    f.write(text)
print(text)
sys.exit(1 if bad else 0)
