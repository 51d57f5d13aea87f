"""PyTorch under a device memory limit (tests/gpu/mem/run.sh), with the
allocator PYTORCH_CUDA_ALLOC_CONF names (native, expandable_segments,
cudaMallocAsync).

  torch_limit.py --limit L --tag T --out F

Checks: torch.cuda.mem_get_info() reports L as total; one tensor larger
than L raises torch.cuda.OutOfMemoryError; so does a second tensor that
would pass L beside a first; after empty_cache a tensor of 0.9 L works
and computes; with 0.5 L cached (freed, not emptied) a tensor of 0.9 L
still works (the allocator frees its cache and retries); the process is
healthy after the refusals; the device memory the process really holds
(NVML, device-wide, less what was used before CUDA started) stays within
L + 1 GiB (its context and the driver's own buffers)."""
import argparse
import os
import sys

from memcommon import GIB, Nvml, Results, gib

p = argparse.ArgumentParser()
p.add_argument("--limit", type=int, required=True)
p.add_argument("--tag", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
L = a.limit
res = Results(a.out, a.tag)
nv = Nvml()
base = nv.used()
T = a.tag + ": "

try:
    import torch
except ImportError as e:
    res.check(T + "import torch", None if os.environ.get("MEMGPU_DRY")
              else False, str(e))
    sys.exit(0 if os.environ.get("MEMGPU_DRY") else 1)

conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
dev = torch.device("cuda")
peak_phys = [0]


def phys():
    u = nv.used()
    if u is not None and base is not None:
        peak_phys[0] = max(peak_phys[0], u - base)


def stat(f):
    """an allocator figure, or -1 where this backend has none"""
    try:
        return f()
    except Exception:
        return -1


def reserved():
    return stat(torch.cuda.memory_reserved)


def retries():
    return stat(lambda: torch.cuda.memory_stats().get(
        "num_alloc_retries", 0))


def nbytes(n):
    return torch.empty(int(n), dtype=torch.uint8, device=dev)


def oom(n):
    """(raised OutOfMemoryError, detail)"""
    try:
        t = nbytes(n)
        phys()
        del t
        return False, "allocated %s" % gib(n)
    except torch.cuda.OutOfMemoryError as e:
        return True, "OutOfMemoryError: " + str(e).split("\n")[0][:160]
    except Exception as e:		# a crash-like error is a failure
        return False, "%s: %s" % (type(e).__name__, str(e)[:160])


free, total = torch.cuda.mem_get_info()
res.check(T + "mem_get_info total is the limit", total == L,
          "free %s, total %d (%s), limit %d; allocator conf '%s'" %
          (gib(free), total, gib(total), L, conf))

ok, d = oom(1.2 * L)
res.check(T + "one tensor of 1.2 x limit -> OutOfMemoryError", ok, d)

x = nbytes(0.6 * L)
x.fill_(1)
phys()
ok, d = oom(0.6 * L)
res.check(T + "0.6 L beside 0.6 L held -> OutOfMemoryError", ok, d)
del x
torch.cuda.empty_cache()
try:
    z = nbytes(0.9 * L)
    z.fill_(3)
    s = int(z[:1 << 20].sum().item())
    phys()
    res.check(T + "after empty_cache 0.9 L works", s == 3 << 20,
              "allocated %s, reserved %s, sum check %d" %
              (gib(0.9 * L), gib(reserved()), s))
    del z
except Exception as e:
    res.check(T + "after empty_cache 0.9 L works", False,
              "%s: %s" % (type(e).__name__, str(e)[:200]))

# cached but free memory: the allocator must give it back and retry
torch.cuda.empty_cache()
r0 = retries()
y = nbytes(0.5 * L)
y.fill_(1)
del y
try:
    z = nbytes(0.9 * L)
    z.fill_(2)
    torch.cuda.synchronize()
    phys()
    r1 = retries()
    res.check(T + "0.9 L with 0.5 L cached works (cache freed, retried)",
              True, "reserved %s, allocator retries %d" %
              (gib(reserved()), r1 - r0))
    del z
except Exception as e:
    res.check(T + "0.9 L with 0.5 L cached works (cache freed, retried)",
              False, "%s: %s" % (type(e).__name__, str(e)[:200]))

try:
    m = torch.randn(1024, 1024, device=dev, generator=None)
    want = (m.cpu() @ m.cpu()).sum().item()
    got = (m @ m).sum().item()
    res.check(T + "healthy after the refusals",
              abs(got - want) <= 1e-3 * max(1.0, abs(want)),
              "1024^2 matmul sum %.4g (CPU %.4g)" % (got, want))
except Exception as e:
    res.check(T + "healthy after the refusals", False,
              "%s: %s" % (type(e).__name__, str(e)[:200]))

torch.cuda.synchronize()
phys()
if base is None:
    res.check(T + "device memory held (NVML) within limit + 1 GiB",
              None if os.environ.get("MEMGPU_DRY") else False, "no NVML")
else:
    res.check(T + "device memory held (NVML) within limit + 1 GiB",
              0 < peak_phys[0] <= L + GIB,
              "peak %s (NVML's compute processes, less %s before CUDA; "
              "0: the listing never showed this process), limit %s" %
              (gib(peak_phys[0]), gib(base), gib(L)))
res.emit({"torch": a.tag, "conf": conf, "limit": L,
          "peak_phys": peak_phys[0],
          "max_reserved": stat(torch.cuda.max_memory_reserved)})
sys.exit(1 if res.failed else 0)
