r"""A learned integrator on the codes of a manifold cotangent lift (see
`geomlearn.cotangent_lift`).

**Training the integrator alone.** `fit(model, data)` trains a `LiftedIntegrator` on its
code pairs, but differentiates the lift's (constant) arrays too, with zero gradients;
under Levenberg–Marquardt, whose cost grows with the square of the parameter count,
train the integrator alone and put it back:

```python
model = gl.LiftedIntegrator(400, 2, key=jax.random.PRNGKey(0)).with_lift(data)
x, y, _ = model.training_samples(data, model.task())
net, history = gl.fit(model.integrator_net, (x, y), epochs=400,
                      optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(1))
model = model.with_integrator(net)
```

**Pairs around the trajectory.** On one trajectory the codes lie on a curve, and a
network trained on its pairs alone learns the map near that curve only;
`LiftedIntegrator.reduced_system_pairs` adds pairs around it from the lift's reduced
Hamiltonian system (the command line adds 4000 of them when `reduced_dim` is 4 or more:
a loop in the plane keeps nearby codes near it under an area-preserving map, a loop in
$\mathbb{R}^{2n \ge 4}$ does not).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._typing import Array, Float, PRNGKeyArray
from .._validation import check_even, check_int
from ..cotangent_lift import ManifoldCotangentLift, manifold_cotangent_lift
from ..data import TrajectoryData
from ..integrators import integrate
from ..reduction import ReducedHamiltonianSystem
from ._latent import AbstractLatentIntegrator
from ._task import Task, check_data_dim, sample_arrays
from .sympnet import GSympNet

__all__ = ["LiftedIntegrator"]


class LiftedIntegrator(AbstractLatentIntegrator):
    r"""A learned symplectic integrator in the reduced space of a manifold cotangent lift.

    The reduction $\Psi^{e,d}$ is a
    [`ManifoldCotangentLift`][geomlearn.cotangent_lift.ManifoldCotangentLift] (the
    centred PSD bent along its leading direction, its decoder a symplectic immersion for
    every coefficient value), fitted to snapshots in closed form by
    [`with_lift`][geomlearn.models.LiftedIntegrator.with_lift] — it is not trained. The
    integrator $\mathcal{N}$ is a [`GSympNet`][geomlearn.models.GSympNet] on
    $\mathbb{R}^{2n}$ trained on pairs of codes `stride` $= S$ steps of the data apart,

    $$ \mathcal{N}(\Psi^e(x_k)) \approx \Psi^e(x_{k+S}), $$

    so **one application of the model advances $S$ steps of the data**: the full-space
    map is $z \mapsto \Psi^d(\mathcal{N}(\Psi^e(z)))$ with time step $S\,\Delta t$. The
    rollout encodes once, iterates $\mathcal{N}$ in $\mathbb{R}^{2n}$ (a cost
    independent of the full dimension) and decodes each state;
    [`rollout_at`][geomlearn.models.LiftedIntegrator.rollout_at] decodes only the
    states asked for.

    **Training.** `training_samples` gives the code pairs $(\Psi^e(x_k),
    \Psi^e(x_{k+S}))$ of each trajectory (never across two); `predict` is
    $\mathcal{N}$, `target` the later code (the module documentation shows how to train
    the integrator alone, and why to add pairs from `reduced_system_pairs`). Before
    `with_lift` the lift is the coordinate reduction onto the first $n$ positions and
    momenta (a linear symplectic immersion, unbent).

    `structure` is `"none"`: the full-space step has rank `reduced_dim`. The reduced map
    $\mathcal{N}$ is symplectic for every parameter value (`reduced_structure`) and the
    decoder is a symplectic immersion (`geomlearn.evaluation.check_immersion`).

    **Arguments:** `full_dim` $= 2N$, `reduced_dim` $= 2n$ (even, below `full_dim`;
    default 2); `n_features` (the lift's bumps, default 16); `stride` (data steps per
    application, default 8); `n_layers = 8`, `width = 16`, `activation = "tanh"` (of
    $\mathcal{N}$); `key`, `dtype`. Every argument is stored, so `geomlearn.save`/`load`
    round-trip the model, the fitted lift included.
    """

    lift: ManifoldCotangentLift
    integrator_net: GSympNet
    full_dim: int = eqx.field(static=True)
    reduced_dim: int = eqx.field(static=True)
    n_features: int = eqx.field(static=True)
    stride: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)

    def __init__(self, full_dim: int, reduced_dim: int = 2, *, n_features: int = 16,
                 stride: int = 8, n_layers: int = 8, width: int = 16,
                 activation: Callable | str = "tanh", key: PRNGKeyArray, dtype=None):
        self.full_dim = check_even("full_dim", check_int("full_dim", full_dim, minimum=2))
        self.reduced_dim = check_even("reduced_dim", check_int("reduced_dim", reduced_dim, minimum=2))
        if self.reduced_dim >= self.full_dim:
            raise ValueError(f"reduced_dim must be below full_dim={self.full_dim}, got {reduced_dim}")
        self.n_features = check_int("n_features", n_features, minimum=2)
        self.stride = check_int("stride", stride, minimum=1)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.width = check_int("width", width, minimum=1)
        self.activation = activation
        self.integrator_net = GSympNet(self.reduced_dim, n_layers=self.n_layers, width=self.width,
                                       activation=activation, key=key, dtype=dtype)
        dt = jax.tree_util.tree_leaves(eqx.filter(self.integrator_net, eqx.is_inexact_array))[0].dtype
        N, n = self.full_dim // 2, self.reduced_dim // 2
        self.lift = ManifoldCotangentLift(jnp.eye(N, n, dtype=dt), jnp.zeros(2 * N, dt),
                                          jnp.zeros((self.n_features, N), dt), 0.0, 1.0)

    # ----------------------------------------------------------------- the two parts

    def with_lift(self, snapshots, *, margin: float = 0.1, ridge: float = 0.0) -> LiftedIntegrator:
        """This model with its lift fitted to `snapshots` (a `TrajectoryData`, all of
        whose states are used, or an array `(M, full_dim)`) by
        [`manifold_cotangent_lift`][geomlearn.cotangent_lift.manifold_cotangent_lift]
        (`reduced_dim`, `n_features`, `margin`, `ridge`); the integrator is kept."""
        if isinstance(snapshots, TrajectoryData):
            check_data_dim(self, snapshots, "snapshots")
            X = np.concatenate([np.asarray(t) for t in snapshots.trajectories])
        else:
            X = np.asarray(snapshots)
            if X.ndim != 2 or X.shape[1] != self.full_dim:
                raise ValueError(f"snapshots: expected states of shape (M, {self.full_dim}), got {X.shape}")
        lift = manifold_cotangent_lift(X, self.reduced_dim, n_features=self.n_features,
                                       margin=margin, ridge=ridge)
        dt = self.lift.basis.dtype
        lift = jax.tree_util.tree_map(lambda a: jnp.asarray(a, dt) if eqx.is_inexact_array(a) else a, lift)
        return eqx.tree_at(lambda m: m.lift, self, lift)

    def with_integrator(self, integrator_net: GSympNet) -> LiftedIntegrator:
        """This model with the reduced integrator `integrator_net` (a `GSympNet` of
        `reduced_dim` with this model's `n_layers`, `width` and `activation`, e.g. one
        trained by `fit` on the code pairs)."""
        old = self.integrator_net
        if (not isinstance(integrator_net, GSympNet)
                or jax.tree_util.tree_structure(integrator_net) != jax.tree_util.tree_structure(old)
                or any(a.shape != b.shape for a, b in zip(jax.tree_util.tree_leaves(integrator_net),
                                                          jax.tree_util.tree_leaves(old)))):
            raise ValueError(
                f"integrator_net must be a GSympNet({self.reduced_dim}, n_layers={self.n_layers}, "
                f"width={self.width}, activation={self.activation!r}) like the model's, got "
                f"{type(integrator_net).__name__}")
        return eqx.tree_at(lambda m: m.integrator_net, self, integrator_net)

    def reduced_system_pairs(self, system, data, *, n_samples: int, key: PRNGKeyArray,
                             spread: float = 0.05, method: str = "implicit_midpoint"):
        r"""`(x, y)`, each `(n_samples, reduced_dim)`: codes near the data's and where the
        lift's reduced Hamiltonian system takes them in `stride` steps of the data's
        $\Delta t$ — training pairs off the curve of the data's own codes.

        The codes of one trajectory lie on a curve in $\mathbb{R}^{2n}$; a network
        trained on them alone learns the map near that curve only, and its rollout can
        leave it (on the Toda bump at $2n = 4$ it diverges). The reduced system
        $\dot y = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(y)$
        ([`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem] of
        `system` and the lift), whose solution follows the full one where the lift's
        image holds the data, defines the map around the curve too: $x$ are the codes of
        `n_samples` states drawn from `data` (a `TrajectoryData`) plus
        $\mathcal{N}(0, (\text{spread}\,\sigma_i)^2)$ in component $i$ ($\sigma_i$ the
        codes' standard deviation), $y$ the reduced system's state `stride` steps of
        `method` later. Fit the lift first (`with_lift`).
        """
        n = check_int("n_samples", n_samples, minimum=1)
        spread = float(spread)
        if not (np.isfinite(spread) and spread >= 0):
            raise ValueError(f"spread must be finite and >= 0, got {spread}")
        check_data_dim(self, data, "data")
        if system.dim != self.full_dim:
            raise ValueError(f"system has dim={system.dim}, the model full_dim={self.full_dim}")
        codes = jax.vmap(self.lift.encode)(jnp.concatenate(list(data.trajectories)))
        k_pick, k_noise = jax.random.split(key)
        picked = codes[jax.random.randint(k_pick, (n,), 0, codes.shape[0])]
        noise = jax.random.normal(k_noise, picked.shape, picked.dtype)
        x = picked + spread * jnp.std(codes, axis=0)[None, :] * noise
        path = integrate(ReducedHamiltonianSystem(system, self.lift), x, data.dt, self.stride,
                         method=method)
        return x, path[:, -1]

    def encode(self, z: Float[Array, " 2N"]) -> Float[Array, " 2n"]:
        return self.lift.encode(z)

    def decode(self, y: Float[Array, " 2n"]) -> Float[Array, " 2N"]:
        return self.lift.decode(y)

    # ---------------------------------------------------------------------- protocol

    def training_samples(self, data, task: Task, *, what: str = "data"):
        r"""`(x, y, task)`: the code pairs $(\Psi^e(x_k), \Psi^e(x_{k+S}))$, `(M, 2n)`
        each, of every trajectory of a `TrajectoryData` (never across two), or of a tuple
        `(inputs, targets)` of full states `(M, full_dim)` that lie `stride` steps apart
        (encoded here) or of codes `(M, reduced_dim)` (used as they are)."""
        arrays = sample_arrays(data, what)
        encode = jax.jit(jax.vmap(self.lift.encode))
        if arrays is None:
            check_data_dim(self, data, what)
            S = self.stride
            parts = [(t[:-S], t[S:]) for t in data.trajectories if t.shape[0] > S]
            if not parts:
                raise ValueError(f"{what}: no trajectory has more than stride={S} steps, so "
                                 f"there are no pairs {S} steps apart (lengths {data.lengths})")
            x = jnp.concatenate([p[0] for p in parts])
            y = jnp.concatenate([p[1] for p in parts])
            return encode(x), encode(y), task
        x, y = arrays
        if x.ndim == 2 and x.shape[1] == self.full_dim:
            return encode(x), encode(y), task
        if x.ndim != 2 or x.shape[1] != self.reduced_dim:
            raise ValueError(f"{what}: expected full states (M, {self.full_dim}) or codes "
                             f"(M, {self.reduced_dim}), got {x.shape}")
        return x, y, task

    def predict(self, x, task: Task):
        """$\\mathcal{N}$ of one code."""
        return self.integrator_net(x)

    def target(self, y, task: Task):
        return y

    def describe_step(self, task: Task) -> str:
        return (f"z ↦ decode(GSympNet(encode(z))) through the {self.reduced_dim}-dimensional "
                f"codes of a manifold cotangent lift; one step is {self.stride} steps of the "
                "data (rolled out in the codes)")
