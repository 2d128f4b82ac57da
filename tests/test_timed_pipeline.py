"""Irregularly sampled data through the pipeline: timed training samples (rows aligned
with their times), `fit`, `iterate(..., times=)` and `evaluate` on irregular data; on a
regular grid every path is the regular one; clear errors for what does not fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from _helpers import random_module
from geomlearn.models import SymplecticTransformer, TimedPairs, TimedWindows

_DT = 0.1
# windows with pw < T are used on purpose (rows and times line up either way)
pytestmark = pytest.mark.filterwarnings("ignore:.*prediction_window=2 < seq_length")


def _irregular(n_traj=3, n_rows=24, seed=0, jitter=0.5):
    """Harmonic-oscillator trajectories at steps drawn from [(1-j) dt, (1+j) dt]: exact
    rotations, so the states and their times agree exactly."""
    rng = np.random.default_rng(seed)
    arrays, times = [], []
    for i in range(n_traj):
        t = 0.3 * i + np.concatenate([[0.0], np.cumsum(
            rng.uniform((1 - jitter) * _DT, (1 + jitter) * _DT, n_rows - 1))])
        phase = rng.uniform(0, 2 * np.pi)
        arrays.append(np.stack([np.cos(t + phase), -np.sin(t + phase)], axis=1))
        times.append(t)
    return gl.TrajectoryData.from_times(arrays, times)


def test_timed_pairs_carry_each_pairs_relative_step():
    data = _irregular()
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    x, y, task = model.training_samples(data, model.task())
    assert isinstance(task.samples, TimedPairs) and task.dt == pytest.approx(data.dt)
    steps = np.concatenate([np.diff(t) for t in data.row_times]) / data.dt
    np.testing.assert_allclose(np.asarray(x[:, 2]), steps, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(x[:, :2]), np.asarray(data.pairs()[0]))
    np.testing.assert_allclose(np.asarray(y), np.asarray(data.pairs()[1]))
    # the prediction is the model with that step
    np.testing.assert_allclose(model.predict(x[3], task), model(x[3, :2], x[3, 2]), rtol=1e-14)


def test_timed_windows_rows_line_up_with_their_times():
    data = _irregular()
    T, pw = 4, 2
    model = SymplecticTransformer(2, positional_encoding="amplitude", key=jax.random.PRNGKey(0))
    x, y, task = model.training_samples(data, model.task(seq_length=T, prediction_window=pw))
    assert isinstance(task.samples, TimedWindows) and x.shape[1:] == (T, 4)
    t = data.row_times[0]  # the first window: rows 0..T-1, targets pw rows later
    np.testing.assert_allclose(np.asarray(x[0, :, 2]), t[:T] / data.dt, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(x[0, :, 3]), (t[pw:T + pw] - t[:T]) / (pw * data.dt),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(y[0]), np.asarray(data.trajectories[0][pw:T + pw]))
    Z = x[0, :, :2]
    expected = model(Z, times=x[0, :, 2], steps=x[0, :, 3])[T - pw:]
    np.testing.assert_allclose(model.predict(x[0], task), expected, rtol=1e-14)


def test_on_a_regular_grid_the_timed_samples_are_the_model_at_the_row_indices():
    """Steps of one, times the recorded clock: a randomised model (position gains away
    from zero) predicts from the timed window what it predicts from the plain window
    called at the rows' indices; a pair's step of one is the plain step."""
    t = 2.0 + np.arange(20) * _DT  # a clock that does not start at zero
    states = np.stack([np.cos(t), -np.sin(t)], axis=1)
    timed = gl.TrajectoryData.from_times([states], [t])
    regular = gl.TrajectoryData.from_arrays([states], _DT)
    rng = np.random.default_rng(0)
    sympnet = random_module(lambda: gl.GSympNet(2, key=jax.random.PRNGKey(0)), rng, 0.3)
    xt, _, tt = sympnet.training_samples(timed, sympnet.task())
    xr, _, tr = sympnet.training_samples(regular, sympnet.task())
    np.testing.assert_allclose(jax.vmap(lambda s: sympnet.predict(s, tt))(xt),
                               jax.vmap(lambda s: sympnet.predict(s, tr))(xr), rtol=0, atol=1e-12)
    st = random_module(lambda: SymplecticTransformer(2, positional_encoding="amplitude",
                                                     key=jax.random.PRNGKey(0)), rng, 0.3)
    T = 3
    xt, _, tt = st.training_samples(timed, st.task(seq_length=T))
    xr, _, tr = st.training_samples(regular, st.task(seq_length=T))
    for k in (0, 5):
        clock = jnp.asarray(t[k:k + T] / _DT)
        np.testing.assert_allclose(st.predict(xt[k], tt), st(xr[k], times=clock), rtol=0,
                                   atol=1e-12)
    assert np.abs(st.predict(xt[5], tt) - st.predict(xr[5], tr)).max() > 1e-4  # the clock is read


def test_fit_on_irregular_data_learns_and_validates_in_the_training_step():
    data = _irregular(n_traj=4)
    train, val = data.split(0.25, key=jax.random.PRNGKey(3))
    model = gl.GSympNet(2, width=8, key=jax.random.PRNGKey(0))
    trained, history = gl.fit(model, train, val_data=val, epochs=60, progress=False,
                              key=jax.random.PRNGKey(1))
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    # the validation samples are counted in the training data's step
    _, _, task = trained.training_samples(train, trained.task())
    xv, _, vtask = trained.training_samples(val, task)
    assert vtask == task
    np.testing.assert_allclose(np.asarray(xv[:, 2]),
                               np.concatenate([np.diff(t) for t in val.row_times]) / train.dt,
                               rtol=1e-12)


def test_iterate_at_times():
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    z0 = jnp.array([1.0, 0.0])
    regular = gl.iterate(model, z0, 12)
    on_grid = gl.iterate(model, z0, 12, times=np.arange(12) * _DT, dt=_DT)
    np.testing.assert_allclose(on_grid, regular, rtol=0, atol=1e-14)
    t = np.concatenate([[0.0], np.cumsum(np.full(11, _DT) * np.r_[0.5, 1.5] .repeat(6)[:11])])
    by_hand = [z0]
    for h in np.diff(t) / _DT:
        by_hand.append(model(by_hand[-1], h))
    np.testing.assert_allclose(gl.iterate(model, z0, 12, times=t, dt=_DT), jnp.stack(by_hand),
                               rtol=1e-12)
    st = SymplecticTransformer(2, key=jax.random.PRNGKey(0))
    window = jnp.stack([z0] * 3)
    np.testing.assert_allclose(gl.iterate(st, window, 9, times=np.arange(9) * _DT, dt=_DT),
                               gl.iterate(st, window, 9), rtol=0, atol=1e-14)


@pytest.mark.parametrize("kwargs, match", [
    ({"times": np.arange(5) * _DT}, "needs dt"),
    ({"times": np.arange(4) * _DT, "dt": _DT}, r"shape \(5,\).*got shape \(4,\)"),
    ({"times": np.array([0, 0.1, 0.1, 0.2, 0.3]), "dt": _DT}, "strictly increasing"),
])
def test_iterate_at_times_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gl.iterate(gl.GSympNet(2, key=jax.random.PRNGKey(0)), jnp.ones(2), 5, **kwargs)


def test_iterate_at_times_refuses_models_that_do_not_read_times():
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="does not roll out at irregular times"):
        gl.iterate(hnn, jnp.ones(2), 5, times=np.arange(5) * _DT, dt=_DT)
    st = SymplecticTransformer(2, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="multiple of 2"):
        gl.iterate(st, jnp.ones((3, 2)), 6, times=np.arange(6) * _DT, dt=_DT,
                   prediction_window=2)


def test_evaluate_on_irregular_data_rolls_out_at_the_datas_times():
    data = _irregular(n_traj=2, n_rows=13)
    model = gl.GSympNet(2, key=jax.random.PRNGKey(0))
    result = gl.evaluate(model, None, data, dt=_DT)
    for i, t in enumerate(data.row_times):
        expected = gl.iterate(model, data.trajectories[i][0], len(t), times=t, dt=_DT)
        np.testing.assert_allclose(result.rollout[i], expected, rtol=1e-12)
    assert result["dt"] == _DT and result["classical_step_error"] is None
    st = SymplecticTransformer(2, key=jax.random.PRNGKey(0))
    result = gl.evaluate(st, None, data, dt=_DT, seq_length=3, prediction_window=2)
    assert result.rollout.shape == (2, 13, 2)  # 3 + 5 steps of 2 rows
    with pytest.raises(ValueError, match="cannot be evaluated on irregularly sampled"):
        gl.evaluate(gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=jax.random.PRNGKey(0)), None, data,
                    dt=_DT)


def test_multistep_refuses_irregular_data():
    model = gl.MultiStep(gl.GSympNet(2, key=jax.random.PRNGKey(0)), n_windows=2)
    with pytest.raises(ValueError, match="MultiStep does not take irregularly sampled data"):
        model.training_samples(_irregular(), model.task())


def test_fit_refuses_irregular_data_for_models_that_do_not_read_times():
    hnn = gl.HamiltonianNeuralNetwork(2, width=8, depth=1, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="irregularly sampled, but HamiltonianNeuralNetwork"):
        gl.fit(hnn, _irregular(), epochs=1, progress=False, key=jax.random.PRNGKey(1))


def test_evaluate_on_irregular_data_of_a_system_names_the_timed_reference():
    """The reference integrator's speed is measured at the nominal step and named; the
    one-step classical error, which needs one step size, is not computed."""
    data = _irregular(n_traj=2, n_rows=13)
    result = gl.evaluate(gl.GSympNet(2, key=jax.random.PRNGKey(0)),
                         gl.systems.HarmonicOscillator(), data, dt=_DT)
    assert result["reference_method"] == "implicit_midpoint"
    assert result["reference_states_per_second"] > 0
    assert result["classical_step_error"] is None and result["classical_step_method"] is None
