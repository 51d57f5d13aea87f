#!/usr/bin/env python3
"""space_torch.py — two small PyTorch loads for space mode's benchmark
(tests/gpu/space.sh): `train`, a compute-bound bf16 training step of a
wide MLP, and `infer`, a memory-bound inference loop (elementwise work
on large tensors, batch 1 style).  Runs for --seconds and prints one line
per second, `window KIND i rate=STEPS_PER_S`, like the examples' --run.
Exit 3 when torch or CUDA is missing (the script then skips the pair).
"""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["train", "infer"])
    ap.add_argument("--seconds", type=float, default=6.0)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("no torch", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 3
    dev = torch.device("cuda")
    torch.manual_seed(0)
    if a.kind == "train":
        model = torch.nn.Sequential(
            torch.nn.Linear(4096, 4096), torch.nn.GELU(),
            torch.nn.Linear(4096, 4096)).to(dev, torch.bfloat16)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x = torch.randn(2048, 4096, device=dev, dtype=torch.bfloat16)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(x).float().pow(2).mean()
            loss.backward()
            opt.step()
    else:
        big = torch.randn(64 * 1024 * 1024, device=dev)
        w = torch.randn(64 * 1024 * 1024, device=dev)

        def step():
            with torch.no_grad():
                y = big * w + 1.0
                big.copy_(torch.tanh(y))
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = ws = time.monotonic()
    n = 0
    w_i = 0
    while time.monotonic() - t0 < a.seconds:
        step()
        torch.cuda.synchronize()
        n += 1
        now = time.monotonic()
        if now - ws >= 1.0:
            print("window %s %d rate=%.3f" % (a.kind, w_i, n / (now - ws)),
                  flush=True)
            w_i += 1
            n = 0
            ws = now
    return 0


if __name__ == "__main__":
    sys.exit(main())
