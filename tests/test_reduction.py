"""Model reduction: the Toda lattice and linear wave, PSD, the reduced Hamiltonian system."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from typing import ClassVar

import equinox as eqx

import geomlearn as gl
from geomlearn.geometry import symplectic_matrix
from geomlearn.integrators import integrate
from geomlearn.reduction import (
    PSD,
    AbstractReduction,
    ReducedHamiltonianSystem,
    immersion_residual,
    latent_vector_field_error,
    loop_action,
    orbit_period,
    projection_error,
    projection_error_parts,
    proper_symplectic_decomposition,
    reduction_error,
    symplectic_inverse,
)
from geomlearn.cli import SYSTEMS
from geomlearn.systems import AbstractHamiltonianSystem, LinearWave, TodaLattice


_invariants_along = eqx.filter_jit(
    lambda system, zs: {name: jax.vmap(inv)(zs) for name, inv in system.invariants.items()})
_decoder_facts = eqx.filter_jit(  # the decoder's immersion residual at y, and Ψ_enc(Ψ_dec(y))
    lambda psd, y: (immersion_residual(psd.decode, y), psd.encode(psd.decode(y))))


@pytest.mark.parametrize("cls", [TodaLattice, LinearWave])
def test_large_systems_at_400_dims_keep_their_invariants(cls):
    system = cls()
    assert system.dim == 400 and SYSTEMS[{TodaLattice: "toda_lattice", LinearWave: "linear_wave"}[cls]] is cls
    z0 = system.default_initial_conditions(jnp.float64)
    assert z0.shape == (1, 400)
    for method in ("implicit_midpoint", "gauss_legendre4"):
        zs = integrate(system, z0[0], 0.1, 50, method=method)
        for name, vals in _invariants_along(system, zs).items():
            vals = np.asarray(vals)
            assert float(np.max(np.abs(vals - vals[0]))) <= 1e-9 * max(1.0, float(np.abs(vals[0]))), name


def test_toda_bump_initial_condition():
    toda = TodaLattice(n_particles=200)
    z0 = np.asarray(toda.default_initial_conditions(jnp.float64)[0])
    q, p = z0[:200], z0[200:]
    assert np.all(p == 0) and q.max() == pytest.approx(1.0, abs=1e-3) and q.min() == 0.0
    xi = np.linspace(-0.5, 0.5, 200)
    assert abs(xi[np.argmax(q)] + 0.15) < 0.01  # centred at -mu/2
    np.testing.assert_allclose(float(toda.hamiltonian(jnp.asarray(z0))),
                               0.64 * np.sum(np.exp(q - np.roll(q, -1))), rtol=1e-13)


def test_wave_travels_at_speed_c():
    wave = LinearWave(n_points=100, c=0.05)
    z0 = wave.default_initial_conditions(jnp.float64)[0]
    zs = integrate(wave, z0, 0.05, 200, method="gauss_legendre4")  # t = 10: shift 0.5
    q0, q1 = np.asarray(z0[:100]), np.asarray(zs[-1, :100])
    assert np.max(np.abs(q1 - np.roll(q0, 50))) < 0.05


def test_system_argument_errors():
    with pytest.raises(ValueError):
        TodaLattice(n_particles=1)
    with pytest.raises(ValueError):
        TodaLattice(alpha=-1.0)
    with pytest.raises(TypeError):
        LinearWave(n_points=2.5)


@pytest.fixture(scope="module")
def toda_data():
    toda = TodaLattice(n_particles=20)
    z0 = toda.default_initial_conditions(jnp.float64)[0]
    return toda, np.asarray(integrate(toda, z0, 0.1, 200))


@eqx.filter_jit
def _psd_immersion_facts(psd, ys):
    """The residual of the decoder matrix A, AᵀJA − J, that of the decoder at ones, the
    codes of the decoded `ys`, and A with its symplectic inverse."""
    A = psd.decoder_matrix()
    N, n = psd.full_dim // 2, psd.reduced_dim // 2
    res = jnp.linalg.norm(A.T @ symplectic_matrix(N, A.dtype) @ A - symplectic_matrix(n, A.dtype))
    return (res, immersion_residual(psd.decode, jnp.ones(2 * n, A.dtype)),
            jax.vmap(psd.encode)(jax.vmap(psd.decode)(ys)), A, symplectic_inverse(A))


@pytest.mark.parametrize("k", [2, 4, 8])
def test_psd_decoder_is_a_symplectic_immersion(toda_data, k):
    _, X = toda_data
    psd = proper_symplectic_decomposition(X, k)
    assert (psd.full_dim, psd.reduced_dim) == (40, k)
    res, at_ones, codes, A, inverse = _psd_immersion_facts(psd, X[:5, :k])
    assert float(res) <= 1e-12
    assert float(at_ones) <= 1e-12
    np.testing.assert_allclose(codes, X[:5, :k], atol=1e-12)  # encode ∘ decode = id
    np.testing.assert_allclose(inverse, np.asarray(A).T, atol=1e-14)


_projection_error = eqx.filter_jit(projection_error)


def test_psd_negative_control_non_orthonormal_basis(toda_data):
    _, X = toda_data
    basis = proper_symplectic_decomposition(X, 4).basis
    bad = PSD(np.asarray(basis) * np.array([[1.0, 1.1]]))
    assert float(_decoder_facts(bad, np.ones(4))[0]) > 1e-2
    # a generic (non cotangent-lift) linear map is not a symplectic immersion either
    M = np.random.default_rng(0).normal(size=(40, 4))
    assert float(jax.jit(lambda M, y: immersion_residual(lambda v: M @ v, y))(M, np.ones(4))) > 1e-2


def test_psd_error_decreases_with_size_and_matches_the_svd(toda_data):
    _, X = toda_data
    errs = [float(_projection_error(proper_symplectic_decomposition(X, k), X)) for k in (2, 4, 8, 16)]
    assert errs == sorted(errs, reverse=True) and errs[-1] < 0.05
    full = proper_symplectic_decomposition(X, 40)
    assert float(_projection_error(full, X)) <= 1e-12


def test_psd_errors():
    with pytest.raises(ValueError):
        proper_symplectic_decomposition(jnp.ones((5, 7)), 2)
    with pytest.raises(ValueError):
        proper_symplectic_decomposition(jnp.ones((5, 8)), 3)


@eqx.filter_jit
def _reduced_solution(system, reduction, X, y0=None):
    """The reduced solution Y from `y0` (default: the code of `X[0]`) on the grid of `X`
    (steps of 0.1): its energies, its reduction and projection errors against `X`, and per
    state the distance from `X` of the decoded Y and of the projection Ψ_dec∘Ψ_enc."""
    red = ReducedHamiltonianSystem(system, reduction)
    Y = integrate(red, reduction.encode(X[0]) if y0 is None else y0, 0.1, X.shape[0] - 1)
    return {"energy": jax.vmap(red.hamiltonian)(Y), "reduction": reduction_error(reduction, X, Y),
            "projection": projection_error(reduction, X),
            "reduced_rows": jnp.linalg.norm(jax.vmap(reduction.decode)(Y) - X, axis=1),
            "projected_rows": jnp.linalg.norm(jax.vmap(reduction)(X) - X, axis=1)}


@eqx.filter_jit
def _field_against_energy(system, reduction, z, v):
    """At y = Ψ_enc(z): −⟨f(y), v⟩ with f the reduced field, and the central difference of
    H∘Ψ_dec along J v (step 1e-5); the reduced system's initial state."""
    red = ReducedHamiltonianSystem(system, reduction)
    y = reduction.encode(z)
    Jv = symplectic_matrix(v.shape[0] // 2, jnp.float64) @ v
    fd = (red.hamiltonian(y + 1e-5 * Jv) - red.hamiltonian(y - 1e-5 * Jv)) / 2e-5
    return -jnp.dot(red.vector_field(y), v), fd, red.default_initial_conditions(jnp.float64)[0]


def test_reduced_system_vector_field_and_integration(toda_data):
    toda, X = toda_data
    psd = proper_symplectic_decomposition(X, 8)
    red = ReducedHamiltonianSystem(toda, psd)
    assert red.dim == 8 and red.canonical
    # the reduced field is J∇(H∘Ψ_dec): its pairing with any direction v is the derivative
    # of H∘Ψ_dec along J v (finite differences of the energy, not the same computation)
    pairing, fd, y0 = _field_against_energy(toda, psd, X[17], np.linspace(-1.0, 1.0, 8))
    np.testing.assert_allclose(pairing, fd, rtol=1e-8)
    solution = _reduced_solution(toda, psd, X, y0)
    H, e = np.asarray(solution["energy"]), float(solution["reduction"])
    assert float(np.max(np.abs(H - H[0]))) < 1e-6 * float(np.abs(H[0]))
    assert e >= float(solution["projection"]) * 0.5 and e < 0.2
    # with every mode the reduced solution is the full one
    full = proper_symplectic_decomposition(X, 40)
    assert float(_reduced_solution(toda, full, X)["reduction"]) <= 1e-9


def test_reduced_system_with_an_autoencoder(toda_data, key):
    toda, X = toda_data
    ae = eqx.filter_jit(lambda k: gl.SymplecticAutoencoder(
        40, 2, width=4, n_encoder_blocks=1, n_decoder_blocks=1, key=k, dtype=jnp.float64))(key())
    red = ReducedHamiltonianSystem(toda, ae)

    @eqx.filter_jit
    def left_inverse_and_defect(red, z):
        y = red.reduction.encode(z)
        D = jax.jacfwd(red.reduction.decode)(y)
        return symplectic_inverse(D) @ D, red.tangent_defect(y)

    left, defect = left_inverse_and_defect(red, X[3])
    # the symplectic inverse of the decoder's Jacobian is a left inverse (an immersion)
    np.testing.assert_allclose(left, np.eye(2), atol=1e-12)
    # a trained-or-not autoencoder's image is not invariant under the Toda flow
    assert float(defect) > 1e-3
    with pytest.raises(ValueError):
        ReducedHamiltonianSystem(TodaLattice(n_particles=10), ae)
    with pytest.raises(TypeError):
        ReducedHamiltonianSystem(gl.systems.RigidBody(), ae)


# ------------------------------------------- evaluate_reduction and check_immersion


def test_evaluate_reduction_measures_projection_and_reduction(toda_data, tmp_path):
    from geomlearn.evaluation import evaluate_reduction
    from geomlearn.plotting import reduction_report

    toda, X = toda_data
    data = gl.TrajectoryData(X[None], 0.1)
    psd = proper_symplectic_decomposition(X, 8)
    ev = evaluate_reduction(psd, toda, data)
    assert set(ev["projection_error"]) == {"t=2.5", "t=5", "t=10", "t=20", "all"}
    # the PSD baseline of the same size, fitted to the same states, is the reduction itself
    assert ev["psd_projection_error"] == pytest.approx(ev["projection_error"], rel=1e-10)
    solution = _reduced_solution(toda, psd, X, ev.reduced[0])
    assert ev["projection_error"]["all"] == pytest.approx(float(solution["projection"]), rel=1e-12)
    assert ev["reduction_error"]["all"] == pytest.approx(float(solution["reduction"]), rel=1e-10)
    decoded = np.asarray(ev.decoded)
    assert ev["reduction_error"]["t=20"] == pytest.approx(
        float(np.linalg.norm(decoded[200] - X[200]) / np.linalg.norm(X[200])), rel=1e-10)
    assert ev["reduction_failed"] is None and ev["reduced_energy_drift"] < 1e-6
    # the horizon's mean and max are of the per-state errors; the PSD baselines' likewise
    rows = np.linalg.norm(decoded - X, axis=1) / np.linalg.norm(X, axis=1)
    assert ev["reduction_error_mean"] == pytest.approx(float(np.mean(rows)), rel=1e-10)
    assert ev["reduction_error_max"] == pytest.approx(float(np.max(rows)), rel=1e-10)
    assert ev["plain_psd_reduction_error_mean"] == pytest.approx(ev["reduction_error_mean"],
                                                                 rel=1e-8)
    assert ev["psd_reduction_error_max"] >= ev["psd_reduction_error_mean"] > 0
    assert ev["online_speedup"] == ev["speedup"] > 0
    q_err, p_err = eqx.filter_jit(projection_error_parts)(psd, X)
    assert (ev["projection_error_q"], ev["projection_error_p"]) == pytest.approx(
        (float(q_err), float(p_err)), rel=1e-10)
    # centring: the centred PSD's projection error is below the plain one's
    assert ev["centred_psd_projection_error"]["all"] < ev["psd_projection_error"]["all"]
    # 20 time units of the bump do not return to the initial state: no period, no action
    assert ev["period"] is ev["full_action"] is ev["code_loop_action"] is None
    assert ev["immersion_residual"] < 1e-12 and ev["immersion_passed"]
    assert ev.full.shape == ev.projected.shape == (201, 40) and ev.reduced.shape == (201, 8)
    text = ev.summary(title="PSD")
    assert "projection error" in text and "reduction error" in text and "t=20" in text
    assert reduction_report(tmp_path / "r.png", history={"epoch": [1], "loss": [0.1],
                                                         "val_loss": [None]}, evaluation=ev)
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(TypeError, match="TrajectoryData"):
        evaluate_reduction(psd, toda, X)


def test_check_immersion_passes_immersions_and_fails_a_negative_control(toda_data):
    from geomlearn.evaluation import check_immersion

    _, X = toda_data
    psd = proper_symplectic_decomposition(X, 4)
    good = check_immersion(psd, X[::50])
    assert good.passed and good.residual <= 1e-12 and good.n_points == 5
    assert "PASS" in good.report(title="psd") and "symplectic immersion" in good.report(title="psd")
    bad = check_immersion(PSD(psd.basis * jnp.array([[1.0, 1.1]])), X[::50])  # off the manifold
    assert not bad.passed and bad.residual > 1e-2 and "FAIL" in bad.report(title="bad")
    with pytest.raises(ValueError, match=r"\(B, 40\)"):
        check_immersion(psd, X[0])


def test_the_registry_routes_a_reduction_to_its_own_pipeline():
    """The command line asks the spec, not the model's kind: the autoencoder's spec trains
    with Riemannian Adam (never LM) and checks the immersion; an integrator's spec keeps
    the defaults."""
    from geomlearn.cli import MODELS, LiftPlan, ModelSpec, ReductionEvaluation, spec_of

    spec = MODELS["symplectic-autoencoder-network"]
    assert isinstance(spec.evaluation, ReductionEvaluation)
    # by default the command line's symplectic autoencoder is the one that predicts: the
    # manifold cotangent lift with its latent network (also by the name cotangent-lift)
    assert MODELS["symplectic-autoencoder"].cls is MODELS["cotangent-lift"].cls is gl.LiftedIntegrator
    lift = MODELS["symplectic-autoencoder"]
    assert isinstance(lift.plan, LiftPlan)
    # 16 data steps per application in the plane, 8 above (measured: long rollouts at
    # 2n = 4 left the data with 16), unless a stride is given
    # built abstractly (shapes only): the routing reads the classes and static fields
    def built(make, *args, **options):
        return eqx.filter_eval_shape(lambda: make(*args, key=jax.random.PRNGKey(0), **options))

    assert built(lift.build, 40).stride == 16 and built(lift.build, 40, reduced_dim=4).stride == 8
    assert built(lift.build, 40, reduced_dim=4, stride=3).stride == 3
    ae = built(gl.SymplecticAutoencoder, 40, 2, width=2)
    assert spec_of(ae) is spec and type(spec_of(built(gl.GSympNet, 2))) is ModelSpec
    opt, epochs, budget, how = spec.trainer(ae, 1000, batch_size=100)
    assert epochs == spec.plan.default_epochs and budget is None and "Riemannian" in how
    with pytest.raises(ValueError, match="Riemannian Adam"):
        spec.trainer(ae, 1000, trainer="lm")


# ------------------------------- reduced dynamics that must equal the full ones


def _grad_shears(N):
    """A nonlinear symplectic diffeomorphism S of R^{2N} (two gradient shears) and its
    exact inverse."""

    def V(q):
        return 0.3 * jnp.sin(q[0] + 0.5 * q[1]) + 0.2 * q[0] ** 2 * q[2]

    def U(p):
        return 0.25 * jnp.cos(p[0] - p[2]) + 0.1 * p[1] ** 2 * p[0]

    def S(z):
        q, p = z[:N], z[N:]
        p = p + jax.grad(V)(q)
        return jnp.concatenate([q + jax.grad(U)(p), p])

    def S_inv(z):
        q, p = z[:N], z[N:]
        q = q - jax.grad(U)(p)
        return jnp.concatenate([q, p - jax.grad(V)(q)])

    return S, S_inv


_S, _S_INV = _grad_shears(3)


class _Conjugated(AbstractHamiltonianSystem):
    """H = K∘S⁻¹ on R^6: a pendulum in (Q₁, P₁) and two oscillators, seen through the
    nonlinear symplectic map S. With `coupling = 0` the set {Q₂ = Q₃ = P₂ = P₃ = 0} is
    invariant under K's flow, so S of it is invariant under H's."""

    dim: ClassVar[int] = 6
    coupling: float = 0.0

    def hamiltonian(self, z):
        Z = _S_INV(z)
        Q, P = Z[:3], Z[3:]
        osc = 0.5 * jnp.sum(P[1:] ** 2 + jnp.array([1.0, 4.0]) * Q[1:] ** 2)
        return 0.5 * P[0] ** 2 + 1.0 - jnp.cos(Q[0]) + osc + self.coupling * Q[0] * Q[1]

    def default_initial_conditions(self, dtype=None):
        return jnp.zeros((1, 6), dtype)


class _ShearReduction(AbstractReduction):
    """Ψ_dec(y) = S(y₁, 0, 0, y₂, 0, 0): a nonlinear symplectic immersion R² → R⁶."""

    full_dim: int = eqx.field(static=True, default=6)
    reduced_dim: int = eqx.field(static=True, default=2)

    def encode(self, z):
        Z = _S_INV(z)
        return jnp.stack([Z[0], Z[3]])

    def decode(self, y):
        return _S(jnp.zeros(6, y.dtype).at[0].set(y[0]).at[3].set(y[1]))


def test_on_an_invariant_image_the_reduced_field_is_the_full_one():
    """Pointwise: on an exactly invariant image the decoded reduced vector field is the
    full one (round-off), and — the pendulum being decoupled from the oscillators — the
    reduced field moves the codes of *any* state as the full flow moves them; coupling
    the pendulum to an oscillator (the negative control) breaks both."""
    red = _ShearReduction()
    rng = np.random.default_rng(0)
    ys, off = rng.normal(size=(4, 2)), 0.5 * rng.normal(size=(4, 6))
    y0 = np.array([0.8, 0.3])

    @jax.jit
    def defects(coupling):  # one compilation for both systems
        system = _Conjugated(coupling=coupling)
        reduced = ReducedHamiltonianSystem(system, red)
        return (immersion_residual(red.decode, ys[0]), jax.vmap(reduced.tangent_defect)(ys),
                latent_vector_field_error(red, system, jax.vmap(_S)(off)),
                reduced.hamiltonian(y0))

    immersion, tangent, vf, energy = defects(np.float64(0.0))
    assert float(immersion) <= 1e-14
    assert float(np.max(tangent)) <= 1e-14 and float(vf) <= 1e-14
    # the reduced Hamiltonian is the pendulum's, K∘ι (S⁻¹∘Ψ_dec = ι)
    np.testing.assert_allclose(energy, 0.5 * 0.3**2 + 1 - np.cos(0.8), rtol=1e-14)
    _, tangent, vf, _ = defects(np.float64(0.05))
    assert float(np.min(tangent)) > 1e-3 and float(vf) > 1e-3


@pytest.mark.slow  # two Gauss–Legendre integrations through nested derivatives (compile time)
def test_a_nonlinear_decoder_with_an_invariant_image_reproduces_the_full_solution():
    """On an exactly invariant image the reduced Hamiltonian solution, decoded, *is* the
    full solution (to round-off); with the coupling (the negative control) it is not."""
    red, y0 = _ShearReduction(), jnp.array([0.8, 0.3])

    @jax.jit
    def error(coupling):
        system = _Conjugated(coupling=coupling)
        X = integrate(system, red.decode(y0), 0.02, 100, method="gauss_legendre6")
        Y = integrate(ReducedHamiltonianSystem(system, red), y0, 0.02, 100,
                      method="gauss_legendre6")
        return reduction_error(red, X, Y)

    assert float(error(jnp.asarray(0.0))) <= 1e-13
    assert float(error(jnp.asarray(0.05))) > 1e-2


def _shifted(X, N):
    """Every state of X and all its cyclic lattice translations."""
    return np.concatenate([np.concatenate([np.roll(X[:, :N], s, 1), np.roll(X[:, N:], s, 1)], 1)
                           for s in range(N)])


def test_psd_of_the_linear_wave_reduction_error_equals_projection_error():
    """The linear wave commutes with lattice translations. The PSD of translation-complete
    snapshots has Fourier modes as basis, which the flow leaves invariant, so the reduced
    solution is the projected full one: reduction error = projection error at every time
    (implicit midpoint is linear, so this holds for the discrete solutions too). The PSD
    of the trajectory alone (the negative control) is not invariant, and the two errors
    differ."""
    N, k = 16, 4  # 2n = 4 keeps one of two Fourier modes of the same frequency
    wave = LinearWave(n_points=N, c=0.05)
    X = np.asarray(integrate(wave, wave.default_initial_conditions(jnp.float64)[0], 0.1, 200))
    for data, exact in ((_shifted(X, N), True), (X, False)):
        psd = proper_symplectic_decomposition(data, k)
        solution = _reduced_solution(wave, psd, X)
        e_red, e_proj = np.asarray(solution["reduced_rows"]), np.asarray(solution["projected_rows"])
        gap = float(np.max(np.abs(e_red - e_proj)))
        assert float(np.min(e_proj)) > 0.1  # a real truncation
        assert (gap <= 1e-12) if exact else (gap > 1e-4)


# ------------------------------------------------------ the symplectic area of orbits


def test_loop_action_and_period_of_a_sampled_circle():
    t = np.linspace(0.0, 4 * np.pi, 201)[:-1]  # two turns, 100 samples each
    Z = np.stack([np.cos(t), -np.sin(t)], 1)  # q = cos t, p = -sin t: ∮p dq = +area
    assert orbit_period(Z) == 100
    # the inscribed regular 100-gon's area, (n/2) sin(2π/n)
    assert loop_action(Z[:100]) == pytest.approx(50 * np.sin(2 * np.pi / 100), rel=1e-13)
    assert loop_action(Z[:100, ::-1]) == pytest.approx(-loop_action(Z[:100]), rel=1e-13)
    assert orbit_period(np.stack([t, t], 1)) is None  # never returns
    with pytest.raises(ValueError, match=r"\(K, 2m\)"):
        loop_action(np.ones((4, 3)))


@pytest.mark.slow  # four integrations of a 64-dimensional wave through evaluate_reduction
def test_code_loop_action_equals_the_full_action_only_for_a_faithful_reduction():
    """A symplectic decoder preserves ∮p·dq, so the encoded orbit of an exact reduction
    encloses the full orbit's action; a PSD of 2n = 4 of a travelling wave collapses the
    orbit and encloses far less (the negative control)."""
    from geomlearn.evaluation import evaluate_reduction

    wave = LinearWave(n_points=32, c=0.05)  # returns to 3 % after one crossing, T = 20.1
    X = integrate(wave, wave.default_initial_conditions(jnp.float64)[0], 0.1, 260)
    data = gl.TrajectoryData(X[None], 0.1)
    assert orbit_period(X) == 201
    exact = proper_symplectic_decomposition(X, 64, centred=True)  # every mode
    assert loop_action(jax.vmap(exact.encode)(X[:202])) == pytest.approx(loop_action(X[:202]),
                                                                        rel=1e-10)
    small = evaluate_reduction(proper_symplectic_decomposition(X, 4, centred=True), wave, data)
    assert small["period"] == pytest.approx(20.1)
    assert small["full_action"] == pytest.approx(loop_action(X[:202]), rel=1e-14)
    assert small["code_loop_action"] < 0.5 * small["full_action"]
    assert "loop action" in small.summary(title="PSD") and "T = 20.1" in small.summary(title="PSD")


def test_affine_psd_is_a_symplectic_immersion_and_centring_helps(toda_data):
    _, X = toda_data
    plain = proper_symplectic_decomposition(X, 2)
    centred = proper_symplectic_decomposition(X, 2, centred=True)
    np.testing.assert_allclose(centred.reference, jnp.mean(X, axis=0), rtol=1e-14)
    assert float(np.max(np.abs(plain.reference))) == 0.0
    y = np.array([0.3, -0.2])
    residual, codes = _decoder_facts(centred, y)
    assert float(residual) <= 1e-13
    # encode ∘ decode = id for the affine maps too
    np.testing.assert_allclose(codes, y, atol=1e-12)
    # the conserved mean of q no longer takes the only mode
    assert float(_projection_error(centred, X)) < 0.75 * float(_projection_error(plain, X))
    given = proper_symplectic_decomposition(X, 2, reference=X[0])
    np.testing.assert_array_equal(given.reference, X[0])
    with pytest.raises(ValueError, match="not both"):
        proper_symplectic_decomposition(X, 2, centred=True, reference=X[0])
    with pytest.raises(ValueError, match=r"\(40,\)"):
        PSD(plain.basis, np.zeros(3))


def test_the_reduced_vector_field_never_forms_the_decoder_jacobian(toda_data, key):
    """One reduced vector field is a vector–Jacobian product through the decoder: no
    (2N, 2n) array appears in its program; `projected_vector_field`, which forms the
    Jacobian, is the negative control."""
    toda, _ = toda_data
    ae = eqx.filter_eval_shape(lambda: gl.SymplecticAutoencoder(
        40, 2, width=4, n_encoder_blocks=1, n_decoder_blocks=2, key=key(), dtype=jnp.float64))
    y = jnp.array([0.1, -0.2])

    def shapes(method):
        jaxpr = jax.make_jaxpr(
            lambda ae, y: getattr(ReducedHamiltonianSystem(toda, ae), method)(y))(ae, y).jaxpr
        out, stack = set(), [jaxpr]
        while stack:
            j = stack.pop()
            for eqn in j.eqns:
                out.update(tuple(v.aval.shape) for v in eqn.outvars)
                stack.extend(p.jaxpr if hasattr(p, "jaxpr") else p
                             for p in eqn.params.values() if hasattr(p, "eqns") or hasattr(p, "jaxpr"))
        return out

    assert (40, 2) not in shapes("vector_field") and (2, 40) not in shapes("vector_field")
    assert (40, 2) in shapes("projected_vector_field")


def test_the_architecture_tool_gives_each_module_of_the_wing_its_layer():
    """`geomlearn/reduction/` holds modules of three layers: the architecture tool reads a
    module's layer from the longest prefix of its name, so a foundation module of the wing
    importing one of its models is flagged, and the reverse is not."""
    import ast
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).resolve().parents[1] / "tools" / "architecture.py"
    spec = importlib.util.spec_from_file_location("_architecture_of_the_wing", path)
    arch = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = arch
    spec.loader.exec_module(arch)
    names = ("", "._psd", "._reduced_system", "._lift", "._latent", "._autoencoder",
             "._integrators", "._evaluation", "._training")
    assert [arch.layer_of(f"geomlearn.reduction{n}") for n in names] == [3, 1, 1, 1, 3, 3, 3, 4, 4]

    def linked(sources):
        modules = {n: arch.Module(n, pathlib.Path(n.replace(".", "/") + ".py"), ast.parse(s),
                                  1, False, text=s) for n, s in sources.items()}
        for mod in modules.values():
            for node, local in arch._walk_imports(mod.tree):
                mod.imports += [(t, node.lineno, local) for t in arch.resolve(mod, node, modules)]
        return modules

    up = linked({"geomlearn.reduction._psd": "from ._autoencoder import SymplecticAutoencoder\n",
                 "geomlearn.reduction._autoencoder": "from ._psd import PSD\n"})
    assert [row.split(":")[0] for row in arch.against_layering(up)] == ["geomlearn.reduction._psd"]
