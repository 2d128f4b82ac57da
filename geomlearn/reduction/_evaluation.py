r"""How good a reduction is: `evaluate_reduction(reduction, system, reference)` and the
symplectic-immersion check of its decoder, `check_immersion`.

The mathematics (the reductions, the reduced system and the error measures) is in the
other modules of `geomlearn.reduction`; this one runs them against a full solution. Its
names are published by `geomlearn.evaluation`.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._format import aligned_table, fmt
from .._typing import Array, Float
from ..data import TrajectoryData
from ..evaluation._timing import timed, timed_interleaved
from ..integrators import AbstractIntegrator, IntegrationError, as_integrator, integrate
from ._latent import AbstractLatentIntegrator
from ._psd import proper_symplectic_decomposition
from ._reduced_system import (
    ReducedHamiltonianSystem,
    immersion_residual,
    latent_vector_field_error,
    loop_action,
    orbit_period,
    projection_error_parts,
)

__all__ = [
    "IMMERSION_TOLERANCE",
    "ImmersionCheck",
    "check_immersion",
    "ReductionEvaluation",
    "evaluate_reduction",
]

IMMERSION_TOLERANCE = 1e-10
"""The pass/fail tolerance of `check_immersion` for a well-conditioned decoder Jacobian;
it grows with the condition number, as in `geomlearn.check_structure`."""


@dataclasses.dataclass(frozen=True)
class ImmersionCheck:
    r"""The verdict of [`check_immersion`][geomlearn.evaluation.check_immersion]: is the
    decoder a symplectic immersion at the sample points?

    **Fields:** `map` (what was checked), `residual` (the largest
    $\lVert D^\top\mathbb{J}_{2N}D - \mathbb{J}_{2n}\rVert_F/\lVert\mathbb{J}_{2n}\rVert_F$
    over the points), `condition` (the largest condition number $\sigma_1/\sigma_{2n}$
    of $D = D\Psi^d(y)$), `tolerance`, `n_points`.
    """

    map: str
    residual: float
    condition: float
    tolerance: float
    n_points: int

    @property
    def passed(self) -> bool:
        """The residual is finite and at most `tolerance`."""
        return bool(np.isfinite(self.residual) and self.residual <= self.tolerance)

    def report(self, *, title: str) -> str:
        """The check as text (what `geomlearn check` prints)."""
        verdict = "PASS" if self.passed else "FAIL"
        return "\n".join([
            f"{title}: {self.map}; it claims a symplectic immersion, (DΨ_dec)ᵀ J DΨ_dec = J. "
            f"Residual at {self.n_points} points (encoded first; condition number of DΨ_dec "
            f"≤ {self.condition:.3g}; tolerance {self.tolerance:.2g})",
            f"  immersion      {self.residual:.3e}   {verdict}",
            verdict,
        ])


def check_immersion(reduction, points: Float[Array, "B 2N"]) -> ImmersionCheck:
    r"""Check that `reduction`'s decoder is a symplectic immersion at the sample points.

    Each full state $z$ of `points` is encoded, $y = \Psi^e(z)$, and the residual
    $\lVert D^\top\mathbb{J}_{2N}D - \mathbb{J}_{2n}\rVert_F / \lVert\mathbb{J}_{2n}\rVert_F$
    of $D = D\Psi^d(y)$ (forward-mode Jacobian) is computed in the points' dtype. As in
    `geomlearn.check_structure`, rounding perturbs $D^\top\mathbb{J}D$ relatively by
    about $N\varepsilon\kappa(D)$, so the tolerance is
    $\max(10^{-10},\ 64\cdot 2N\,\varepsilon\,\kappa)$ with $\kappa$ the largest
    condition number of $D$ at the points (for an immersion $\kappa \ge 1$).

    **Arguments:** `reduction` (a [`PSD`][geomlearn.reduction.PSD], a
    [`SymplecticAutoencoder`][geomlearn.reduction.SymplecticAutoencoder], any module with
    `encode`, `decode`, `full_dim`, `reduced_dim`); `points` `(B, full_dim)`.

    **Returns:** an [`ImmersionCheck`][geomlearn.evaluation.ImmersionCheck].
    """
    points = jnp.asarray(points)
    if points.ndim != 2 or points.shape[-1] != reduction.full_dim:
        raise ValueError(
            f"points must be full states of shape (B, {reduction.full_dim}), got {points.shape}"
        )

    def one(z):
        y = reduction.encode(z)
        s = jnp.linalg.svd(jax.jacfwd(reduction.decode)(y), compute_uv=False)
        return immersion_residual(reduction.decode, y), s[0] / s[-1]

    res, cond = (np.asarray(a, dtype=np.float64) for a in jax.jit(jax.vmap(one))(points))
    condition = float(np.max(cond))
    eps = float(jnp.finfo(points.dtype).eps)
    tolerance = (max(IMMERSION_TOLERANCE, 64 * reduction.full_dim * eps * condition)
                 if np.isfinite(condition) else IMMERSION_TOLERANCE)
    return ImmersionCheck(
        map=(f"the decoder Ψ_dec: ℝ^{reduction.reduced_dim} → ℝ^{reduction.full_dim} of "
             f"{type(reduction).__name__} (a reduction has no iterated map)"),
        residual=float(np.max(res)), condition=condition, tolerance=float(tolerance),
        n_points=int(points.shape[0]),
    )


def _relative_rows(A, B) -> np.ndarray:
    """$\\lVert A_t - B_t\\rVert / \\lVert B_t\\rVert$ for every row `t`."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return np.linalg.norm(A - B, axis=-1) / np.linalg.norm(B, axis=-1)


def _relative_all(A, B) -> float:
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    return float(np.linalg.norm(A - B) / np.linalg.norm(B))


class ReductionEvaluation(dict):
    r"""What [`evaluate_reduction`][geomlearn.evaluation.evaluate_reduction] returns: the
    JSON-serialisable metrics as a `dict`, with the arrays behind them as attributes.

    **Keys:** `"model"`, `"system"`, `"structure"`, `"full_dim"`, `"reduced_dim"`,
    `"n_steps"`, `"dt"`, `"reference_method"`;

    - errors `{"t=…": e, …, "all": e}`: `"projection_error"`, `"psd_projection_error"`
      (plain PSD), `"centred_psd_projection_error"`, `"reduction_error"`,
      `"psd_reduction_error"` (centred PSD); and `"projection_error_q"`,
      `"projection_error_p"`;
    - over time: `"reduction_error_mean"`, `"reduction_error_max"`,
      `"psd_reduction_error_mean"`, `"psd_reduction_error_max"` (centred PSD),
      `"plain_psd_reduction_error_mean"`, `"plain_psd_reduction_error_max"`;
    - `"period"`, `"full_action"`, `"code_loop_action"` (`None` for data that do not
      return); `"latent_vector_field_error"`
      (`geomlearn.reduction.latent_vector_field_error` on the data);
    - `"reduction_failed"` (`None` or why), `"reduced_energy_drift"`,
      `"immersion_residual"`, `"immersion_points"`, `"immersion_passed"`;
    - `"reduced_seconds"`, `"full_order_seconds"`, `"speedup"` and its alias
      `"online_speedup"` (full-order over reduced wall time);
    - with a latent integrator: `"latent_stride"`, `"latent_steps"`,
      `"latent_error_mean"`, `"latent_error_max"`, `"latent_error_end"`,
      `"latent_seconds"`, `"latent_seconds_every"`, `"latent_online_speedup"` and
      `"latent_online_speedup_every"` (the full-order time over each).

    **Attributes:** `times` `(N,)`; `full` (the full solution $X$, `(N, 2N)`);
    `projected` ($\Psi^d(\Psi^e(X))$); `reduced` (the reduced solution $Y$ `(N, 2n)`,
    `None` when its integration failed) and `decoded` ($\Psi^d(Y)$ or `None`); `series`,
    per time, `{"projection", "psd_projection", "centred_psd_projection", "reduction",
    "psd_reduction", "plain_psd_reduction", "latent"}` relative errors (`(N,)` arrays; a
    reduction series is `None` when its integration failed; `"psd_reduction"` is the
    centred PSD's, `"plain_psd_reduction"` the plain PSD's; `"latent"` the learned latent
    integrator's at every `stride`-th time, `None` without one).
    """

    def __init__(self, metrics, *, times, full, projected, reduced, decoded, series):
        super().__init__(metrics)
        self.times, self.full, self.projected = times, full, projected
        self.reduced, self.decoded, self.series = reduced, decoded, series

    def summary(self, *, title: str, extra=(), metrics=None) -> str:
        """An aligned text table of the metrics (what `geomlearn train` prints)."""
        m = self if metrics is None else metrics

        def at(errors):
            return "   ".join(f"{k}: {fmt(v)}" for k, v in errors.items())

        n = m["reduced_dim"]
        rows = list(extra) + [
            ("projection error", at(m["projection_error"])),
            ("  of q, of p", f"{fmt(m.get('projection_error_q'))}, {fmt(m.get('projection_error_p'))} "
                             "(each relative to its variation about the mean)"),
            (f"PSD (2n = {n}) proj.", at(m["psd_projection_error"])),
            ("centred PSD proj.", at(m.get("centred_psd_projection_error", {}))),
            ("reduction error", at(m["reduction_error"]) if m["reduction_failed"] is None
             else f"the reduced integration failed: {m['reduction_failed']}"),
            ("  over the horizon", f"mean {fmt(m.get('reduction_error_mean'))}, max "
                                   f"{fmt(m.get('reduction_error_max'))}; centred PSD mean "
                                   f"{fmt(m.get('psd_reduction_error_mean'))}, max "
                                   f"{fmt(m.get('psd_reduction_error_max'))}; plain PSD mean "
                                   f"{fmt(m.get('plain_psd_reduction_error_mean'))}"),
            ("loop action", _action_row(m)),
            ("latent field error", f"{fmt(m.get('latent_vector_field_error'))} (‖J∇(H∘Ψ_dec) − "
                                   "d/dt Ψ_enc(x)‖/‖d/dt Ψ_enc(x)‖ on the data)"),
            ("reduced energy", f"drift of H∘Ψ_dec along the reduced solution "
                               f"{fmt(m['reduced_energy_drift'])}"),
            ("immersion residual", f"{fmt(m['immersion_residual'])} (‖DᵀJD − J‖/‖J‖ of the "
                                   f"decoder at {m['immersion_points']} encoded data states)"),
            ("online phase", f"reduced implicit midpoint {fmt(m['reduced_seconds'])} s, full "
                             f"order {fmt(m['full_order_seconds'])} s ({m['n_steps']} steps; "
                             f"speed-up {fmt(m.get('online_speedup'))} at mean error "
                             f"{fmt(m.get('reduction_error_mean'))})"),
        ]
        if m.get("latent_error_mean") is not None:
            rows.append(("latent integrator", (
                f"{m['latent_steps']} applications of {m['latent_stride']} steps: mean error "
                f"{fmt(m['latent_error_mean'])}, max {fmt(m['latent_error_max'])}; "
                f"{fmt(m['latent_seconds'])} s to the final state (speed-up "
                f"{fmt(m.get('latent_online_speedup'))}), {fmt(m['latent_seconds_every'])} s "
                f"decoding every state ({fmt(m.get('latent_online_speedup_every'))})")))
        return aligned_table(title, rows)


def _action_row(m) -> str:
    if m.get("full_action") is None:
        return "the data do not return to their initial state (no period, no loop action)"
    return (f"∮p̃ dq̃ of the encoded orbit {fmt(m.get('code_loop_action'))} against ∮p·dq "
            f"{fmt(m.get('full_action'))} of the full one over one period T = {fmt(m.get('period'))}")


def _horizons(n_steps: int) -> list[int]:
    """The steps at 1/8, 1/4, 1/2 and all of the horizon (distinct, at least 1)."""
    return sorted({max(1, round(n_steps * f)) for f in (0.125, 0.25, 0.5, 1.0)})


def _full_solution(reduction, system, reference, horizons):
    """`(X, dt, horizons)`: the first reference trajectory, its time step and the checked
    horizons."""
    if not isinstance(reference, TrajectoryData):
        raise TypeError(
            f"reference must be a TrajectoryData (the reduced integration needs its dt), "
            f"got {type(reference).__name__}"
        )
    if reduction.full_dim != system.dim:
        raise ValueError(
            f"the reduction has full_dim={reduction.full_dim}, the system dim={system.dim}"
        )
    X = jnp.asarray(reference.states)[0]
    n_steps = int(X.shape[0]) - 1
    if n_steps < 1:
        raise ValueError("the reference trajectory needs at least 2 states")
    horizons = _horizons(n_steps) if horizons is None else [int(h) for h in horizons]
    if any(not 1 <= h <= n_steps for h in horizons):
        raise ValueError(f"horizons must be between 1 and {n_steps}, got {horizons}")
    return X, float(reference.dt), horizons


def _reduced_solution(reduction, system, X, dt, integrator):
    """`(Y, decoded, solve, energy drift, failure)` of the reduced system integrated
    from the encoded first state (`solve()` repeats that integration, for timing); all
    but the failure message `None` when it failed."""
    reduced_system = ReducedHamiltonianSystem(system, reduction)
    y0 = reduction.encode(X[0])

    def solve():
        return integrate(reduced_system, y0, dt, X.shape[0] - 1, method=integrator)

    try:
        Y = solve()
    except IntegrationError as e:
        return None, None, None, None, str(e)
    decoded = jax.jit(jax.vmap(reduction.decode))(Y)
    H = np.asarray(jax.jit(jax.vmap(reduced_system.hamiltonian))(Y), dtype=np.float64)
    drift = float(np.max(np.abs(H - H[0])) / max(abs(H[0]), np.finfo(np.float64).tiny))
    return Y, decoded, solve, drift, None


def _loop_actions(reduction, X, dt):
    """`(period, full action, code action)` over the first period of `X` (`None`s when
    `X` does not return to its initial state)."""
    K = orbit_period(X)
    if K is None:
        return None, None, None
    codes = jax.jit(jax.vmap(reduction.encode))(X[: K + 1])
    return K * dt, loop_action(X[: K + 1]), loop_action(codes)


def _psd_baselines(system, X, dt, reduced_dim, integrator):
    """The centred and the plain PSD of `X` of size `reduced_dim`: `{name: (projected,
    decoded reduced solution or None)}`."""
    out = {}
    for name, centred in (("centred", True), ("plain", False)):
        psd = proper_symplectic_decomposition(X, reduced_dim, centred=centred)
        _, decoded, _, _, _ = _reduced_solution(psd, system, X, dt, integrator)
        out[name] = (jax.vmap(psd)(X), decoded)
    return out


_LATENT_REPEATS = 25  # timed calls of a latent rollout (their median is reported)
# Rounds of the interleaved timing of the full and the reduced integration (a few tenths
# of a second each; a single call varies by tens of per cent, so the median is reported).
_SOLVE_REPEATS = 5


def _latent_online_phase(reduction, X):
    """`({metrics}, errors per produced state or None)` of a reduction that carries a
    learned latent integrator (an `AbstractLatentIntegrator`: `ReducedIntegrator`,
    `LiftedIntegrator`), `stride` data steps per application: its rollout from the
    encoded first state over the horizon, compared with every `stride`-th state of `X`;
    timed (median of 25 compiled calls) with only the final state decoded and with every
    produced state decoded. `({}, None)` for a reduction without one."""
    if not isinstance(reduction, AbstractLatentIntegrator):
        return {}, None
    net = reduction.integrator_net
    # data steps per application: a `LiftedIntegrator`'s `stride` (the latent base
    # declares none; every other latent integrator steps once per data step)
    S = int(getattr(reduction, "stride", 1))
    n_apply = (int(X.shape[0]) - 1) // S
    if n_apply < 1:
        return {}, None
    # the final state alone: a loop that keeps one code, not the whole latent trajectory
    last = jax.jit(lambda z: reduction.decode(
        jax.lax.fori_loop(0, n_apply, lambda _, y: net(y), reduction.encode(z))))
    every = jax.jit(lambda z: jax.vmap(reduction.decode)(
        reduction.reduced_rollout(reduction.encode(z), n_apply + 1)))
    z0 = jax.block_until_ready(X[0])  # sliced once: a slice in the timed call costs as much as the rollout
    # 25 calls of about a millisecond each; their median still varies by tens of per cent
    # from one compilation to the next
    z_end, last_seconds = timed(lambda: last(z0), repeats=_LATENT_REPEATS)
    Z, every_seconds = timed(lambda: every(z0), repeats=_LATENT_REPEATS)
    rows = _relative_rows(Z, X[::S][: n_apply + 1])
    end = _relative_rows(z_end[None], X[n_apply * S][None])[0]
    return {"latent_stride": S, "latent_steps": n_apply,
            "latent_error_mean": float(np.mean(rows)), "latent_error_max": float(np.max(rows)),
            "latent_error_end": float(end), "latent_seconds": last_seconds,
            "latent_seconds_every": every_seconds}, rows


def _mean_max(series):
    if series is None:
        return None, None
    return float(np.mean(series)), float(np.max(series))


def evaluate_reduction(
    reduction,
    system,
    reference,
    *,
    horizons=None,
    n_immersion_points: int = 8,
    method: str | AbstractIntegrator = "implicit_midpoint",
) -> ReductionEvaluation:
    r"""Measure a reduction (a trained autoencoder, a PSD, a latent integrator) against
    a full solution $X = (x_0, \dots, x_K)$: the first trajectory of `reference`.

    - **Projection error** at step $k$: $\lVert\Psi^d(\Psi^e(x_k)) - x_k\rVert /
      \lVert x_k\rVert$, and $\lVert\Psi^d(\Psi^e(X)) - X\rVert_F / \lVert X\rVert_F$
      over all states (`"all"`); split into positions and momenta, each relative to its
      variation about the mean (`geomlearn.reduction.projection_error_parts`).
    - **Reduction error**: the [`ReducedHamiltonianSystem`][geomlearn.reduction.ReducedHamiltonianSystem]
      $\dot y = \mathbb{J}_{2n}\nabla(H\circ\Psi^d)(y)$ integrated from
      $y_0 = \Psi^e(x_0)$ for $K$ steps of $\Delta t$, decoded and compared with $X$ in
      the same way, and as the mean and maximum over time of the per-state error.
    - Both also for the plain and the centred PSD of the same reduced dimension fitted
      to $X$: the linear baselines.
    - **Loop action**: when $X$ returns to $x_0$ (`geomlearn.reduction.orbit_period`),
      $\oint p\cdot dq$ over that period and $\oint\tilde p\,d\tilde q$ of the codes
      $\Psi^e(x_k)$ (`geomlearn.reduction.loop_action`). A latent Hamiltonian flow
      behind a symplectic decoder can follow the data only if the two agree.
    - The relative drift of $\tilde H = H\circ\Psi^d$ along the reduced solution, the
      immersion residual at encoded data states, and the wall times of the reduced and
      the full-order integration (median of 5 compiled calls each, timed in turns).
    - A reduction with a **learned latent integrator** ([`ReducedIntegrator`][geomlearn.reduction.ReducedIntegrator],
      [`LiftedIntegrator`][geomlearn.reduction.LiftedIntegrator]; `stride` $S$ data steps
      per application) is rolled out in its latent space from $\Psi^e(x_0)$ for
      $\lfloor K/S\rfloor$ applications, each state compared with $x_{jS}$, and timed
      (median of 25 compiled calls) decoding the final state and every state.

    **Arguments:**

    - `reduction`; `system`: the full canonical system.
    - `reference`: a `TrajectoryData`, whose first trajectory and $\Delta t$ are used.
    - `horizons`: steps (default $K/8, K/4, K/2, K$, reported as times `"t=…"`).
    - `n_immersion_points`: the encoded states where the immersion is checked.
    - `method`: the integrator of the reduced system (an `AbstractIntegrator` or a name).

    **Returns:** a [`ReductionEvaluation`][geomlearn.evaluation.ReductionEvaluation] (its
    keys are listed there).
    """
    integrator = as_integrator(method)
    X, dt, horizons = _full_solution(reduction, system, reference, horizons)
    n_steps = int(X.shape[0]) - 1
    times = np.arange(n_steps + 1) * dt
    label = [f"t={times[h]:g}" for h in horizons]

    def table(A):
        if A is None:
            return {**{k: None for k in label}, "all": None}
        rows = _relative_rows(A, X)
        return {**{k: float(rows[h]) for k, h in zip(label, horizons)},
                "all": _relative_all(A, X)}

    P = jax.jit(jax.vmap(reduction))(X)
    Y, decoded, solve, drift, failed = _reduced_solution(reduction, system, X, dt, integrator)
    psds = _psd_baselines(system, X, dt, reduction.reduced_dim, integrator)
    series = {"projection": _relative_rows(P, X),
              "psd_projection": _relative_rows(psds["plain"][0], X),
              "centred_psd_projection": _relative_rows(psds["centred"][0], X)}
    for key, D in (("reduction", decoded), ("psd_reduction", psds["centred"][1]),
                   ("plain_psd_reduction", psds["plain"][1])):
        series[key] = None if D is None else _relative_rows(D, X)
    z0 = jax.block_until_ready(X[0])

    def full():
        return integrate(system, z0, dt, n_steps, method=integrator)

    if solve is None:
        (full_seconds,), reduced_seconds = timed_interleaved([full], _SOLVE_REPEATS), None
    else:
        full_seconds, reduced_seconds = timed_interleaved([full, solve], _SOLVE_REPEATS)
    idx = np.linspace(0, n_steps, min(int(n_immersion_points), n_steps + 1)).round().astype(int)
    check = check_immersion(reduction, X[idx])
    q_err, p_err = projection_error_parts(reduction, X)
    vf_err = float(jax.jit(lambda X: latent_vector_field_error(reduction, system, X))(X))
    period, full_action, code_action = _loop_actions(reduction, X, dt)
    speedup = None if reduced_seconds is None else full_seconds / reduced_seconds
    latent, series["latent"] = _latent_online_phase(reduction, X)
    if latent:
        latent["latent_online_speedup"] = full_seconds / latent["latent_seconds"]
        latent["latent_online_speedup_every"] = full_seconds / latent["latent_seconds_every"]
    metrics = {
        "model": type(reduction).__name__, "system": type(system).__name__,
        "structure": "symplectic immersion (decoder)",
        "full_dim": int(reduction.full_dim), "reduced_dim": int(reduction.reduced_dim),
        "n_steps": n_steps, "dt": dt,
        "projection_error": table(P), "psd_projection_error": table(psds["plain"][0]),
        "centred_psd_projection_error": table(psds["centred"][0]),
        "projection_error_q": float(q_err), "projection_error_p": float(p_err),
        "reduction_error": table(decoded), "psd_reduction_error": table(psds["centred"][1]),
        **dict(zip(("reduction_error_mean", "reduction_error_max"),
                   _mean_max(series["reduction"]))),
        **dict(zip(("psd_reduction_error_mean", "psd_reduction_error_max"),
                   _mean_max(series["psd_reduction"]))),
        **dict(zip(("plain_psd_reduction_error_mean", "plain_psd_reduction_error_max"),
                   _mean_max(series["plain_psd_reduction"]))),
        "period": period, "full_action": full_action, "code_loop_action": code_action,
        "latent_vector_field_error": vf_err,
        "reduction_failed": failed, "reduced_energy_drift": drift,
        "immersion_residual": check.residual, "immersion_points": check.n_points,
        "immersion_passed": check.passed,
        "reduced_seconds": reduced_seconds, "full_order_seconds": full_seconds,
        "speedup": speedup, "online_speedup": speedup,
        "reference_method": integrator.name,
        **latent,
    }
    return ReductionEvaluation(metrics, times=times, full=X, projected=P, reduced=Y,
                               decoded=decoded, series=series)
