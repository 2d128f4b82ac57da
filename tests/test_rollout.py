"""Tests for geomlearn.iterate: equals a hand-written loop, batches, one compile, errors."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.models import AbstractFeedForwardIntegrator

from _tiny_models import TinyHamiltonian, TinyShear, TinyWindow


def loop_feedforward(model, z0, n_points):
    out = [z0]
    for _ in range(n_points - 1):
        out.append(model(out[-1]))
    return jnp.stack(out)


def loop_transformer(model, window, n_points, pw):
    T = window.shape[0]
    states = list(window)
    while len(states) < n_points:
        current = jnp.stack(states[-T:])
        states.extend(model(current)[T - pw :])
    return jnp.stack(states[:n_points])


def loop_midpoint(model, z0, n_points, dt):
    """The implicit midpoint rule, each step iterated to convergence."""
    field = jax.jit(lambda z: model.vector_field(z))
    out = [z0]
    for _ in range(n_points - 1):
        z = out[-1]
        z1 = z
        for _ in range(100):
            new = z + dt * field(0.5 * (z + z1))
            if float(jnp.max(jnp.abs(new - z1))) < 1e-15:
                z1 = new
                break
            z1 = new
        out.append(z1)
    return jnp.stack(out)


def test_feedforward_matches_a_python_loop(key, dtype, tol):
    model = TinyShear(2, key=key(), dtype=jnp.float64)
    z0 = jax.random.normal(key(), (2,), dtype)
    traj = gl.iterate(model, z0, 25)
    assert traj.shape == (25, 2) and traj.dtype == jnp.dtype(dtype)
    np.testing.assert_array_equal(traj[0], z0)
    np.testing.assert_allclose(traj, loop_feedforward(model, z0, 25), rtol=tol(dtype), atol=tol(dtype))
    # a batch of initial conditions equals one rollout per condition
    batch = jax.random.normal(key(), (3, 2), dtype)
    trajs = gl.iterate(model, batch, 25)
    assert trajs.shape == (3, 25, 2)
    for i in range(3):
        np.testing.assert_allclose(trajs[i], gl.iterate(model, batch[i], 25), rtol=tol(dtype), atol=tol(dtype))


def test_real_models_roll_out(key, tol):
    z0 = jnp.array([1.0, 0.0])
    for model in (gl.GSympNet(2, key=key()), gl.ResNet(2, width=4, depth=1, key=key())):
        np.testing.assert_allclose(gl.iterate(model, z0, 6), loop_feedforward(model, z0, 6),
                                   rtol=tol(jnp.float64), atol=tol(jnp.float64))
    assert gl.iterate(model, z0, 1).shape == (1, 2)  # only the initial state
    vpt = gl.VolumePreservingTransformer(3, key=key())
    window = jax.random.normal(key(), (3, 3))
    np.testing.assert_allclose(gl.iterate(vpt, window, 7, prediction_window=2),
                               loop_transformer(vpt, window, 7, 2), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("pw", [1, 2, 4])
def test_transformer_matches_a_python_loop(pw, key, tol):
    model = TinyWindow(2, key=key())
    window = jax.random.normal(key(), (4, 2))
    n_points = 15  # (15 - 4) is not a multiple of pw = 2 or 4: the last step is cut
    traj = gl.iterate(model, window, n_points, prediction_window=pw)
    assert traj.shape == (n_points, 2)
    np.testing.assert_array_equal(traj[:4], window)
    np.testing.assert_allclose(traj, loop_transformer(model, window, n_points, pw), rtol=1e-12, atol=1e-12)
    batch = jax.random.normal(key(), (2, 4, 2))
    trajs = gl.iterate(model, batch, n_points, prediction_window=pw)
    np.testing.assert_allclose(trajs[1], gl.iterate(model, batch[1], n_points, prediction_window=pw),
                               rtol=1e-12, atol=1e-12)
    # default prediction window: T
    np.testing.assert_allclose(gl.iterate(model, window, 12),
                               loop_transformer(model, window, 12, 4), rtol=1e-12, atol=1e-12)


def test_hamiltonian_network_rolls_out_by_implicit_midpoint(key):
    model = TinyHamiltonian(2, key=key())
    z0 = jnp.array([0.8, -0.3])
    traj = gl.iterate(model, z0, 20, dt=0.05)
    np.testing.assert_allclose(traj, loop_midpoint(model, z0, 20, 0.05), rtol=1e-12, atol=1e-12)
    # implicit midpoint conserves the learned (here: nearly quadratic) energy well
    H = jax.vmap(model.hamiltonian)(traj)
    assert float(jnp.max(jnp.abs(H - H[0]))) < 1e-4


class Counting(AbstractFeedForwardIntegrator):
    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)
    scale: jax.Array
    traces: ClassVar[list] = []

    def __init__(self, dim, *, key=None, dtype=None):
        self.dim = dim
        self.scale = jnp.asarray(0.99)

    def __call__(self, z, h=None):
        Counting.traces.append(1)  # runs once per trace
        return self.scale * z


def test_iterate_compiles_once_and_is_one_scan(key):
    Counting.traces.clear()
    model = Counting(2)
    z0 = jnp.array([1.0, 2.0])
    a = gl.iterate(model, z0, 1000)
    b = gl.iterate(eqx.tree_at(lambda m: m.scale, model, jnp.asarray(0.5)), z0 + 1, 1000)
    # one trace for 999 steps (a lax.scan, not a Python loop), reused by the second call
    assert len(Counting.traces) == 1
    np.testing.assert_allclose(a[-1], 0.99**999 * z0, rtol=1e-10)
    np.testing.assert_allclose(b[5], 0.5**5 * (z0 + 1), rtol=1e-12)


def test_iterate_errors(key):
    ff = TinyShear(2, key=key())
    with pytest.raises(ValueError, match=r"initial state \(2,\)"):
        gl.iterate(ff, jnp.ones(3), 5)
    with pytest.raises(ValueError, match="n_points must be >= 1"):
        gl.iterate(ff, jnp.ones(2), 0)
    with pytest.raises(ValueError, match="prediction_window does not apply to TinyShear"):
        gl.iterate(ff, jnp.ones(2), 5, prediction_window=1)
    with pytest.raises(ValueError, match="dt does not apply to TinyShear"):
        gl.iterate(ff, jnp.ones(2), 5, dt=0.1)
    with pytest.raises(TypeError, match="floating"):
        gl.iterate(ff, jnp.ones(2, dtype=jnp.int32), 5)
    tr = TinyWindow(2, key=key())
    with pytest.raises(ValueError, match=r"window \(T, 2\)"):
        gl.iterate(tr, jnp.ones(2), 5)
    with pytest.raises(ValueError, match="empty"):
        gl.iterate(tr, jnp.ones((0, 2)), 5)
    with pytest.raises(ValueError, match="at most the window length T=3"):
        gl.iterate(tr, jnp.ones((3, 2)), 8, prediction_window=4)
    with pytest.raises(ValueError, match="at least 3"):
        gl.iterate(tr, jnp.ones((3, 2)), 2)
    fixed = TinyWindow(2, seq_length=4, key=key())
    with pytest.raises(ValueError, match="windows of length 4"):
        gl.iterate(fixed, jnp.ones((3, 2)), 8)
    hnn = TinyHamiltonian(2, key=key())
    with pytest.raises(ValueError, match="needs the time step dt"):
        gl.iterate(hnn, jnp.ones(2), 5)
    with pytest.raises(TypeError, match="geomlearn model"):
        gl.iterate(lambda z: z, jnp.ones(2), 5)


class NaNBelow(AbstractFeedForwardIntegrator):
    """z ↦ 1.1 z, NaN once q exceeds 1: a rollout that fails at a known step."""

    structure: ClassVar[str] = "none"
    dim: int = eqx.field(static=True)

    def __init__(self, dim=2, *, key=None, dtype=None):
        self.dim = dim

    def __call__(self, z, h=None):
        return jnp.where(z[0] > 1.0, jnp.nan, 1.1) * z


def test_a_failed_rollout_names_the_trajectory_and_the_step_in_one_line(key):
    # trajectory 1 leaves q <= 1 first: 0.5 · 1.1^8 > 1, so its state 9 is NaN
    starts = jnp.array([[0.3, 0.0], [0.5, 0.1], [0.4, 0.0]])
    with pytest.raises(gl.rollout.RolloutError) as info:
        gl.iterate(NaNBelow(), starts, 20)
    message = str(info.value)
    assert "\n" not in message and len(message) < 400
    assert "trajectory 1" in message and "step 9" in message and "not finite" in message
    assert "float64" in message and "smaller step" in message and "different model" in message
    assert message.count("; try ") == 1  # the advice once, not the solver's and the rollout's
    assert (info.value.trajectory, info.value.step) == (1, 9)
    with pytest.raises(gl.rollout.RolloutError, match="rollout of the trajectory failed at step 9"):
        gl.iterate(NaNBelow(), starts[1], 20)
    assert gl.iterate(NaNBelow(), starts, 9).shape == (3, 9, 2)  # all finite up to step 8
    # an implicit solve that does not converge: its cause, in the same one line
    steep = jax.tree_util.tree_map(
        lambda a: a * 20.0 if a.ndim == 2 else a,
        gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=key()))
    with pytest.raises(gl.rollout.RolloutError) as info:
        gl.iterate(steep, jnp.array([[0.4, -0.3], [0.1, 0.2]]), 3, dt=2.0)
    message = str(info.value)
    assert "\n" not in message and "trajectory 0" in message and "step 1" in message
    assert "did not converge" in message and "float64" in message
    # under a transformation the model's own run-time check stands
    traced = jax.jit(lambda z: gl.iterate(NaNBelow(), z, 20))(starts)
    assert bool(jnp.isnan(traced[1, 9:]).all()) and bool(jnp.isfinite(traced[:, :9]).all())


@pytest.mark.slow
def test_gsympnet_energy_stays_bounded_where_resnet_drifts():
    """Trained on the SympNets pendulum data (40 pairs), rolled out for 10⁴ steps.

    The energy error of a symplectic map oscillates but does not grow; an unconstrained
    map's energy changes secularly. We measure the drift as the change of the mean energy
    between the first and the last tenth of the rollout. Observed (float64, this
    configuration, seed 0): GSympNet drift ≈ 3e-5 with max |ΔH| ≈ 6.5e-3 identical in the
    first and last tenth; ResNet drift ≈ 7.7e-3 with max |ΔH| growing from 1.4e-2 to
    1.7e-2 — a drift ratio ≈ 250 (seeds 1 and 2: ≈ 5e4 and ≈ 2e3).
    """
    train, _ = gl.datasets.pendulum_sympnets()
    pendulum = gl.systems.Pendulum()
    k = jax.random.PRNGKey(0)
    models = {
        "gsympnet": gl.GSympNet(2, n_layers=4, width=16, key=k),  # 192 parameters
        "resnet": gl.ResNet(2, width=16, depth=2, key=k),  # 160 parameters
    }
    energy = {}
    for name, model in models.items():
        trained, history = gl.fit(model, train, epochs=1500, key=jax.random.PRNGKey(1), progress=False)
        assert history["loss"][-1] < 2e-3  # both fit the training data
        traj = gl.iterate(trained, train.states[0, 0], 10_001)
        H = np.asarray(jax.vmap(pendulum.hamiltonian)(traj))
        assert np.all(np.isfinite(H))
        energy[name] = H - H[0]
    tenth = 1000
    g, r = energy["gsympnet"], energy["resnet"]
    drift_g = abs(g[-tenth:].mean() - g[:tenth].mean())
    drift_r = abs(r[-tenth:].mean() - r[:tenth].mean())
    print(f"energy over 10^4 steps: GSympNet max |dH| {np.abs(g).max():.2e}, drift {drift_g:.2e}; "
          f"ResNet max |dH| {np.abs(r).max():.2e}, drift {drift_r:.2e}; ratio {drift_r / drift_g:.0f}")
    assert np.abs(g).max() < 0.05  # |H| ≈ 0.54: a small, bounded energy error
    assert np.abs(g[-tenth:]).max() < 1.05 * np.abs(g[:tenth]).max()  # does not grow
    assert np.abs(r[-tenth:]).max() > 1.1 * np.abs(r[:tenth]).max()  # grows
    assert drift_r > 50 * drift_g
