"""phlearn's pseudo-Hamiltonian network on the damped pendulum of `benchmarks/dissipation.py`.

A standalone peer measurement, **not** a geomlearn benchmark and not importable by the
benchmark runner: it runs in a separate, benchmark-only environment with PyTorch and
phlearn (the pseudo-Hamiltonian neural networks package, Eidnes et al. 2023), which
geomlearn never depends on. It trains on the arrays that geomlearn wrote
(`python -m benchmarks.dissipation --side-by-side PATH`: experiment 1's trajectories of
`DampedPendulum(gamma=0.1)` at `h = 0.1`, 16 × 100 steps for training, 5 × 1000 steps
held out), so both libraries fit identical data, and reports what geomlearn's side reports:

- the model as phlearn's documentation builds it: `PseudoHamiltonianNN(2,
  hamiltonian_est=HamiltonianNN(2, hidden_dim), dissipation_est=R_estimator([False,
  True]))` — a learned energy (`--hidden` units, 16 by default: 337 parameters, about
  geomlearn's 341) and a learned damping on the momentum (phlearn is told which state is
  damped; geomlearn's network learns a full `R = LLᵀ`); float64;
- trained with `phlearn.phnns.train` as documented: its default optimizer (Adam, learning
  rate 1e-3, weight decay 1e-4), MSE between the finite difference `(x₁ − x₀)/h` and the
  network's right-hand side through `--integrator` (the implicit midpoint rule by default),
  `--batch-size` 32, `--epochs` epochs;
- the learned damping; the one-step test error (relative Frobenius error and mean squared
  error of one step from each of the 5000 test pairs, the step being the training
  integrator solved by fixed-point iteration to round-off); the relative error of the
  1000-step rollout against the Gauss–Legendre reference, (a) with the training
  integrator solved to round-off, as geomlearn rolls out its discrete-gradient step, and
  (b) with `simulate_trajectory(integrator=False)` (SciPy's `solve_ivp`, rtol 1e-10, the
  package's default inference); the wall time of `train` only.

Run (one environment per peer, outside geomlearn's; one core each):

```
XLA_FLAGS=--xla_cpu_multi_thread_eigen=false taskset -c 0 \\
    python -m benchmarks.dissipation --side-by-side /tmp/pl/damped_pendulum.npz
python -m venv /tmp/phlearn-venv
/tmp/phlearn-venv/bin/pip install torch phlearn numpy scipy
OPENBLAS_NUM_THREADS=1 taskset -c 0 /tmp/phlearn-venv/bin/python benchmarks/phlearn_peer.py \\
    --data /tmp/pl/damped_pendulum.npz --threads 1
```

It prints one JSON object (errors, damping, training time, versions, threads).
"""

from __future__ import annotations

import argparse
import json
import os
import time


def _rel(a, b) -> float:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _step(model, integrator, x, t, dt, tol=1e-14, max_iter=100):
    """One step `y = x + h f̂(x, y)` of phlearn's training integrator (the right-hand side
    `time_derivative` of `train`), solved by fixed-point iteration; `x` `(B, 2)`. Returns
    `y` and the last change `max |Δy|` (HamiltonianNN has a ReLU layer, so `∇H` and the
    right-hand side jump across its kinks and a few points may not settle below `tol`)."""
    import torch

    h = torch.full((x.shape[0], 1), dt, dtype=x.dtype)
    y = x.clone()
    for _ in range(max_iter):
        new = (x + dt * model.time_derivative(integrator, x, y, t, t + h, h)).detach()
        change = float(torch.max(torch.abs(new - y)))
        y = new
        if change <= tol:
            break
    return y, change


def _data(train, dt):
    import torch

    n_traj, n_rows, dim = train.shape
    x = torch.as_tensor(train)
    x_start, x_end = x[:, :-1].reshape(-1, dim), x[:, 1:].reshape(-1, dim)
    t = (torch.arange(n_rows - 1, dtype=x.dtype) * dt).repeat(n_traj).reshape(-1, 1)
    h = torch.full_like(t, dt)
    return (x_start, x_end, t, t + h, h, torch.zeros_like(x_start)), (x_end - x_start) / dt


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the .npz file written by benchmarks/dissipation.py")
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16, help="hidden width of HamiltonianNN")
    parser.add_argument("--integrator", default="midpoint", help="phlearn training integrator")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import numpy as np
    import phlearn
    import phlearn.phnns as phnn
    import torch

    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)
    arrays = np.load(args.data)
    dt, gamma = float(arrays["dt"]), float(arrays["gamma"])
    train, test = arrays["train"], arrays["test"]
    traindata = _data(train, dt)

    torch.manual_seed(args.seed)
    model = phnn.PseudoHamiltonianNN(
        2, hamiltonian_est=phnn.HamiltonianNN(2, args.hidden),
        dissipation_est=phnn.R_estimator([False, True], ttype=torch.float64), ttype=torch.float64)
    n_params = sum(p.numel() for p in model.parameters())
    t0 = time.perf_counter()
    model, _ = phnn.train(model, args.integrator, traindata, epochs=args.epochs,
                          batch_size=args.batch_size, verbose=False)
    train_s = time.perf_counter() - t0
    model.train(False)
    # (no torch.no_grad: the right-hand side differentiates H with autograd)
    final_loss = float(torch.mean((model.time_derivative(args.integrator, *traindata[0]).detach()
                                   - traindata[1]) ** 2))

    x = torch.as_tensor(test[:, :-1].reshape(-1, 2))
    y = test[:, 1:].reshape(-1, 2)
    t = (torch.arange(test.shape[1] - 1, dtype=x.dtype) * dt).repeat(test.shape[0]).reshape(-1, 1)
    step, residual = _step(model, args.integrator, x, t, dt)
    step = step.numpy()

    n_points = test.shape[1]
    states = [torch.as_tensor(test[:, 0])]
    for k in range(n_points - 1):
        tk = torch.full((test.shape[0], 1), k * dt)
        nxt, change = _step(model, args.integrator, states[-1], tk, dt)
        states.append(nxt)
        residual = max(residual, change)
    rollout_integrator = torch.stack(states, axis=1).numpy()
    t_sample = np.arange(n_points) * dt
    t1 = time.perf_counter()
    rollout_ivp = np.stack([model.simulate_trajectory(False, t_sample, x0=x0)[0] for x0 in test[:, 0]])
    ivp_s = time.perf_counter() - t1

    damping = float(np.abs(model.R.get_parameters())[0])
    result = {
        "peer": "phlearn", "phlearn": getattr(phlearn, "__version__", None) or _version("phlearn"),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "network": f"PseudoHamiltonianNN(HamiltonianNN(2, {args.hidden}), R_estimator([False, True]))",
        "parameters": n_params, "integrator": args.integrator, "epochs": args.epochs,
        "batch_size": args.batch_size, "n_train_pairs": int(traindata[1].shape[0]),
        "n_test_pairs": int(x.shape[0]), "rollout_steps": n_points - 1, "train_s": train_s,
        "final_loss": final_loss, "damping": damping, "damping_error": abs(damping - gamma) / gamma,
        "one_step_rel": _rel(step, y), "one_step_mse": float(np.mean((step - y) ** 2)),
        "rollout_rel": _rel(rollout_integrator, test), "rollout_rel_solve_ivp": _rel(rollout_ivp, test),
        "solve_ivp_s": ivp_s, "step_residual": residual,
    }
    print(json.dumps(result))
    return result


def _version(name: str):
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
