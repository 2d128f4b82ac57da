"""The manifold cotangent lift: a symplectic immersion for every coefficient value (with
a negative control), an exact left inverse, the reduced dynamics of a bead on the
decoder's curve, and a reduction of the Toda bump that predicts where the PSD cannot."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.evaluation import check_immersion
from geomlearn.integrators import integrate
from geomlearn.reduction import (
    ManifoldCotangentLift,
    ReducedHamiltonianSystem,
    immersion_residual,
    loop_action,
    manifold_cotangent_lift,
    orbit_period,
    proper_symplectic_decomposition,
)
from geomlearn.systems import TodaLattice


def _random_lift(N, n, K, seed, *, momentum_reference=True):
    """A lift with random orthonormal basis, reference and large random coefficients."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(N, n)))
    reference = rng.normal(size=2 * N)
    if not momentum_reference:
        reference[N:] = 0.0
    coefficients = 3.0 * rng.normal(size=(K, N))
    return ManifoldCotangentLift(jnp.asarray(basis), jnp.asarray(reference), jnp.asarray(coefficients),
                                 0.2, 1.5)


@pytest.mark.parametrize("n", [1, 2])
def test_the_decoder_is_a_symplectic_immersion_for_any_coefficients(n):
    lift = _random_lift(12, n, 7, seed=n)
    ys = jnp.asarray(np.random.default_rng(5).normal(size=(6, 2 * n)))
    residuals = jax.vmap(lambda y: immersion_residual(lift.decode, y))(ys)
    assert float(jnp.max(residuals)) < 1e-13
    # encode ∘ decode = id (the encoder is an exact left inverse)
    np.testing.assert_allclose(jax.vmap(lift.encode)(jax.vmap(lift.decode)(ys)), ys, atol=1e-12)
    # the closed-form Jacobian is the derivative of the positions
    Q = ys[0, :n]
    np.testing.assert_allclose(lift.position_jacobian(Q), jax.jacfwd(lift.positions)(Q), atol=1e-12)
    assert check_immersion(lift, jax.vmap(lift.decode)(ys)).passed

    # negative control: momenta lifted without the inverse metric, p = p̄ + Df P
    def unlifted(y):
        q = lift.positions(y[:n])
        return jnp.concatenate([q, lift.reference[12:] + lift.position_jacobian(y[:n]) @ y[n:]])

    assert float(jnp.min(jax.vmap(lambda y: immersion_residual(unlifted, y))(ys))) > 1e-3


def test_the_reduced_system_is_a_bead_on_the_decoders_curve():
    """With p̄ = 0 the reduced Hamiltonian system of a one-dimensional lift is the motion
    of a bead on the curve f under the potential V: Lagrangian L = ½|f'(Q)|²Q̇² − V(f(Q)),
    so Q̇ = P/|f'|² and Ṗ = ½ (d|f'|²/dQ) Q̇² − ∇V(f(Q))·f'(Q). Computed here from the
    positions alone (automatic derivatives of f, not the decoder's closed forms)."""
    N = 12
    toda = TodaLattice(N)
    lift = _random_lift(N, 1, 9, seed=3, momentum_reference=False)
    reduced = ReducedHamiltonianSystem(toda, lift)

    def bead(y):
        Q, P = y[:1], y[1]
        df = jax.jacfwd(lift.positions)(Q)[:, 0]
        speed2 = lambda s: jnp.sum(jax.jacfwd(lift.positions)(s)[:, 0] ** 2)
        Qdot = P / (df @ df)
        force = -jax.grad(toda.potential)(lift.positions(Q)) @ df
        return jnp.array([Qdot, 0.5 * jax.grad(speed2)(Q)[0] * Qdot**2 + force])

    ys = jnp.asarray(np.random.default_rng(7).normal(size=(5, 2)))
    expected = jax.vmap(bead)(ys)
    np.testing.assert_allclose(jax.vmap(reduced.vector_field)(ys), expected, rtol=1e-10, atol=1e-12)
    # negative control: the same bead with the curve's bending ignored (the PSD's motion)
    flat = ManifoldCotangentLift(lift.basis, lift.reference, 0.0 * lift.coefficients, 0.2, 1.5)
    assert float(jnp.max(jnp.abs(jax.vmap(ReducedHamiltonianSystem(toda, flat).vector_field)(ys)
                                 - expected))) > 1e-3


@pytest.fixture(scope="module")
def toda_bump():
    toda = TodaLattice(40)
    X = integrate(toda, toda.default_initial_conditions(jnp.float64)[0], 0.1, 800)
    return toda, X


def _mean_reduction_error(toda, reduction, X):
    Y = integrate(ReducedHamiltonianSystem(toda, reduction), reduction.encode(X[0]), 0.1,
                  X.shape[0] - 1)
    Z = jax.vmap(reduction.decode)(Y)
    return float(jnp.mean(jnp.linalg.norm(Z - X, axis=1) / jnp.linalg.norm(X, axis=1)))


def test_on_the_toda_bump_the_lift_predicts_where_the_psd_cannot(toda_bump):
    """The bump's orbit runs back and forth along one path of positions; the lift bends
    the centred PSD's leading direction along it. Its reduced system at 2n = 2 follows the
    full solution (one and a half periods) with less than half the centred PSD's mean
    error, and its codes enclose the orbit's action ∮p·dq."""
    toda, X = toda_bump
    lift = manifold_cotangent_lift(X, 2)
    psd = proper_symplectic_decomposition(X, 2, centred=True)
    lifted, linear = _mean_reduction_error(toda, lift, X), _mean_reduction_error(toda, psd, X)
    assert lifted < 0.5 * linear, (lifted, linear)
    K = orbit_period(X)
    full = loop_action(X[: K + 1])
    codes = loop_action(jax.vmap(lift.encode)(X[: K + 1]))
    assert abs(codes - full) < 0.1 * abs(full), (codes, full)
    # negative control: the PSD's codes do not enclose it
    assert abs(loop_action(jax.vmap(psd.encode)(X[: K + 1])) - full) > 0.1 * abs(full)


def test_the_lift_is_evaluated_like_any_reduction(toda_bump):
    toda, X = toda_bump
    lift = manifold_cotangent_lift(X, 4, n_features=12)
    ev = gl.evaluate_reduction(lift, toda, gl.TrajectoryData(X[None], 0.1))
    assert ev["reduced_dim"] == 4 and ev["reduction_failed"] is None
    # at 2n = 4 on this small lattice: 0.10 against the centred PSD's 0.15
    assert ev["reduction_error_mean"] < ev["psd_reduction_error_mean"]
    assert ev["immersion_residual"] < 1e-12


def test_fitting_arguments_are_checked(toda_bump):
    _, X = toda_bump
    with pytest.raises(ValueError, match="n_features"):
        manifold_cotangent_lift(X, 2, n_features=1)
    with pytest.raises(ValueError, match="too few"):
        manifold_cotangent_lift(X[:5], 2, n_features=8)
    with pytest.raises(ValueError, match="finite"):
        manifold_cotangent_lift(X.at[3, 0].set(jnp.nan), 2)
    with pytest.raises(ValueError, match="margin"):
        manifold_cotangent_lift(X, 2, margin=-1.0)
    with pytest.raises(ValueError, match="do not move"):
        manifold_cotangent_lift(jnp.tile(X[:1], (20, 1)), 2)
    with pytest.raises(ValueError, match="shape"):
        manifold_cotangent_lift(X, 2).decode(jnp.zeros(3))
    with pytest.raises(ValueError, match="coefficients"):
        ManifoldCotangentLift(jnp.eye(4)[:, :1], jnp.zeros(8), jnp.zeros((1, 4)), 0.0, 1.0)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_basis_that_is_not_orthonormal_is_refused(dtype):
    """The decoder is a symplectic immersion only for an orthonormal basis: a stretched
    one is refused with its deviation ‖BᵀB − I‖ (its decoder, built around the check,
    fails the immersion); the same basis orthonormal passes in either dtype."""
    lift = _random_lift(12, 2, 7, seed=3)
    args = (lift.reference.astype(dtype), lift.coefficients.astype(dtype), 0.2, 1.5)
    stretched = lift.basis * jnp.array([[1.0, 1.1]], lift.basis.dtype)
    with pytest.raises(ValueError, match=r"‖BᵀB − I‖ = 0\.21"):
        ManifoldCotangentLift(stretched.astype(dtype), *args)
    bad = eqx.tree_at(lambda m: m.basis, lift, stretched)
    y = jnp.ones(4, lift.basis.dtype)
    assert float(immersion_residual(bad.decode, y)) > 1e-2
    good = ManifoldCotangentLift(lift.basis.astype(dtype), *args)
    assert float(immersion_residual(good.decode, jnp.ones(4, dtype))) < (
        1e-4 if dtype == jnp.float32 else 1e-12)
