"""One PyTorch workload for the gate benchmarks: matmul (bf16 8192^3),
transformer (training step), cnn (training step), mlp (batch-8
inference, synchronized per request).  Waits for CLOCK_MONOTONIC --at,
runs --seconds, prints one JSON line per 1 s window and a final line
with the rate and the GPU time of its own work measured with CUDA
events (ground truth for the accounting check): gpu_ms sums each
synchronized group, loop_ms spans the whole timed loop (host pauses
between groups included), t0 is the loop's CLOCK_MONOTONIC start."""
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("kind")
p.add_argument("--seconds", type=float, default=5)
p.add_argument("--at", type=float, default=0)
p.add_argument("--tag", default="")
p.add_argument("--duty", default="", help="ON_MS/OFF_MS")
p.add_argument("--sync", default="",
               help="DIR: after warm-up write DIR/ready.TAG, then wait "
               "for DIR/go (it holds the CLOCK_MONOTONIC start time)")
a = p.parse_args()
dev = torch.device("cuda")
torch.manual_seed(0)

if a.kind == "matmul":
    x = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    w = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)

    def step():
        return x @ w
    per_sync = 4
elif a.kind == "transformer":
    m = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True,
                                         device=dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    x = torch.randn(16, 256, 1024, device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        m(x).square().mean().backward()
        opt.step()
    per_sync = 1
elif a.kind == "cnn":
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(64, 3, 64, 64, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
    per_sync = 1
elif a.kind == "mlp":
    m = torch.nn.Sequential(*[torch.nn.Sequential(
        torch.nn.Linear(1024, 1024), torch.nn.ReLU()) for _ in range(6)]
    ).to(dev).eval()
    x = torch.randn(8, 1024, device=dev)

    def step():
        with torch.no_grad():
            return m(x).sum().item()
    per_sync = 1
else:
    raise SystemExit("unknown kind " + a.kind)

torch.cuda.synchronize()
ws = torch.cuda.Event(enable_timing=True)
we = torch.cuda.Event(enable_timing=True)
ws.record()
for _ in range(10):
    step()
we.record()
we.synchronize()
warm_ms = ws.elapsed_time(we)
on_ms, off_ms = (map(float, a.duty.split("/")) if a.duty else (0, 0))
if a.sync:
    import os
    open(os.path.join(a.sync, "ready." + a.tag), "w").close()
    go = os.path.join(a.sync, "go")
    while not os.path.exists(go):
        time.sleep(0.005)
    time.sleep(0.01)
    a.at = float(open(go).read())
while a.at and time.monotonic() < a.at:
    time.sleep(min(0.01, max(0, a.at - time.monotonic())))
# the whole loop, host pauses included: what the job occupied the GPU
# for (a holder keeps the token through its short pauses)
rs = torch.cuda.Event(enable_timing=True)
re_ = torch.cuda.Event(enable_timing=True)
rs.record()
t0 = time.monotonic()
end = t0 + a.seconds
win, n_win, total, gpu_ms = 1, 0, 0, 0.0
ev = []
cyc = t0 + on_ms / 1000 if on_ms else 0
while True:
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(per_sync):
        step()
    e.record()
    e.synchronize()
    gpu_ms += s.elapsed_time(e)
    total += per_sync
    n_win += per_sync
    now = time.monotonic()
    if now >= t0 + win:
        print(json.dumps({"tag": a.tag, "kind": a.kind, "win": win,
                          "it": n_win}), flush=True)
        win += 1
        n_win = 0
    if now >= end:
        break
    if cyc and now >= cyc:
        time.sleep(off_ms / 1000)
        cyc = time.monotonic() + on_ms / 1000
el = time.monotonic() - t0
re_.record()
re_.synchronize()
print(json.dumps({"tag": a.tag, "kind": a.kind, "final": 1,
                  "rate": total / el, "gpu_ms": gpu_ms, "warm_ms": warm_ms,
                  "loop_ms": rs.elapsed_time(re_), "t0": t0,
                  "iters": total, "seconds": el}),
      flush=True)
