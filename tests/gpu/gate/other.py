"""JAX and CuPy under the launch gate: results printed as JSON (compared
with and without the gate).  Usage: other.py jax|cupy"""
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
which = sys.argv[1]
if which == "jax":
    import jax
    import jax.numpy as jnp

    k = jax.random.PRNGKey(0)
    x = jax.random.normal(k, (512, 512), dtype=jnp.float32)

    @jax.jit
    def f(w):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = jnp.eye(512, dtype=jnp.float32) * 0.5
    g = jax.grad(f)
    for _ in range(20):
        w = w - 0.01 * g(w)
    print(json.dumps({"jax": float(f(w)), "dev": str(jax.devices()[0])}),
          flush=True)
else:
    import cupy as cp

    cp.random.seed(0)
    a = cp.random.standard_normal((1024, 1024), dtype=cp.float32)
    b = a @ a.T
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = cp.tanh(b) + cp.sin(a)
    s.synchronize()
    k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * x + 1",
                             "sq1")
    print(json.dumps({"cupy": float(cp.sum(k(c)).get()),
                      "b": float(cp.sum(b).get())}), flush=True)
