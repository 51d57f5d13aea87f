"""A PyTorch training step's time with a warm caching allocator
(tests/gpu/mem/run.sh benchmark): a transformer encoder layer
(1024 wide, 16 heads, batch 16 x 256, AdamW), 30 warm-up steps, then
rounds of 50 steps timed wall-clock with one synchronize per round.
  torch_step.py --label LABEL --tag T --out F [--rounds N]
Emits the first step's time (allocator cold), the median warm step time
and the allocator segments created during the timed rounds (0 expected:
no allocation call reaches the driver, or the gate, once warm)."""
import argparse
import os
import statistics
import sys
import time

from memcommon import Results

p = argparse.ArgumentParser()
p.add_argument("--label", required=True)
p.add_argument("--tag", required=True)
p.add_argument("--out", required=True)
p.add_argument("--rounds", type=int, default=8)
a = p.parse_args()
res = Results(a.out, a.tag)
try:
    import torch
except ImportError as e:
    res.check(a.tag + " import torch", None if os.environ.get("MEMGPU_DRY")
              else False, str(e))
    sys.exit(0 if os.environ.get("MEMGPU_DRY") else 1)

dev = torch.device("cuda")
torch.manual_seed(0)
m = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True,
                                     device=dev)
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
x = torch.randn(16, 256, 1024, device=dev)


def step():
    opt.zero_grad(set_to_none=True)
    m(x).square().mean().backward()
    opt.step()


torch.cuda.synchronize()
t = time.perf_counter()
step()
torch.cuda.synchronize()
first = time.perf_counter() - t
for _ in range(30):
    step()
torch.cuda.synchronize()
seg0 = torch.cuda.memory_stats().get("segment.all.allocated", 0)
per = []
for _ in range(a.rounds):
    t = time.perf_counter()
    for _ in range(50):
        step()
    torch.cuda.synchronize()
    per.append((time.perf_counter() - t) / 50 * 1000.0)
seg = torch.cuda.memory_stats().get("segment.all.allocated", 0) - seg0
res.emit({"bench": "step", "label": a.label, "first_ms": first * 1000.0,
          "ms": statistics.median(per), "rounds": per, "segments": seg})
print("  %s: first step %.1f ms, warm step %.3f ms (median of %d rounds of "
      "50), segments created while warm %d" %
      (a.label, first * 1000.0, statistics.median(per), len(per), seg),
      flush=True)
