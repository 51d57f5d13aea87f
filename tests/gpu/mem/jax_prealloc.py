"""JAX with its default preallocation inside a share (tests/gpu/mem/run.sh):
  jax_prealloc.py --limit L --tag T --out F
Checks: JAX starts on the GPU (no fallback to the CPU), its allocator's
pool (bytes_limit) fits in L, a jitted training step runs and gives a
finite loss, and the device memory the process really holds (NVML, less
what was used before) stays within L + 1 GiB."""
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
for k in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
          "XLA_PYTHON_CLIENT_ALLOCATOR"):
    os.environ.pop(k, None)
try:
    import jax
    import jax.numpy as jnp
except ImportError as e:
    res.check(T + "import jax", None if os.environ.get("MEMGPU_DRY")
              else False, str(e))
    sys.exit(0 if os.environ.get("MEMGPU_DRY") else 1)

try:
    d = jax.devices()[0]
    res.check(T + "starts on the GPU", d.platform == "gpu",
              "device %s (platform %s)" % (d, d.platform))
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(k1, (4096, 1024), dtype=jnp.float32)
    y = jax.random.normal(k2, (4096, 1), dtype=jnp.float32)
    w = {"a": jnp.zeros((1024, 1024)) + 0.01, "b": jnp.zeros((1024, 1))}

    @jax.jit
    def step(w):
        def loss(w):
            return jnp.mean((jnp.tanh(x @ w["a"]) @ w["b"] - y) ** 2)
        lv, g = jax.value_and_grad(loss)(w)
        return jax.tree_util.tree_map(lambda p, q: p - 0.1 * q, w, g), lv

    for _ in range(20):
        w, lv = step(w)
    lv = float(lv.block_until_ready())
    st = d.memory_stats() or {}
    bl = st.get("bytes_limit")
    used = nv.used()
    held = used - base if used is not None and base is not None else None
    res.check(T + "jitted step runs", lv == lv and abs(lv) < 1e30,
              "loss after 20 steps %.5g" % lv)
    res.check(T + "preallocated pool fits the limit",
              bl is not None and bl <= L,
              "bytes_limit %s (%.0f %% of the limit %s), peak in use %s" %
              (gib(bl), 100.0 * (bl or 0) / L, gib(L),
               gib(st.get("peak_bytes_in_use"))))
    if held is None:
        res.check(T + "device memory held (NVML) within limit + 1 GiB",
                  None if os.environ.get("MEMGPU_DRY") else False, "no NVML")
    else:
        res.check(T + "device memory held (NVML) within limit + 1 GiB",
                  held <= L + GIB, "held %s, limit %s" % (gib(held), gib(L)))
    res.emit({"jax": a.tag, "limit": L, "bytes_limit": bl, "held": held})
except Exception as e:
    res.check(T + "runs", False, "%s: %s" % (type(e).__name__,
                                             str(e).split("\n")[0][:300]))
sys.exit(1 if res.failed else 0)
