"""JAX with its default preallocation inside a share (tests/gpu/mem/run.sh):
  jax_prealloc.py --plain --losses FILE --tag T --out F
  jax_prealloc.py --limit L --ref FILE --tag T --out F
The first form runs the training step without the gate (run.sh starts it
without LD_PRELOAD) and writes the loss of every step to FILE.  The second
runs the same program, same seeds, under the gate and checks: JAX starts
on the GPU (no fallback to the CPU), its allocator's pool (bytes_limit)
fits in L, every step's loss is finite and matches the plain run's
(within 1e-3 relative: XLA may pick another algorithm when it sees less
memory, and float32 matmuls run as TF32 by default on the H100; a wrong
pointer or size from the gate would give garbage, not 1e-3), and the device memory the process really holds (NVML, less what
was used before) stays within L + 1 GiB.  Both forms print the loss of
every step, so that a NaN tells at once whether the program or the gate
made it.

The step is a well-conditioned regression (weights scaled 1/sqrt(fan-in),
learning rate 0.01): the first version started from a constant weight
matrix with a learning rate of 0.1, whose effective step on the output
layer is about 17 times the stable one, so it diverged to NaN by itself
within 20 steps, gate or no gate."""
import argparse
import json
import math
import os
import sys

from memcommon import GIB, Nvml, Results, gib

STEPS = 20

p = argparse.ArgumentParser()
p.add_argument("--limit", type=int)
p.add_argument("--plain", action="store_true")
p.add_argument("--losses", help="--plain: write the losses here")
p.add_argument("--ref", help="the plain run's losses")
p.add_argument("--tag", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()
if not a.plain and a.limit is None:
    sys.exit("jax_prealloc.py: --limit or --plain")
L = a.limit
dry = bool(os.environ.get("MEMGPU_DRY"))
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
    res.check(T + "import jax", None if dry else False, str(e))
    sys.exit(0 if dry else 1)


def train():
    """The loss after each of STEPS jitted steps (floats)."""
    k1, k2, k3, k4 = jax.random.split(jax.random.PRNGKey(0), 4)
    x = jax.random.normal(k1, (4096, 1024), dtype=jnp.float32)
    y = jax.random.normal(k2, (4096, 1), dtype=jnp.float32)
    w = {"a": jax.random.normal(k3, (1024, 1024)) / 32.0,
         "b": jax.random.normal(k4, (1024, 1)) / 32.0}

    @jax.jit
    def step(w):
        def loss(w):
            return jnp.mean((jnp.tanh(x @ w["a"]) @ w["b"] - y) ** 2)
        lv, g = jax.value_and_grad(loss)(w)
        return jax.tree_util.tree_map(lambda p, q: p - 0.01 * q, w, g), lv

    out = []
    for _ in range(STEPS):
        w, lv = step(w)
        out.append(float(lv.block_until_ready()))
    return out


def show(label, losses):
    print("  %s losses: %s" % (label, " ".join("%.6g" % v for v in losses)),
          flush=True)


try:
    d = jax.devices()[0]
    res.check(T + "starts on the GPU", d.platform == "gpu",
              "device %s (platform %s)" % (d, d.platform))
    losses = train()
    label = "plain" if a.plain else "gated"
    show(label, losses)
    res.emit({"jax_losses": label, "losses": losses})
    finite = all(math.isfinite(v) for v in losses)
    res.check(T + "every step's loss is finite (%s)" % label, finite,
              "first %.6g, last %.6g" % (losses[0], losses[-1]))
    if a.plain:
        if a.losses:
            with open(a.losses, "w") as f:
                json.dump(losses, f)
        sys.exit(1 if res.failed else 0)

    ref = None
    if a.ref and os.path.exists(a.ref):
        with open(a.ref) as f:
            ref = json.load(f)
    if ref is None or len(ref) != len(losses):
        res.check(T + "gated losses match the plain run's",
                  None if dry else False, "no plain run to compare with")
    else:
        show("plain", ref)
        worst, at = 0.0, -1
        for i, (u, v) in enumerate(zip(ref, losses)):
            if not (math.isfinite(u) and math.isfinite(v)):
                e = 0.0 if (math.isnan(u) and math.isnan(v)) or u == v \
                    else math.inf
            else:
                e = abs(u - v) / max(abs(u), 1e-30)
            if e > worst:
                worst, at = e, i
        res.check(T + "gated losses match the plain run's", worst <= 1e-3,
                  "largest relative difference %.3g (step %d); plain "
                  "last %.6g, gated last %.6g" %
                  (worst, at + 1, ref[-1], losses[-1]))
    st = d.memory_stats() or {}
    bl = st.get("bytes_limit")
    used = nv.used()
    held = used - base if used is not None and base is not None else None
    res.check(T + "preallocated pool fits the limit",
              bl is not None and bl <= L,
              "bytes_limit %s (%.0f %% of the limit %s), peak in use %s" %
              (gib(bl), 100.0 * (bl or 0) / L, gib(L),
               gib(st.get("peak_bytes_in_use"))))
    if held is None:
        res.check(T + "device memory held (NVML) within limit + 1 GiB",
                  None if dry else False, "no NVML")
    else:
        res.check(T + "device memory held (NVML) within limit + 1 GiB",
                  0 < held <= L + GIB, "held %s (0: NVML's process listing "
                  "never showed this process), limit %s" % (gib(held), gib(L)))
    res.emit({"jax": a.tag, "limit": L, "bytes_limit": bl, "held": held})
except Exception as e:
    res.check(T + "runs", False, "%s: %s" % (type(e).__name__,
                                             str(e).split("\n")[0][:300]))
sys.exit(1 if res.failed else 0)
