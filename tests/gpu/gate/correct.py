"""PyTorch correctness under the launch gate: a small training run with
fixed seeds, a CUDA-graph replay, a multi-stream case and a DataLoader
with forked workers.  Prints one JSON line of result hashes; run with and
without the gate, the lines must be identical."""
import hashlib
import json
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = torch.device("cuda")


def digest(*ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(t.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def train():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(16 * 16 * 16, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(64, 3, 16, 16, generator=g).to(dev)
    y = torch.randint(0, 10, (64,), generator=g).to(dev)
    for _ in range(50):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return digest(*model.parameters()), float(loss)


def graph():
    torch.manual_seed(2)
    lin = torch.nn.Linear(512, 512).to(dev)
    static_in = torch.randn(32, 512, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            lin(static_in)
    torch.cuda.current_stream().wait_stream(s)
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        static_out = torch.relu(lin(static_in)) * 2
    outs = []
    for i in range(20):
        static_in.copy_(torch.full((32, 512), float(i) / 10, device=dev))
        gr.replay()
        outs.append(static_out.clone())
    return digest(*outs)


def streams():
    torch.manual_seed(3)
    x = torch.randn(1024, 1024, device=dev)
    w = torch.randn(1024, 1024, device=dev)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    ev = torch.cuda.Event()
    outs = []
    for i in range(20):
        with torch.cuda.stream(s1):
            a = (x + i) @ w
            ev.record(s1)
        with torch.cuda.stream(s2):
            s2.wait_event(ev)
            b = torch.tanh(a) * 3
        torch.cuda.current_stream().wait_stream(s2)
        outs.append(b.sum().unsqueeze(0))
    torch.cuda.synchronize()
    return digest(torch.cat(outs))


def loader():
    ds = torch.utils.data.TensorDataset(torch.arange(256.0).view(64, 4))
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2)
    tot = torch.zeros(4, device=dev)
    for (b,) in dl:
        tot += b.to(dev).sum(0)
    return digest(tot)


res = {}
res["train"], res["loss"] = train()
res["graph"] = graph()
res["streams"] = streams()
res["loader"] = loader()
# synchronous copies and a device-to-host item() on the legacy stream
res["item"] = float(torch.arange(10.0, device=dev).pow(2).sum().item())
print(json.dumps(res, sort_keys=True), flush=True)
