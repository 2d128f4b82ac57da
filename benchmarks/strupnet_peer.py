"""strupnet's training throughput on the 20-dimensional linear Hamiltonian system (issue 17).

A standalone peer measurement, **not** a geomlearn benchmark and not importable by the
benchmark runner: it runs in a separate, benchmark-only environment with PyTorch and
strupnet (Tapley's PyTorch package), which geomlearn never depends on. It builds the same
problem as `benchmarks/new_families.py` (experiment 2) and trains strupnet's P-SympNet
with the same settings, so its epochs/s can be put next to geomlearn's:

- `H = zᵀSz/2`, `S = AAᵀ/20 + I` with `A` drawn by `numpy.random.default_rng(0)`, `n = 10`
  (`z ∈ R²⁰`, q first), exact flow `Φ = expm(dt J S)`, `dt = 0.1`;
- one-step pairs `(x, Φx)` of `--samples` (default 400) random states for training and as
  many for testing (the same draws as geomlearn's);
- `SympNet(dim=10, layers=40, method="P", min_degree=2, max_degree=2)`, float64, Adam 1e-2,
  MSE, full batch, `--epochs` epochs (default 1000), after 5 untimed warm-up epochs.

Run (one environment per peer, outside geomlearn's):

```
python -m venv /tmp/strupnet-venv
/tmp/strupnet-venv/bin/pip install torch strupnet numpy
OPENBLAS_NUM_THREADS=1 /tmp/strupnet-venv/bin/python benchmarks/strupnet_peer.py --threads 1
```

It prints one JSON object (epochs/s, train and test MSE, versions, threads).
"""

from __future__ import annotations

import argparse
import json
import time


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--layers", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)

    import numpy as np
    import strupnet
    import torch

    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)
    n, dt = 10, 0.1
    rng = np.random.default_rng(0)  # the same draws as benchmarks/new_families.py
    A = rng.standard_normal((2 * n, 2 * n))
    S = A @ A.T / (2 * n) + np.eye(2 * n)
    J = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    Phi = torch.linalg.matrix_exp(torch.as_tensor(dt * J @ S)).numpy()
    M = args.samples
    x = rng.standard_normal((2 * M, 2 * n))
    y = x @ Phi.T
    xtr, ytr, xte, yte = (torch.as_tensor(a) for a in (x[:M], y[:M], x[M:], y[M:]))

    torch.manual_seed(0)
    net = strupnet.SympNet(dim=n, layers=args.layers, method="P", min_degree=2, max_degree=2)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)

    def epoch():
        opt.zero_grad()
        loss = torch.mean((net(xtr, dt) - ytr) ** 2)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):  # warm-up, untimed
        epoch()
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        loss = epoch()
    float(loss.detach())
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        train_mse = float(torch.mean((net(xtr, dt) - ytr) ** 2))
        test_mse = float(torch.mean((net(xte, dt) - yte) ** 2))
    result = {
        "peer": "strupnet", "strupnet": getattr(strupnet, "__version__", "0.0.4"),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "network": f"SympNet(dim={n}, layers={args.layers}, method='P', degree 2)",
        "n_samples": M, "epochs": args.epochs, "train_s": seconds,
        "epochs_per_s": args.epochs / seconds, "train_mse": train_mse, "test_mse": test_mse,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
