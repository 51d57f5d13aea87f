"""Driver-level jobs for tests/gpu/mem/run.sh, through cuMemAlloc_v2 /
cuMemFree_v2 / cuMemGetInfo_v2 looked up in libcuda.so.1 with ctypes
(the entry points the gate hooks; runs on the gate's stand-in driver too).

  drv.py fill --limit L --sync DIR --tag T --out F
      wait for DIR/go, allocate 1 GiB chunks, halving down to 1 MiB, until
      refused; write DIR/full.T (bytes held), hold until DIR/release, free.
      Checks: never above L, reached L (within 1 MiB), refusals are
      CUDA_ERROR_OUT_OF_MEMORY, cuMemGetInfo's and NVML's (dlopen'ed, as
      frameworks do) total is L, the frees succeed.
  drv.py bench --label LABEL --tag T --out F [--limit L] [--seconds S]
      cuMemAlloc/cuMemFree pairs of 4 KiB, 1 MiB, 64 MiB, 1 GiB: median
      time per pair.  With --limit: one allocation of L + 1 MiB must be
      refused (the calls went through the gate).  With --ab: in the same
      process, batches through the looked-up entry points (the gate's
      hooks when it is loaded) alternate with batches straight into the
      driver; each side's median and their ratio (without the gate, the
      ratio is the method's own noise)."""
import argparse
import ctypes
import os
import statistics
import sys
import time

from memcommon import GIB, MIB, Driver, Nvml, Results, gib

OOM = 2

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["fill", "bench"])
p.add_argument("--limit", type=int, default=0)
p.add_argument("--sync", default="")
p.add_argument("--tag", default="")
p.add_argument("--label", default="")
p.add_argument("--out", required=True)
p.add_argument("--seconds", type=float, default=0.4,
               help="bench: time per size")
p.add_argument("--ab", action="store_true",
               help="bench: hooks and the driver, alternating batches")
p.add_argument("--hold", type=float, default=60,
               help="fill: longest wait for DIR/release")
a = p.parse_args()
res = Results(a.out, a.tag)
drv = Driver()


def wait_for(path, secs):
    end = time.monotonic() + secs
    while not os.path.exists(path):
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def fill():
    nv = Nvml()
    open(os.path.join(a.sync, "ready." + a.tag), "w").close()
    if not wait_for(os.path.join(a.sync, "go"), 60):
        res.check(a.tag + " start", False, "no go file in 60 s")
        return
    held, ptrs, codes = 0, [], set()
    chunk = GIB
    t0 = time.monotonic()
    while chunk >= MIB:
        rc, ptr = drv.alloc(chunk)
        if rc == 0:
            ptrs.append(ptr)
            held += chunk
        else:
            codes.add(rc)
            chunk //= 2
    t_fill = time.monotonic() - t0
    vfree, vtotal = drv.info()
    nfree = nv.free()
    with open(os.path.join(a.sync, "full." + a.tag + ".tmp"), "w") as f:
        f.write("%d\n" % held)
    os.rename(os.path.join(a.sync, "full." + a.tag + ".tmp"),
              os.path.join(a.sync, "full." + a.tag))
    res.emit({"fill": a.tag, "held": held, "limit": a.limit,
              "allocs": len(ptrs), "codes": sorted(codes),
              "view_free": vfree, "view_total": vtotal, "nvml_free": nfree,
              "fill_s": t_fill})
    res.check(a.tag + " never above its limit", held <= a.limit,
              "held %s (%d B) in %d allocations, limit %s (%d B)" %
              (gib(held), held, len(ptrs), gib(a.limit), a.limit))
    res.check(a.tag + " reached its quota", held > a.limit - MIB,
              "held %s of %s (%.2f %%), short by %.1f MiB; cuMemGetInfo "
              "view free %s total %s; device free (NVML) %s" %
              (gib(held), gib(a.limit), 100.0 * held / a.limit,
               (a.limit - held) / MIB, gib(vfree), gib(vtotal), gib(nfree)))
    res.check(a.tag + " refusals are CUDA_ERROR_OUT_OF_MEMORY",
              codes == {OOM}, "result codes of refused calls: %s" %
              sorted(codes))
    res.check(a.tag + " cuMemGetInfo total is the limit", vtotal == a.limit,
              "total %d, limit %d" % (vtotal or 0, a.limit))
    ntotal, nvfree, nused = nv.view()
    if ntotal is None:
        res.check(a.tag + " NVML's memory query: the allocation's view",
                  None if os.environ.get("MEMGPU_DRY") else False, "no NVML")
    else:
        res.check(a.tag + " NVML's memory query: the allocation's view",
                  ntotal == a.limit and nvfree <= a.limit - held + MIB,
                  "nvmlDeviceGetMemoryInfo total %d free %d used %d; limit "
                  "%d, held %d" % (ntotal, nvfree, nused, a.limit, held))
    released = wait_for(os.path.join(a.sync, "release"), a.hold)
    bad = [rc for rc in (drv.free(x) for x in ptrs) if rc != 0]
    rc, ptr = drv.alloc(a.limit // 2)
    if rc == 0:
        drv.free(ptr)
    res.check(a.tag + " frees give back", not bad and rc == 0,
              "%d frees failed; then half the limit: result %d%s" %
              (len(bad), rc, "" if released else " (no release file)"))


def bench():
    sizes = [("4KiB", 4 << 10), ("1MiB", MIB), ("64MiB", 64 * MIB),
             ("1GiB", GIB)]
    if a.limit:
        rc, ptr = drv.alloc(a.limit + MIB)
        if rc == 0:
            drv.free(ptr)
        res.check(a.label + " path through the gate", rc == OOM,
                  "an allocation of the limit + 1 MiB (%s): result %d" %
                  (gib(a.limit + MIB), rc))
    for name, n in sizes:
        for _ in range(3):			# warm-up
            rc, ptr = drv.alloc(n)
            if rc != 0:
                res.check(a.label + " alloc " + name, False, "result %d" % rc)
                return
            drv.free(ptr)
        # batches of k pairs, about 10 ms each, for --seconds
        t = time.perf_counter()
        rc, ptr = drv.alloc(n)
        drv.free(ptr)
        one = max(time.perf_counter() - t, 1e-7)
        k = max(1, min(2000, int(0.01 / one)))
        per, end = [], time.monotonic() + a.seconds
        while time.monotonic() < end or len(per) < 3:
            t = time.perf_counter_ns()
            for _ in range(k):
                rc, ptr = drv.alloc(n)
                drv.free(ptr)
            per.append((time.perf_counter_ns() - t) / k / 1000.0)
            if rc != 0:
                res.check(a.label + " alloc " + name, False, "result %d" % rc)
                return
        res.emit({"bench": "pair", "label": a.label, "size": name,
                  "us": statistics.median(per), "batches": len(per),
                  "per_batch": k})
        print("  %s %s: %.2f us per pair (%d batches of %d)" %
              (a.label, name, statistics.median(per), len(per), k),
              flush=True)


def bench_ab():
    sizes = [("4KiB", 4 << 10), ("1MiB", MIB), ("64MiB", 64 * MIB),
             ("1GiB", GIB)]
    def batcher(alloc, free):
        """k pairs of n bytes: (us per pair, last result); the same
        Python calls on both sides, only the functions differ"""
        ptr = ctypes.c_uint64()
        ref = ctypes.byref(ptr)

        def batch(n, k):
            t = time.perf_counter_ns()
            for _ in range(k):
                rc = alloc(ref, n)
                free(ptr.value)
            return (time.perf_counter_ns() - t) / k / 1000.0, rc
        return batch

    hook_batch = batcher(drv.alloc_fn, drv.free_fn)
    direct_batch = batcher(*drv.direct())

    for name, n in sizes:
        for _ in range(3):
            hook_batch(n, 1)
            direct_batch(n, 1)
        one, _ = hook_batch(n, 1)
        k = max(1, min(2000, int(10000 / max(one, 0.1))))
        hk, dr = [], []
        end = time.monotonic() + a.seconds
        i = 0
        while time.monotonic() < end or len(hk) < 3:
            # alternate which side goes first
            order = (hook_batch, direct_batch) if i % 2 == 0 else \
                (direct_batch, hook_batch)
            for f in order:
                us, rc = f(n, k)
                if rc != 0:
                    res.check(a.label + " alloc " + name, False,
                              "result %d" % rc)
                    return
                (hk if f is hook_batch else dr).append(us)
            i += 1
        h, dd = statistics.median(hk), statistics.median(dr)
        res.emit({"bench": "ab", "label": a.label, "size": name,
                  "hook_us": h, "direct_us": dd, "batches": len(hk),
                  "per_batch": k})
        print("  %s %s: %.2f us through the entry points, %.2f us straight "
              "into the driver (%.3f; %d batches of %d each)" %
              (a.label, name, h, dd, h / dd, len(hk), k), flush=True)


if a.mode == "fill":
    fill()
elif a.ab:
    bench_ab()
else:
    bench()
sys.exit(1 if res.failed else 0)
