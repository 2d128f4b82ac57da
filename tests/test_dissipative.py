"""Damped and driven systems, conformally symplectic networks and port-Hamiltonian
networks: the exact energy balance of the systems, the conformal identity
`DΦᵀ J DΦ = e^{-γh} J` and the discrete energy balance for every parameter value (each
with a negative control that must fail), and training that recovers the damping."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from _helpers import randomize

import geomlearn as gl
from geomlearn import cli
from geomlearn.geometry import conformal_symplecticity_residual, symplecticity_residual
from geomlearn.integrators import step
from geomlearn.models import Pairs, StepResiduals, Task, _discrete_gradient
from geomlearn.structures import structure_named
from geomlearn.systems import DampedPendulum, Duffing, ForcedMassSpring

SYSTEMS = (DampedPendulum(), Duffing(), ForcedMassSpring(m=2.0, k=0.5, c=0.3))


def _compiled(build):
    """`build()` run as one compiled program: a model's random initialisation, run
    outside `jit`, compiles a program per operation."""
    return eqx.filter_jit(build)()


# ------------------------------------------------------------------------- systems


def test_each_systems_energy_rate_is_the_derivative_of_its_energy_along_its_field():
    rng = np.random.default_rng(0)
    for system in SYSTEMS:
        z = jnp.asarray(rng.normal(size=(4, system.dim)))

        @jax.jit
        def both(z, system=system):
            chain = jax.vmap(lambda v: jax.grad(system.hamiltonian)(v) @ system.vector_field(v))(z)
            return jax.vmap(system.energy_rate)(z), chain, jax.vmap(system.dissipated_power)(z)

        rate, by_chain_rule, lost = both(z)
        np.testing.assert_allclose(rate, by_chain_rule, rtol=1e-13, atol=1e-13)
        assert np.all(np.asarray(lost) >= 0)
        assert system.invariants == {}  # nothing is conserved
        R = np.asarray(system.dissipation_matrix(jnp.float64))
        assert np.all(np.linalg.eigvalsh(R) >= 0) and np.max(R) > 0


@pytest.mark.slow
def test_the_energy_balance_integrates_to_the_energy_change_and_the_flow_is_conformal():
    """Along a Gauss–Legendre trajectory of the forced Duffing oscillator, H(T) − H(0) is
    the integral of the stated rate (Simpson's rule), not of the rate without the
    friction (negative control); the damped pendulum's flow contracts J by e^{-γt}."""
    duffing, h = Duffing(), 0.025
    traj = gl.integrators.integrate(duffing, jnp.array([1.5, -0.5, 0.0]), h, 80, method="gauss_legendre6")
    H = np.asarray(jax.vmap(duffing.hamiltonian)(traj))
    rate = np.asarray(jax.vmap(duffing.energy_rate)(traj))
    supplied = np.asarray(jax.vmap(duffing.supplied_power)(traj))
    simpson = lambda f: h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum())
    change = float(H[-1] - H[0])
    assert abs(change - simpson(rate)) < 1e-6 * abs(change)
    assert abs(change - simpson(supplied)) > 0.1 * abs(change)  # the friction matters

    pendulum, t = DampedPendulum(gamma=0.3), 0.5

    def flow(z):
        return jax.lax.fori_loop(0, 10, lambda i, v: step(pendulum, v, t / 10, method="gauss_legendre6"), z)

    z0 = jnp.array([1.0, 0.4])
    c = np.exp(-0.3 * t)
    # to the accuracy of the 6th-order integrator (a symplectic Runge–Kutta method is not
    # exactly conformally symplectic)
    assert conformal_symplecticity_residual(flow, z0, c) < 1e-10
    assert symplecticity_residual(flow, z0) > 0.1  # not symplectic


def test_system_arguments_are_validated():
    with pytest.raises(ValueError):
        DampedPendulum(gamma=-0.1)
    with pytest.raises(ValueError):
        Duffing(omega=0.0)
    with pytest.raises(TypeError):
        ForcedMassSpring(c="a lot")
    assert "damped_pendulum" in cli.SYSTEMS and cli.resolve_system("Duffing") == "duffing"


# ------------------------------------------------------------- conformal sympnets


@pytest.fixture(scope="module")
def conformal_models():
    k = jax.random.PRNGKey(0)
    rng = np.random.default_rng(1)
    learned = randomize(gl.ConformalSympNet(4, n_layers=3, width=5, dt=0.1, key=k, dtype=jnp.float64), rng, 0.7)
    given = randomize(gl.ConformalSympNet(4, n_layers=2, width=5, damping=0.4, key=k, dtype=jnp.float64), rng, 0.7)
    return learned, given


def test_a_conformal_sympnet_is_conformally_symplectic_with_its_factor(conformal_models):
    learned, given = conformal_models
    points = jnp.asarray(np.random.default_rng(2).normal(size=(6, 4)))
    for model, c in ((learned, np.exp(-float(jax.nn.softplus(learned.raw_damping)) * 0.1)),
                     (given, np.exp(-0.4))):
        np.testing.assert_allclose(model.conformal_factor(), c, rtol=1e-14)
        check = gl.check_structure(model, points)
        assert check.passed and check.structure == "conformal-symplectic"
        assert check.residuals["conformal_symplecticity"] < 1e-13
        assert f"{c:.6g}" in check.report(title="m")  # the factor is named
        assert check.residuals["symplecticity"] > 1e-2  # not claimed, and not zero
    assert structure_named("conformal-symplectic").claims("conformal_symplecticity")


def test_the_conformal_check_fails_for_maps_without_that_factor(conformal_models):
    learned, _ = conformal_models
    z = np.array([0.3, -0.2, 0.5, 0.1])
    sympnet = _compiled(lambda: gl.GSympNet(4, n_layers=2, width=5, key=jax.random.PRNGKey(1),
                                            dtype=jnp.float64))

    @eqx.filter_jit
    def residuals(learned, sympnet, z):
        c = learned.conformal_factor()
        both_damped = lambda v: jnp.sqrt(c) * learned(v)
        return (conformal_symplecticity_residual(sympnet, z, c),
                conformal_symplecticity_residual(both_damped, z, c),
                conformal_symplecticity_residual(both_damped, z, c * c))

    undamped, damped_twice, squared = residuals(learned, sympnet, z)
    assert undamped > 1e-3  # factor 1, not c
    assert damped_twice > 1e-3
    assert squared < 1e-13


def test_the_learned_damping_rate_is_never_negative_and_a_given_one_is_fixed(conformal_models):
    learned, given = conformal_models
    pushed = eqx.tree_at(lambda m: m.raw_damping, learned, jnp.asarray(-40.0))
    assert 0 <= float(pushed.damping_rate()) < 1e-15
    assert given.raw_damping is None and float(given.damping_rate()) == 0.4
    assert given.learned_damping() == {"rate": 0.4}
    with pytest.raises(ValueError):
        gl.ConformalSympNet(2, n_layers=1, width=2, damping=-1.0, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError):
        gl.ConformalSympNet(2, n_layers=1, width=2, damping="fitted", key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError):
        gl.ConformalSympNet(3, n_layers=1, width=2, key=jax.random.PRNGKey(0))


# ----------------------------------------------------------- port-Hamiltonian nets


@pytest.fixture(scope="module")
def phnn_models():
    k = jax.random.PRNGKey(3)
    rng = np.random.default_rng(4)
    forced = randomize(_compiled(lambda: gl.PortHamiltonianNN(
        5, width=6, depth=2, forcing="time", key=k, dtype=jnp.float64)), rng, 0.5)
    state = randomize(_compiled(lambda: gl.PortHamiltonianNN(
        3, width=6, depth=1, forcing="state-time", state_dependent_dissipation=True, key=k,
        dtype=jnp.float64)), rng, 0.5)
    return forced, state


@eqx.filter_jit
def _one_step_facts(model, x, t):
    """The step, the pipeline's step, their balance residuals and that of the
    implicit-midpoint step of the same field (the negative control), and R."""
    y = model.discrete_gradient_step(x, 0.1, t=t)
    stepped = model.step(jnp.append(x, t), Task(dt=0.1))
    midpoint = gl.integrators.implicit_step(lambda v: model(v, t + 0.05), x, 0.1)
    return (y, stepped, model.energy_balance_residual(x, y, 0.1, t=t),
            model.energy_balance_residual(x, midpoint, 0.1, t=t), model.dissipation(x))


def test_the_discrete_gradient_step_keeps_the_energy_balance_for_every_parameter_value(phnn_models):
    _, state = phnn_models
    points = np.random.default_rng(5).normal(size=(4, state.dim))
    check = gl.check_structure(state, points, dt=0.1)
    assert check.passed and check.structure == "energy-balance"
    assert check.residuals["energy_balance"] < 1e-13
    for model in phnn_models:
        x = np.random.default_rng(model.dim).normal(size=model.phase_dim)
        y, stepped, balance, midpoint_balance, R = _one_step_facts(model, x, 0.7)
        # the step the pipeline iterates, with the time carried last
        np.testing.assert_allclose(stepped, np.append(y, 0.8), rtol=1e-14)
        assert balance < 1e-13
        assert midpoint_balance > 1e-9  # negative control: the midpoint rule breaks the balance
        np.testing.assert_allclose(R, R.T, atol=1e-15)
        assert np.min(np.linalg.eigvalsh(np.asarray(R))) > -1e-14


@eqx.filter_jit
def _energy_change(model, x):
    return model.hamiltonian(model.discrete_gradient_step(x, 0.2)) - model.hamiltonian(x)


def test_without_dissipation_and_force_the_step_conserves_the_learned_energy():
    model = _compiled(lambda: gl.PortHamiltonianNN(2, width=5, depth=2, key=jax.random.PRNGKey(5),
                                                   dtype=jnp.float64))
    conservative = eqx.tree_at(lambda m: m.r_biases, model, (jnp.asarray(np.zeros(4)),))
    x = np.array([0.8, -0.3])
    assert abs(float(_energy_change(conservative, x))) < 1e-15
    assert float(_energy_change(model, x)) < -1e-6  # negative control: with R ⪰ 0 it falls
    assert conservative.dissipation_spectrum().tolist() == [0.0, 0.0]


@eqx.filter_jit  # one program per offset (a number, held static)
def _even_energy_model(offset):
    """A port-Hamiltonian network whose energy is even (hidden units in pairs `w`, `-w`
    with equal biases and output weights), so that `0` is an equilibrium, plus `offset`."""
    model = gl.PortHamiltonianNN(2, width=16, depth=1, key=jax.random.PRNGKey(0),
                                 dtype=jnp.float64)
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(1), 3)
    w, b = jax.random.normal(k1, (8, 2)), jax.random.normal(k2, (8,))
    c = jax.random.normal(k3, (1, 8))
    weights = (jnp.concatenate([w, -w]), jnp.concatenate([c, c], axis=1))
    biases = (jnp.concatenate([b, b]), jnp.asarray([offset]))
    return eqx.tree_at(lambda m: (m.h_weights, m.h_biases), model, (weights, biases))


@eqx.filter_jit
def _near_equilibrium(model, x):
    """Per state: the solved step and whether it converged, and whether the solve without
    a rounding level or an absolute floor (Newton's changes judged against eps^(2/3) of
    the state's size alone) converged."""
    def one(z):
        y, ok = model._solve(z, 0.1, 0.0)
        _, plain = _discrete_gradient.solve_step(
            lambda v: model._averaged_field(z, v, 0.0, 0.1), z, 0.1, scale=0.0)
        return y, ok, plain, model.energy_balance_residual(z, y, 0.1)
    return jax.vmap(one)(x)


def test_the_step_converges_near_an_equilibrium_whatever_constant_the_energy_carries():
    """A constant added to the energy changes no dynamics, but its rounding enters the
    discrete gradient (ε|H|/|Δ|): near an equilibrium, where steps barely move, a learned
    energy of about 500 made Newton's changes settle above ε^(2/3), and a trained model's
    rollout raised "did not converge". The solve now settles at the rounding level it can
    reach and the step with the constant agrees with the step without it."""
    amplitude = np.geomspace(1e-8, 1.0, 33)
    x = jnp.asarray(np.stack([amplitude, 0.3 * amplitude], axis=1))
    y0, ok0, plain0, _ = _near_equilibrium(_even_energy_model(0.0), x)
    y1, ok1, plain1, balance = _near_equilibrium(_even_energy_model(544.0), x)
    assert bool(np.all(ok0)) and bool(np.all(ok1))
    # negative control: judged against eps^(2/3) alone, the same solves do not converge
    assert int(np.sum(~np.asarray(plain1))) >= 5 and int(np.sum(~np.asarray(plain0))) >= 3
    gap = np.max(np.abs(np.asarray(y1 - y0)), axis=1) / amplitude
    assert np.all(gap < 1e-6), gap  # the constant's rounding: ε·544·h / (|Δ|·|x|) ≤ 4e-7
    assert np.all(np.asarray(balance) < 1e-13)


def _depth_two_model_with_an_equilibrium_at_zero():
    """A depth-2 port-Hamiltonian network (width 16) whose energy is even — first-layer
    units in pairs `w`, `-w` with equal biases, the second layer the same on both units of
    a pair — so that `0` is an equilibrium, here a minimum of H (checked), damped on the
    momentum, R = diag(0, 0.3): trajectories spiral into it, through |x| ~ 1e-5 and on."""
    rng = np.random.default_rng(0)
    w, b = 2.0 * rng.normal(size=(8, 2)), 2.0 * rng.normal(size=8)
    A, b2 = 0.5 * rng.normal(size=(16, 8)), 2.0 * rng.normal(size=16)
    c = 0.25 * rng.normal(size=(1, 16))
    weights = tuple(map(jnp.asarray, (np.concatenate([w, -w]), np.concatenate([A, A], axis=1), c)))
    biases = tuple(map(jnp.asarray, (np.concatenate([b, b]), b2, [0.0])))
    model = _compiled(lambda: gl.PortHamiltonianNN(2, width=16, depth=2, key=jax.random.PRNGKey(0),
                                                   dtype=jnp.float64))
    model = eqx.tree_at(lambda m: (m.h_weights, m.h_biases, m.r_biases), model,
                        (weights, biases, (jnp.asarray(np.array([0.0, 0.0, 0.0, np.sqrt(0.3)])),)))
    hessian = eqx.filter_jit(lambda m, x: jax.hessian(m.hamiltonian)(x))(model, np.zeros(2))
    curvature = np.linalg.eigvalsh(np.asarray(hessian))
    assert curvature[0] > 0.5  # a minimum: the damped flow is attracted to it
    return model


@eqx.filter_jit
def _verdicts(model, states):
    """Per state, the discrete-gradient solve's verdict batched (`vmap`), and that of the
    relative test alone (no absolute floor, no rounding level: the negative control)."""
    def one(x):
        relative = _discrete_gradient.solve_step(
            lambda v: model._averaged_field(x, v, 0.0, 0.1), x, 0.1, scale=0.0)[1]
        return model._solve(x, 0.1, 0.0)[1], relative
    return jax.vmap(one)(states)


@eqx.filter_jit
def _verdict_alone(model, x):
    return model._solve(x, 0.1, 0.0)[1]


def test_a_depth_two_network_rolls_out_into_its_equilibrium_with_one_verdict_batched_or_alone():
    """Near a learned equilibrium the steps barely move while the field's rounding does
    not shrink with the state, and near the cut-off of the discrete gradient's correction
    the rounding changes between Newton's iterates: judged relative to |y| with the
    rounding of the first iterate only, converged solves were reported as failures — NaN
    or "did not converge" in `iterate` — and a state's verdict depended on the batch it
    was rolled out in. The test now has an absolute floor and the rounding at each iterate."""
    model = _depth_two_model_with_an_equilibrium_at_zero()
    starts = np.array([[3e-3, 0.0], [1e-3, 6e-4], [-1.5e-3, 1e-3]])
    together = np.asarray(gl.iterate(model, starts, 3000, dt=0.1))
    alone = np.stack([np.asarray(gl.iterate(model, s, 3000, dt=0.1)) for s in starts])
    assert np.all(np.isfinite(together)) and np.all(np.isfinite(alone))
    size = np.max(np.abs(together), axis=-1)
    assert np.all(np.min(size, axis=1) < 1e-5) and np.all(size[:, :100].max(axis=1) > 1e-3)
    # each step is solved to eps^(2/3)·(|x| + |y| + 1) ≈ 4e-11 (where |y − x|² crosses the
    # discrete gradient's cut-off, batched and alone may keep its correction or not)
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-9)
    states = together[:, ::5].reshape(-1, 2)
    batched, relative = map(np.asarray, _verdicts(model, states))
    one_by_one = np.array([bool(_verdict_alone(model, s)) for s in states[::7]])
    assert batched.all() and one_by_one.all()
    assert (~relative).sum() >= 5  # negative control: judged relative to |y| alone they fail
    # beside a state whose Newton iteration has a far larger step, a state keeps its own
    # verdict and step: vmap's loop runs on, but each state stops where its own test does
    pair, steps = np.stack([states[3], states[3]]), np.array([0.1, 20.0])
    y, ok = eqx.filter_jit(jax.vmap(lambda x, h: model._solve(x, h, 0.0)))(pair, steps)
    y_alone, ok_alone = eqx.filter_jit(lambda x: model._solve(x, 0.1, 0.0))(states[3])
    assert bool(ok[0]) and bool(ok_alone)
    np.testing.assert_allclose(y[0], y_alone, rtol=0, atol=4e-11)  # the solve's tolerance


_step = eqx.filter_jit(lambda model, state, task: model.step(state, task))


def test_a_failed_discrete_gradient_step_says_what_failed_in_one_line():
    """A step that cannot be solved (here from a state that is not finite) is NaN when the
    task asks for it and otherwise raises one line naming the model, the solve, dt and the
    dtype, with what to try (float64 only where the computation is not already in it)."""
    model = _compiled(lambda: gl.PortHamiltonianNN(2, width=6, depth=2, key=jax.random.PRNGKey(5),
                                                   dtype=jnp.float64))
    x = np.array([np.nan, 0.3])
    assert not bool(_verdict_alone(model, x))
    assert bool(_verdict_alone(model, np.array([0.2, 0.3])))
    assert np.isnan(np.asarray(_step(model, x, Task(dt=0.1, nan_on_failure=True)))).all()
    for dtype, wider in ((jnp.float64, False), (jnp.float32, True)):
        with pytest.raises(Exception) as info:
            jax.block_until_ready(_step(model, x.astype(dtype), Task(dt=0.1)))
        (line,) = [ln for ln in str(info.value).splitlines() if "did not converge" in ln]
        for text in ("PortHamiltonianNN", "discrete-gradient", "dt=0.1", np.dtype(dtype).name,
                     "smaller step at prediction", "different model"):
            assert text in line
        assert ("try float64" in line) == wider


@eqx.filter_jit
def _residual_predictions(model, pairs, dt):
    return jax.vmap(lambda s: model.predict(s, Task(dt=dt, samples=StepResiduals())))(pairs)


_discrete_gradient_steps = eqx.filter_jit(
    lambda model, x, t: jax.vmap(lambda a, s: model.discrete_gradient_step(a, 0.1, t=s))(x, t))


def test_training_on_the_step_residual_predicts_the_solved_step_at_a_solved_pair(phnn_models):
    """`sample_form="step_residual"` trains on the step's equation at the data's pair: at
    a pair the discrete-gradient step produced, its prediction is that step's end (a zero
    residual); at any other pair it is not, and its error is the residual of the step's
    equation there."""
    for model in phnn_models:
        rng = np.random.default_rng(model.dim + 10)
        x = rng.normal(size=(3, model.phase_dim))
        t = np.array([0.0, 0.4, 1.3])
        y = np.asarray(_discrete_gradient_steps(model, x, t))
        before, after = np.column_stack([x, t]), np.column_stack([y, t + 0.1])
        solved = _residual_predictions(model, np.stack([before, after], axis=1), 0.1)
        np.testing.assert_allclose(solved, after, rtol=0, atol=1e-14)
        # negative control: a pair off the step is predicted elsewhere, by its residual
        off = after.copy()
        off[:, 0] += 1e-3
        moved = np.asarray(_residual_predictions(model, np.stack([before, off], axis=1), 0.1))
        assert np.min(np.abs(moved[:, 0] - off[:, 0])) > 1e-4
    data = gl.datasets.forced_mass_spring(jax.random.PRNGKey(0), n_trajectories=2, n_steps=5,
                                          dtype=jnp.float64)
    model = phnn_models[1]  # (q, p, t): the forced mass spring's state
    x, y, task = model.training_samples(data, model.task())
    assert task.samples == StepResiduals() and task.dt == data.dt
    x = np.asarray(x)
    np.testing.assert_array_equal(x[:, 1], y)
    np.testing.assert_array_equal(x[:, 0], data.pairs()[0])


def test_port_hamiltonian_options_are_checked():
    k = jax.random.PRNGKey(0)
    with pytest.raises(ValueError, match="forcing"):
        gl.PortHamiltonianNN(3, width=2, depth=1, forcing="wind", key=k)
    with pytest.raises(ValueError, match="2n"):
        gl.PortHamiltonianNN(3, width=2, depth=1, key=k)  # odd without forcing
    with pytest.raises(ValueError, match="2n"):
        gl.PortHamiltonianNN(4, width=2, depth=1, forcing="time", key=k)  # even with forcing
    with pytest.raises(ValueError, match="dt"):
        gl.PortHamiltonianNN(2, width=2, depth=1, key=k).step(jnp.zeros(2), Task())
    with pytest.raises(ValueError, match="sample_form must be one of"):
        gl.PortHamiltonianNN(2, width=2, depth=1, key=k, sample_form="windows")
    assert gl.PortHamiltonianNN(2, width=2, depth=1, key=k, sample_form=Pairs()).sample_form == "pairs"


def test_the_command_line_lists_the_systems_and_what_the_models_keep(capsys):
    from geomlearn import cli

    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for text in ("damped_pendulum", "duffing", "forced_mass_spring", "conformal-sympnet", "phnn",
                 "preserves: conformal-symplectic", "preserves: energy-balance"):
        assert text in out
    assert cli.resolve_model("phnn").incompatibility(gl.systems.RigidBody()) is not None


# ------------------------------------------------------------------ training (slow)


@pytest.mark.slow
def test_levenberg_marquardt_recovers_the_damping_of_the_damped_pendulum():
    data = gl.datasets.damped_pendulum(jax.random.PRNGKey(0), n_trajectories=8, n_steps=100,
                                       dtype=jnp.float64)
    model = gl.ConformalSympNet(2, n_layers=4, width=12, dt=0.1, key=jax.random.PRNGKey(1), dtype=jnp.float64)
    model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(), epochs=60,
                            key=jax.random.PRNGKey(2), progress=False)
    assert history["loss"][-1] < history["loss"][0]
    assert abs(float(model.damping_rate()) - 0.1) < 0.05 * 0.1


@pytest.mark.slow
def test_a_port_hamiltonian_network_learns_the_forced_mass_spring():
    system = ForcedMassSpring()
    data = gl.datasets.forced_mass_spring(jax.random.PRNGKey(0), n_trajectories=6, n_steps=100,
                                          dtype=jnp.float64)
    model = gl.PortHamiltonianNN(3, width=12, depth=2, forcing="time", key=jax.random.PRNGKey(1),
                                 dtype=jnp.float64)
    # Adam first, Levenberg–Marquardt from there (LM alone stalls far from the data)
    model, first = gl.fit(model, data, optimizer=optax.adam(3e-3), epochs=150, batch_size=100,
                          key=jax.random.PRNGKey(2), progress=False)
    model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(), epochs=30,
                            key=jax.random.PRNGKey(2), progress=False)
    assert history["loss"][-1] < 0.01 * first["loss"][0]
    spectrum = model.dissipation_spectrum()
    assert abs(spectrum[-1] - system.c) < 0.15 * system.c and abs(spectrum[0]) < 0.1 * system.c
    rollout = gl.iterate(model, data.states[:1, 0], 50, dt=data.dt)
    assert np.all(np.isfinite(np.asarray(rollout)))


@pytest.mark.slow
def test_training_through_the_solved_step_still_learns():
    """`sample_form="pairs"`: the loss differentiates through the solved discrete-gradient
    step (implicit function theorem); a few Levenberg–Marquardt epochs lower it."""
    data = gl.datasets.damped_pendulum(jax.random.PRNGKey(0), n_trajectories=2, n_steps=20,
                                       dtype=jnp.float64)
    model = gl.PortHamiltonianNN(2, width=6, depth=1, dt=0.1, sample_form="pairs",
                                 key=jax.random.PRNGKey(1), dtype=jnp.float64)
    model, history = gl.fit(model, data, optimizer=gl.LevenbergMarquardt(), epochs=10,
                            key=jax.random.PRNGKey(2), progress=False)
    assert np.all(np.isfinite(history["loss"])) and history["loss"][-1] < 0.8 * history["loss"][0]


@pytest.mark.slow
@pytest.mark.parametrize("system, model", [("damped_pendulum", "conformal-sympnet"), ("duffing", "phnn")])
def test_the_command_line_reports_the_learned_damping_and_the_energy(system, model, tmp_path):
    import json

    from geomlearn import cli

    out = tmp_path / "run"
    assert cli.main(["train", "--system", system, "--model", model, "--epochs", "3",
                     "--n-trajectories", "3", "--out", str(out)]) in (0, 4)
    metrics = json.loads((out / "metrics.json").read_text())
    (name, damping), = metrics["learned_damping"].items()
    assert name in ("rate", "spectrum") and damping["relative_error"] >= 0
    assert damping["true"] == ([0.0, 0.3] if system == "duffing" else 0.1)
    assert set(metrics["energy_balance_residual"]) == {"model", "reference"}
    assert (out / "energy.png").is_file() and metrics["trajectory_error"]
    assert cli.main(["check", str(out)]) == 0
