"""Tests for geomlearn.fit: losses go down, one compile per run, devices, checkpoints."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import geomlearn as gl
from geomlearn import io as gio
from geomlearn import training
from geomlearn._progress import ProgressBar
from geomlearn.training import NonFiniteLossError, _fit, _inputs, _loop
from geomlearn.training._optimizer import default_learning_rate as _default_learning_rate

from _tiny_models import TinyHamiltonian, TinyResidual, TinyShear, TinyWindow

HERE = pathlib.Path(__file__).parent


def rotation_pairs(key, n=48, dtype=jnp.float64, theta=0.2):
    """One-step pairs of a rotation of the phase plane (the harmonic oscillator flow)."""
    c, s = np.cos(theta), np.sin(theta)
    R = jnp.asarray(np.array([[c, s], [-s, c]]), dtype=dtype)
    x = jax.random.normal(key, (n, 2), dtype)
    return x, x @ R.T


def rotation_data(key, n_traj=4, n_steps=30, dt=0.1):
    c, s = np.cos(dt), np.sin(dt)
    R = np.array([[c, s], [-s, c]])
    z = np.asarray(jax.random.normal(key, (n_traj, 2)))
    states = [z]
    for _ in range(n_steps):
        z = z @ R.T
        states.append(z)
    return gl.TrajectoryData(jnp.asarray(np.stack(states, axis=1)), dt)


def params_equal(a, b):
    la = jax.tree_util.tree_leaves(eqx.filter(a, eqx.is_inexact_array))
    lb = jax.tree_util.tree_leaves(eqx.filter(b, eqx.is_inexact_array))
    return len(la) == len(lb) and all(
        x.dtype == y.dtype and bool(jnp.array_equal(x, y)) for x, y in zip(la, lb)
    )


# ------------------------------------------------------------------ losses go down


def test_fit_lowers_the_loss_on_pairs(key, dtype):
    x, y = rotation_pairs(key(), n=40, dtype=dtype)
    model = TinyShear(2, key=key(), dtype=dtype)
    trained, history = gl.fit(model, (x, y), epochs=60, batch_size=8, key=key(), progress=False)
    assert set(history) == {"epoch", "loss", "val_loss", "learning_rate", "time", "stop_reason"}
    assert history["stop_reason"] == "epochs"
    assert history["epoch"] == list(range(1, 61))
    assert all(len(v) == 60 for k, v in history.items() if k != "stop_reason")
    assert history["val_loss"] == [None] * 60
    assert history["loss"][-1] < 0.3 * history["loss"][0]
    assert trained.K.dtype == jnp.dtype(dtype)
    assert np.all(np.diff(history["time"]) >= 0)
    # the loss in the history is the mean relative error over the minibatches
    pred = jax.vmap(trained)(x)
    final = float(jnp.linalg.norm(pred - y) / jnp.linalg.norm(y))
    assert final < 0.3 * history["loss"][0]
    json.dumps(history)  # JSON-serialisable as it is


def test_fit_transformer_counts_only_the_last_pw_rows(key):
    traj = jax.random.normal(key(), (6, 20, 2))
    T, pw = 4, 2
    X = jnp.stack([traj[:, i : i + T] for i in range(14)], axis=1).reshape(-1, T, 2)
    Y = jnp.stack([traj[:, i + pw : i + pw + T] for i in range(14)], axis=1).reshape(-1, T, 2)
    shapes = []

    def loss(pred, target):
        shapes.append((pred.shape, target.shape))
        return jnp.mean((pred - target) ** 2)

    model = TinyWindow(2, key=key())
    trained, history = gl.fit(
        model, (X, Y), epochs=3, batch_size=21, prediction_window=pw, loss=loss,
        val_data=(X[:10], Y[:10]), key=key(), progress=False,
    )
    assert shapes[0] == ((21, pw, 2), (21, pw, 2))  # training batches
    assert shapes[1] == ((10, pw, 2), (10, pw, 2))  # validation set
    assert all(v is not None for v in history["val_loss"])
    # the last-pw-rows loss is the one reported for validation
    pred = jax.vmap(trained)(X[:10])[:, T - pw :]
    expected = float(jnp.mean((pred - Y[:10, T - pw :]) ** 2))
    np.testing.assert_allclose(history["val_loss"][-1], expected, rtol=1e-12)


def test_fit_transformer_from_trajectory_data(key):
    data = rotation_data(key(), n_traj=3, n_steps=20)
    model = TinyWindow(2, key=key())
    with pytest.raises(ValueError, match="seq_length"):
        gl.fit(model, data, epochs=1, key=key(), progress=False)
    trained, history = gl.fit(
        model, data, epochs=40, seq_length=3, prediction_window=1, batch_size=16,
        key=key(), progress=False,
    )
    assert history["loss"][-1] < 0.5 * history["loss"][0]


def test_fit_hamiltonian_network_midpoint_and_vector_field(key):
    data = rotation_data(key(), n_traj=4, n_steps=20, dt=0.1)
    model = TinyHamiltonian(2, key=key())
    trained, history = gl.fit(model, data, epochs=60, key=key(), progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    # vector-field regression: the harmonic oscillator field (p, -q)
    z = jax.random.normal(key(), (40, 2))
    zdot = jnp.stack([z[:, 1], -z[:, 0]], axis=1)
    _, history = gl.fit(model, (z, zdot), epochs=60, loss="mse", key=key(), progress=False)
    assert history["loss"][-1] < 0.5 * history["loss"][0]


def test_fit_mse_loss_value(key):
    x, y = rotation_pairs(key(), n=8)
    model = TinyResidual(2, key=key())
    opt = optax.sgd(0.0)  # no change: the reported loss is the loss of the initial model
    _, history = gl.fit(model, (x, y), epochs=1, optimizer=opt, loss="mse", key=key(), progress=False)
    expected = float(jnp.mean((jax.vmap(model)(x) - y) ** 2))
    np.testing.assert_allclose(history["loss"][0], expected, rtol=1e-12)
    assert history["learning_rate"] == [None]  # not exposed by plain optax.sgd


# ------------------------------------------------------------------ one compile per run


def test_no_recompilation_between_epochs(key):
    x, y = rotation_pairs(key(), n=40)
    traces = []

    def loss(pred, target):
        traces.append(pred.shape)  # runs only while tracing
        return jnp.mean((pred - target) ** 2)

    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=7, batch_size=8, loss=loss,
                        val_data=(x[:10], y[:10]), key=key(), progress=False)
    # one trace of the training epoch (batches of 8) and one of the validation loss (10
    # samples) for 7 epochs of 5 minibatches each: nothing is traced per epoch or per batch
    assert traces == [(8, 2), (10, 2)]
    assert len(history["loss"]) == 7


# ------------------------------------------------------------------ default optimiser


def test_default_optimizer_decays_over_the_planned_updates(key):
    K = 37
    opt = training.default_optimizer(K)
    params = {"w": jnp.ones(3)}
    grads = {"w": jnp.asarray([0.5, -2.0, 1.0])}
    adam = optax.scale_by_adam()
    with jax.numpy_dtype_promotion("standard"):  # optax itself is not strict-clean
        direction, _ = adam.update(grads, adam.init(params), params)
        state = opt.init(params)
    for k in (0, 5, 18, 36, 50):
        with jax.numpy_dtype_promotion("standard"):
            updates, new_state = opt.update(grads, state._replace(count=jnp.asarray(k, jnp.int32)))
        lr = _default_learning_rate(k, K)
        np.testing.assert_allclose(updates["w"], -lr * direction["w"], rtol=1e-12)
        assert int(new_state.count) == k + 1
    assert _default_learning_rate(0, K) == pytest.approx(1e-2, rel=1e-12)
    assert _default_learning_rate(K - 1, K) == pytest.approx(1e-6, rel=1e-12)
    assert _default_learning_rate(K + 10, K) == pytest.approx(1e-6, rel=1e-12)
    x, y = rotation_pairs(key(), n=40)
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=10, batch_size=8,
                        key=key(), progress=False)
    lr = history["learning_rate"]
    assert lr[0] == pytest.approx(1e-2)
    assert np.all(np.diff(lr) < 0)
    # 10 epochs × 5 batches: the last epoch starts at update 45 of 50 (index 49 is 1e-6)
    assert lr[-1] == pytest.approx(1e-2 * 1e-4 ** (45 / 49))


def test_custom_optimizer_with_injected_learning_rate(key):
    x, y = rotation_pairs(key(), n=16)
    opt = optax.inject_hyperparams(optax.sgd)(learning_rate=0.05)
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, optimizer=opt,
                        key=key(), progress=False)
    assert history["learning_rate"] == [pytest.approx(0.05)] * 2


# ------------------------------------------------------------------ many devices

def device_experiment():
    """A small training run; returns what the multi-device test compares."""
    x = jax.random.normal(jax.random.PRNGKey(0), (60, 2))
    y = x[:, ::-1] * jnp.asarray([[1.0, -1.0]])
    model = TinyShear(2, key=jax.random.PRNGKey(1))
    trained, history = gl.fit(model, (x, y), epochs=4, batch_size=12,
                              key=jax.random.PRNGKey(2), progress=False, val_data=(x, y))
    return dict(
        devices=len(jax.devices()),
        n_devices_of_params=len(trained.K.sharding.device_set),
        loss=history["loss"],
        val=history["val_loss"],
        leaves=[np.asarray(a).tolist() for a in jax.tree_util.tree_leaves(trained)],
    )


DEVICE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {tests!r})
    import jax
    jax.config.update("jax_enable_x64", True)
    from test_training import device_experiment

    calls = []
    original = jax.lax.with_sharding_constraint
    def counting(x, s):
        calls.append(s)
        return original(x, s)
    jax.lax.with_sharding_constraint = counting
    result = device_experiment()
    result["constraints"] = len(calls)
    print("RESULT", json.dumps(result))
    """
)


@pytest.mark.slow
def test_data_parallel_on_four_devices_matches_one(monkeypatch):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", DEVICE_SCRIPT.format(tests=str(HERE))],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1]
    four = json.loads(line[len("RESULT "):])
    calls = []
    original = jax.lax.with_sharding_constraint
    monkeypatch.setattr(jax.lax, "with_sharding_constraint",
                        lambda x, s: calls.append(s) or original(x, s))
    one = device_experiment()  # this process: one CPU device
    assert one["devices"] == 1 and four["devices"] == 4
    assert four["n_devices_of_params"] == 4  # replicated parameters
    assert calls == [] and four["constraints"] > 0  # batches sharded only on many devices
    np.testing.assert_allclose(four["loss"], one["loss"], rtol=1e-12)
    np.testing.assert_allclose(four["val"], one["val"], rtol=1e-12)
    for a, b in zip(four["leaves"], one["leaves"]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)


# ------------------------------------------------------------------ checkpoints


def test_resume_equals_uninterrupted_bit_for_bit(key, tmp_path):
    x, y = rotation_pairs(key(), n=40)
    model = TinyShear(2, key=key())
    k = key()
    common = dict(epochs=6, batch_size=8, key=k, progress=False, val_data=(x, y))
    full, full_hist = gl.fit(model, (x, y), checkpoint=tmp_path / "a.ckpt", **common)

    def interrupt(epoch, model, history):
        if epoch == 3:
            raise KeyboardInterrupt

    with pytest.warns(RuntimeWarning, match="interrupted after epoch 3"):
        part, part_hist = gl.fit(model, (x, y), checkpoint=tmp_path / "b.ckpt",
                                 checkpoint_every=100, callback=interrupt, **common)
    assert part_hist["epoch"] == [1, 2, 3]
    assert params_equal(part, gl.load(tmp_path / "b.ckpt"))  # Ctrl-C saved the state
    resumed, hist = gl.fit(model, (x, y), checkpoint=tmp_path / "b.ckpt", resume=True, **common)
    assert params_equal(resumed, full)
    assert not params_equal(part, full)
    for name in ("epoch", "loss", "val_loss", "learning_rate"):
        assert hist[name] == full_hist[name]
    # the final checkpoint holds the final model
    assert params_equal(gl.load(tmp_path / "a.ckpt"), full)
    # resuming a finished run returns it unchanged
    again, hist2 = gl.fit(model, (x, y), checkpoint=tmp_path / "a.ckpt", resume=True, **common)
    assert params_equal(again, full) and hist2["loss"] == full_hist["loss"]


def test_resume_rejects_a_different_setup(key, tmp_path):
    x, y = rotation_pairs(key(), n=16)
    path = tmp_path / "c.ckpt"
    gl.fit(TinyShear(2, key=key()), (x, y), epochs=1, key=key(), checkpoint=path, progress=False)
    with pytest.raises(ValueError, match="different model"):
        gl.fit(TinyShear(2, width=3, key=key()), (x, y), epochs=2, key=key(),
               checkpoint=path, resume=True, progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, batch_size=8, key=key(),
               checkpoint=path, resume=True, progress=False)
    # no checkpoint yet: resume=True starts afresh
    _, h = gl.fit(TinyShear(2, key=key()), (x, y), epochs=2, key=key(),
                  checkpoint=tmp_path / "new.ckpt", resume=True, progress=False)
    assert h["epoch"] == [1, 2]


def test_checkpoints_are_written_every_n_epochs(key, tmp_path):
    x, y = rotation_pairs(key(), n=16)
    path = tmp_path / "d.ckpt"
    seen = []

    def record(epoch, model, history):
        header, _ = gio._read_container(path) if path.exists() else ({"epoch": None}, None)
        seen.append(header["epoch"])

    gl.fit(TinyShear(2, key=key()), (x, y), epochs=7, key=key(), checkpoint=path,
           checkpoint_every=3, callback=record, progress=False)
    assert seen == [None, None, 3, 3, 3, 6, 7]
    assert gio._read_container(path)[0]["epoch"] == 7
    assert [p.name for p in tmp_path.iterdir()] == ["d.ckpt"]  # no temporary files left


def test_non_finite_loss_names_the_epoch_and_keeps_the_last_good_checkpoint(key, tmp_path):
    x, y = rotation_pairs(key(), n=16)
    path = tmp_path / "e.ckpt"
    # an ordinary step size for three updates, then an absurd one that overflows
    opt = optax.sgd(lambda count: jnp.where(count >= 3, jnp.inf, 1e-3))
    with pytest.raises(NonFiniteLossError, match=r"parameters became non-finite.* at epoch 4.*keeps the last good state \(epoch 3\)"):
        gl.fit(TinyResidual(2, key=key()), (x, y), epochs=10, optimizer=opt, key=key(),
               checkpoint=path, checkpoint_every=1, progress=False)
    header, _ = gio._read_container(path)
    assert header["epoch"] == 3
    restored = gl.load(path)
    assert all(bool(jnp.all(jnp.isfinite(a))) for a in jax.tree_util.tree_leaves(restored))
    # NaN in the data: refused before training, naming the sample
    bad = x.at[3, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="data has a non-finite input .* in sample 3"):
        gl.fit(TinyShear(2, key=key()), (bad, y), epochs=3, key=key(), progress=False)


def test_interrupt_without_checkpoint_returns_the_model(key):
    x, y = rotation_pairs(key(), n=16)

    def stop(epoch, model, history):
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.warns(RuntimeWarning, match="interrupted after epoch 2 of 5"):
        model, hist = gl.fit(TinyShear(2, key=key()), (x, y), epochs=5, key=key(),
                             callback=stop, progress=False)
    assert hist["epoch"] == [1, 2] and isinstance(model, TinyShear)


def test_callback_can_stop_early(key):
    x, y = rotation_pairs(key(), n=16)
    _, hist = gl.fit(TinyShear(2, key=key()), (x, y), epochs=10, key=key(), progress=False,
                     callback=lambda epoch, model, history: epoch >= 4)
    assert hist["epoch"] == [1, 2, 3, 4]


# ------------------------------------------------------------------ errors, progress


def test_fit_argument_errors(key):
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    with pytest.raises(ValueError, match="batch_size must be at most the number of samples 16"):
        gl.fit(model, (x, y), epochs=1, batch_size=17, key=key(), progress=False)
    with pytest.raises(ValueError, match="unknown loss 'l1'"):
        gl.fit(model, (x, y), epochs=1, loss="l1", key=key(), progress=False)
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        gl.fit(model, (x, y), epochs=0, key=key(), progress=False)
    with pytest.raises(ValueError, match=r"\(M, 2\)"):
        gl.fit(model, (x[:, None], y[:, None]), epochs=1, key=key(), progress=False)
    with pytest.raises(ValueError, match="prediction_window does not apply to TinyShear"):
        gl.fit(model, (x, y), epochs=1, prediction_window=2, key=key(), progress=False)
    with pytest.raises(TypeError, match="TrajectoryData or a tuple"):
        gl.fit(model, x, epochs=1, key=key(), progress=False)
    with pytest.raises(ValueError, match="resume=True needs a checkpoint"):
        gl.fit(model, (x, y), epochs=1, resume=True, key=key(), progress=False)


def test_progress_bar_only_on_a_terminal(key, capsys):
    x, y = rotation_pairs(key(), n=16)
    gl.fit(TinyShear(2, key=key()), (x, y), epochs=3, key=key(), progress=True)
    assert capsys.readouterr().err == ""  # pytest's stderr is not a TTY

    class Terminal:
        def __init__(self):
            self.text = ""

        def isatty(self):
            return True

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    term = Terminal()
    bar = ProgressBar(3, stream=term)
    for epoch in (1, 2, 3):
        bar.update(epoch, 0.5 / epoch, 0.25)
    bar.close()
    assert "epoch 3/3" in term.text and "loss 1.667e-01" in term.text
    assert "val 2.500e-01" in term.text and "epochs/s" in term.text
    silent = Terminal()
    bar = ProgressBar(3, stream=silent, enabled=False)
    bar.update(1, 0.5, None)
    bar.close()
    assert silent.text == ""


# ------------------------------------------------------------------ second order through fit


class LinearMap(gl.AbstractFeedForwardIntegrator):
    """z ↦ A z: linear in its parameters, so one Gauss–Newton step is exact."""

    structure = "none"
    dim: int = eqx.field(static=True)
    A: jax.Array

    def __init__(self, dim, *, key, dtype=None):
        self.dim = dim
        self.A = jax.random.normal(key, (dim, dim), dtype or jnp.float64)

    def __call__(self, z, h=None):
        return self.A.astype(z.dtype) @ z


def test_gauss_newton_solves_a_linear_model_in_one_step(key):
    x = jax.random.normal(key(), (30, 3))
    R = jax.random.normal(key(), (3, 3))
    y = x @ R.T + 0.01 * jax.random.normal(key(), (30, 3))  # noisy: a least-squares problem
    model = LinearMap(3, key=key())
    trained, history = gl.fit(model, (x, y), epochs=1, optimizer=gl.GaussNewton(), key=key(),
                              progress=False)
    # the least-squares solution, independently: min ‖X Aᵀ − Y‖ column by column
    expected = np.linalg.lstsq(np.asarray(x), np.asarray(y), rcond=None)[0].T
    np.testing.assert_allclose(trained.A, expected, rtol=1e-9, atol=1e-11)
    residual = np.linalg.norm(np.asarray(x) @ expected.T - np.asarray(y)) / np.linalg.norm(np.asarray(y))
    np.testing.assert_allclose(history["loss"][0], residual, rtol=1e-9)


@pytest.mark.slow  # two training runs
def test_levenberg_marquardt_through_fit_beats_adam(key):
    train, _ = gl.datasets.pendulum_sympnets()
    model = gl.GSympNet(2, n_layers=4, width=16, key=key())  # the command line's default
    k = key()
    _, lm = gl.fit(model, train, epochs=40, optimizer=gl.LevenbergMarquardt(), key=k, progress=False)
    _, adam = gl.fit(model, train, epochs=40, key=k, progress=False)
    assert np.all(np.diff(lm["loss"]) <= 1e-15)  # a step is taken only if it lowers the loss
    assert lm["loss"][-1] < 0.1 * adam["loss"][-1]
    assert lm["learning_rate"] == [None] * 40


def test_levenberg_marquardt_resume_equals_uninterrupted(key, tmp_path):
    x, y = rotation_pairs(key(), n=40)
    model = TinyShear(2, key=key())
    solver = gl.LevenbergMarquardt(subset=16)  # a random subset per iteration: the key matters
    common = dict(epochs=6, optimizer=solver, key=key(), progress=False)
    full, full_hist = gl.fit(model, (x, y), **common)

    def interrupt(epoch, model, history):
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.warns(gl.TrainingInterrupted):
        gl.fit(model, (x, y), checkpoint=tmp_path / "lm.ckpt", callback=interrupt, **common)
    resumed, hist = gl.fit(model, (x, y), checkpoint=tmp_path / "lm.ckpt", resume=True, **common)
    assert params_equal(resumed, full)
    assert hist["loss"] == full_hist["loss"]
    with pytest.raises(ValueError, match="trainer"):  # resuming with Adam is refused
        gl.fit(model, (x, y), epochs=8, key=common["key"], checkpoint=tmp_path / "lm.ckpt",
               resume=True, progress=False)


def test_a_levenberg_marquardt_checkpoint_without_the_scaling_resumes(key, tmp_path):
    # a checkpoint written before the state kept the running maximum of diag(JᵀJ)
    x, y = rotation_pairs(key(), n=40)
    model = TinyShear(2, key=key())
    common = dict(epochs=6, optimizer=gl.LevenbergMarquardt(), key=key(), progress=False)
    path = tmp_path / "lm.ckpt"

    def interrupt(epoch, model, history):
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.warns(gl.TrainingInterrupted):
        gl.fit(model, (x, y), checkpoint=path, callback=interrupt, **common)
    state = common["optimizer"].init(eqx.filter(model, eqx.is_inexact_array))
    saved, (state, raw), header = gio.load_checkpoint(path, model, (state, gio.raw_key(common["key"])))
    assert state.scaling is not None and np.all(np.asarray(state.scaling) > 0)
    meta = {k: header[k] for k in gio.RESUME_FIELDS if k in header}
    gio.save_checkpoint(path, saved, (state._replace(scaling=None), raw), epoch=header["epoch"],
                        history=header["history"], meta=meta)
    with pytest.raises(gio.PersistenceError):  # the old form does not read as the new one
        gio.load_checkpoint(path, model, (state, raw))
    resumed, hist = gl.fit(model, (x, y), checkpoint=path, resume=True, **common)
    assert hist["epoch"] == [1, 2, 3, 4, 5, 6] and hist["loss"][-1] < hist["loss"][2]


def test_levenberg_marquardt_refuses_a_large_model_and_custom_losses(key):
    x, y = rotation_pairs(key(), n=16)
    with pytest.raises(ValueError, match=r"more than max_params = 10.*Adam"):
        gl.fit(TinyShear(2, key=key()), (x, y), epochs=1, key=key(), progress=False,
               optimizer=gl.LevenbergMarquardt(max_params=10))
    with pytest.raises(ValueError, match="sum of squares"):
        gl.fit(TinyShear(2, key=key()), (x, y), epochs=1, key=key(), progress=False,
               optimizer=gl.LevenbergMarquardt(), loss=lambda p, t: jnp.mean(jnp.abs(p - t)))


def test_time_budget_stops_training(key):
    x, y = rotation_pairs(key(), n=16)
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=10**6, key=key(),
                        progress=False, time_budget=1.0)
    assert 0 < len(history["epoch"]) < 10**6
    assert history["time"][-1] < 30  # stopped soon after the budget (compile included)


def test_several_epochs_per_compiled_call(key, monkeypatch):
    """Without a callback, fit groups epochs into one compiled call (fewer dispatches)."""
    x, y = rotation_pairs(key(), n=16)
    calls = []
    original = _loop.train_group

    def counting(*args, **kwargs):
        calls.append(kwargs["group"])
        return original(*args, **kwargs)

    monkeypatch.setattr(_fit, "train_group", counting)
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=400, key=key(), progress=False)
    assert history["epoch"] == list(range(1, 401))
    assert len(calls) < 100 and set(calls) == {_loop.GROUP_MAX}
    calls.clear()
    gl.fit(TinyShear(2, key=key()), (x, y), epochs=5, key=key(), progress=False,
           callback=lambda *a: False)
    assert calls == [1] * 5  # a callback sees every epoch


def test_slow_epochs_still_share_a_compiled_call():
    """`group_length`: about `GROUP_SECONDS` of fast epochs per call; an epoch slower than
    `GROUP_SECONDS / GROUP_MIN_EPOCHS` still gets `GROUP_MIN_EPOCHS` per call (a call's
    fixed cost, e.g. mapping its temporary buffers anew, grows with the batch as the
    epoch does), unless they would take more than `GROUP_SECONDS_MAX`."""
    n, top, most = _loop.GROUP_MIN_EPOCHS, _loop.GROUP_SECONDS, _loop.GROUP_SECONDS_MAX
    assert _loop.group_length(1e-7) == _loop.GROUP_MAX
    assert _loop.group_length(top / 100) == 100  # fast: set by the wall time
    slow = 4 * top / n  # a wall time alone would give n // 4 epochs
    assert int(top / slow) == n // 4 and _loop.group_length(slow) == n
    assert _loop.group_length(2 * most / n) == n // 2  # the floor yields to the longest call
    assert _loop.group_length(10 * most) == 1 and _loop.group_length(0.0) == _loop.GROUP_MAX



def test_fit_runs_slow_epochs_in_groups_of_group_min_epochs(key, monkeypatch):
    """`fit` sizes its groups by `group_length`: epochs of 4 × GROUP_SECONDS /
    GROUP_MIN_EPOCHS (a sleep after each compiled call) still run GROUP_MIN_EPOCHS per
    call, where a wall time alone would give a quarter of that."""
    import time

    slow = 4 * _loop.GROUP_SECONDS / _loop.GROUP_MIN_EPOCHS
    counts, original = [], _loop.train_group

    def slowed(params, state, epoch0, count, *args, **kwargs):
        out = jax.block_until_ready(original(params, state, epoch0, count, *args, **kwargs))
        time.sleep(slow * count)
        counts.append(count)
        return out

    monkeypatch.setattr(_fit, "train_group", slowed)
    x, y = rotation_pairs(key(), n=16)
    n = _loop.GROUP_MIN_EPOCHS
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=2 * n + 4, key=key(),
                        progress=False)
    assert history["epoch"] == list(range(1, 2 * n + 5))
    assert max(counts) == n, counts

# ------------------------------------------------------- Optax's extra arguments (L-BFGS)


def test_lbfgs_line_search_runs_inside_fit(key):
    """`optax.lbfgs()` needs the loss at trial parameters (`value_fn`) for its line search:
    fit passes Optax's extra arguments `value`, `grad`, `value_fn` of the minibatch."""
    x, y = rotation_pairs(key(), n=40)
    model = TinyShear(2, key=key())
    k = key()
    _, lbfgs = gl.fit(model, (x, y), epochs=40, optimizer=optax.lbfgs(), loss="mse", key=k,
                      progress=False)
    _, adam = gl.fit(model, (x, y), epochs=40, optimizer=optax.adam(1e-2), loss="mse", key=k,
                     progress=False)
    assert lbfgs["epoch"] == list(range(1, 41))
    assert np.all(np.isfinite(lbfgs["loss"]))
    # the line search makes every step a descent step, and L-BFGS is ahead of Adam
    assert np.all(np.diff(lbfgs["loss"]) <= 1e-15)
    assert lbfgs["loss"][-1] < 0.5 * adam["loss"][-1]
    assert lbfgs["loss"][-1] < 1e-2 * lbfgs["loss"][0]


def test_extra_args_reach_the_optimizer(key):
    """The `value_fn` fit passes is the minibatch loss at the given parameters."""
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    seen = []

    def update(grads, state, params=None, *, value, grad, value_fn, **extra):
        seen.append(True)
        zero = jax.tree_util.tree_map(jnp.zeros_like, grads)
        # report through the state: value == value_fn(params), grad is the gradient
        check = jnp.stack([value - value_fn(params),
                           sum(jnp.sum(jnp.abs(a - b)) for a, b in
                               zip(jax.tree_util.tree_leaves(grad), jax.tree_util.tree_leaves(grads)))])
        return zero, check

    opt = optax.GradientTransformationExtraArgs(lambda p: jnp.full((2,), jnp.nan), update)
    gl.fit(model, (x, y), epochs=1, optimizer=opt, loss="mse", key=key(), progress=False,
           callback=lambda e, m, h: False)
    assert seen  # traced with the extra arguments
    inputs = _inputs.resolve(model, (x, y), epochs=1, batch_size=None, optimizer=opt,
                             loss="mse", prediction_window=None, seq_length=None,
                             val_data=None, checkpoint=None, checkpoint_every=None,
                             resume=False, time_budget=None)
    assert inputs.run.trainer.extra_args
    params, static = eqx.partition(model, eqx.is_inexact_array)
    _, state, _ = _loop.train_group(params, opt.init(params), 0, 1, key(), inputs.data,
                                    static=static, run=inputs.run, group=1)
    np.testing.assert_allclose(np.asarray(state), [0.0, 0.0], atol=1e-15)


# ------------------------------------------------------------ one process: no collectives


def test_one_process_runs_no_collectives(key, monkeypatch):
    """The multi-process machinery (all-gathers, the final barrier) is not used by a
    one-process fit; its SIGINT handler is fit's own while it trains, and restored after."""
    import signal

    from jax.experimental import multihost_utils

    def forbidden(*args, **kwargs):
        raise AssertionError("a cross-process collective in a one-process fit")

    for name in ("process_allgather", "sync_global_devices", "broadcast_one_to_all"):
        monkeypatch.setattr(multihost_utils, name, forbidden)
    before = signal.getsignal(signal.SIGINT)
    handlers = []

    def watch(epoch, model, history):
        handlers.append(signal.getsignal(signal.SIGINT))
        return False

    x, y = rotation_pairs(key(), n=16)
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=3, key=key(),
                        progress=False, callback=watch)
    assert history["epoch"] == [1, 2, 3]
    assert all(h is not before for h in handlers)  # Ctrl-C deferred to the loop
    assert signal.getsignal(signal.SIGINT) is before
    _, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=300, key=key(), progress=False)
    assert history["epoch"] == list(range(1, 301))
    with pytest.raises(ValueError, match="epochs"):  # a rejected argument: no all-gather
        gl.fit(TinyShear(2, key=key()), (x, y), epochs=0, key=key(), progress=False)


def test_ctrl_c_is_taken_between_groups_and_returns_the_model(key):
    """A real SIGINT while `fit` trains (sent here from a callback, so it arrives at a
    known epoch) ends in the interrupt path: `fit` stops after that epoch, warns and
    returns the model trained so far, and restores the previous handler. (That the
    signal is deferred out of JAX is checked by `test_one_process_runs_no_collectives`
    and, end to end, by `tests/test_edges.py::test_ctrl_c_saves_the_model_and_exits_130`.)"""
    import os
    import signal

    before = signal.getsignal(signal.SIGINT)

    def ctrl_c_at_epoch_4(epoch, model, history):
        if epoch == 4:
            os.kill(os.getpid(), signal.SIGINT)
        return False

    x, y = rotation_pairs(key(), n=16)
    with pytest.warns(RuntimeWarning, match="interrupted after epoch 4 of 50"):
        model, history = gl.fit(TinyShear(2, key=key()), (x, y), epochs=50, key=key(),
                                progress=False, callback=ctrl_c_at_epoch_4)
    assert history["epoch"] == [1, 2, 3, 4]
    assert isinstance(model, TinyShear)
    assert signal.getsignal(signal.SIGINT) is before



# ------------------------------------------------------------- options are objects


def test_loss_names_become_loss_objects_once():
    """`loss=` strings are turned into `AbstractLoss` finals; a wrong name is refused with
    the accepted names, and a loss object is accepted as it is."""
    from geomlearn.training import (AbstractLoss, CallableLoss, MeanSquaredLoss,
                                    RelativeLoss, resolve_loss)

    assert resolve_loss("relative") == RelativeLoss()
    assert resolve_loss("mse") == MeanSquaredLoss()
    assert resolve_loss(RelativeLoss()) == RelativeLoss()
    custom = resolve_loss(jnp.subtract)
    assert isinstance(custom, CallableLoss) and custom.name == "subtract"
    for loss in (RelativeLoss(), MeanSquaredLoss(), custom):
        assert isinstance(loss, AbstractLoss)
        hash(loss)  # a static part of the compiled training loop
    assert [RelativeLoss().name, MeanSquaredLoss().name] == ["relative", "mse"]
    assert RelativeLoss().sum_of_squares and not custom.sum_of_squares
    for bad in ("l1", "MSE", 3, None):
        with pytest.raises(ValueError, match=r"expected one of \['relative', 'mse'\]"):
            resolve_loss(bad)


def test_a_loss_object_trains_like_its_name(key):
    x, y = rotation_pairs(key(), n=16)
    model, k = TinyShear(2, key=key()), key()
    by_name = gl.fit(model, (x, y), epochs=3, loss="mse", key=k, progress=False)
    by_object = gl.fit(model, (x, y), epochs=3, loss=training.MeanSquaredLoss(), key=k,
                       progress=False)
    assert by_name[1]["loss"] == by_object[1]["loss"]
    assert params_equal(by_name[0], by_object[0])
    _, history = gl.fit(model, (x, y), epochs=2, loss=training.RelativeLoss(), key=k,
                        progress=False, optimizer=gl.LevenbergMarquardt())
    assert history["epoch"] == [1, 2]  # a sum of squares: a least-squares solver takes it


def test_the_optimizer_is_wrapped_once_into_a_trainer(key):
    """`fit` asks a trainer object, never the optimiser's type: first-order Optax, the
    default schedule, and damped least squares (both solvers under one checkpoint name)."""
    from geomlearn.training._trainers import AbstractTrainer, as_trainer

    plan = dict(on_manifold=False, total_updates=10)
    adam = as_trainer(optax.adam(1e-2), **plan)
    default = as_trainer(None, **plan)
    lm = as_trainer(gl.LevenbergMarquardt(), **plan)
    gn = as_trainer(gl.GaussNewton(), **plan)
    assert all(isinstance(t, AbstractTrainer) for t in (adam, default, lm, gn))
    assert adam.name == default.name == "first_order"
    assert lm.name == gn.name == "LevenbergMarquardt"  # what checkpoints have always stored
    # the default schedule's planned length is not part of the compilation key
    assert default == as_trainer(None, on_manifold=False, total_updates=99)
    assert hash(default) == hash(as_trainer(gl.default_optimizer(7), **plan))
    assert lm != gn
    with pytest.raises(TypeError, match="optax.GradientTransformation"):
        as_trainer("adam", **plan)


def test_choose_trainer_by_name(key):
    model = TinyShear(2, key=key())
    solver, epochs, budget, text = gl.choose_trainer(model, 100)
    assert isinstance(solver, gl.LevenbergMarquardt) and (epochs, budget) == (500, 150.0)
    assert text.startswith("Levenberg–Marquardt")
    solver, epochs, budget, text = gl.choose_trainer(model, 1000, trainer="adam")
    assert solver is None and epochs == 100 and budget is None and text.startswith("Adam")
    solver, *_ = gl.choose_trainer(model, 5000, trainer="lm", epochs=3)
    assert solver.subset == 4096
    with pytest.raises(ValueError, match="trainer must be 'auto', 'lm' or 'adam', got 'sgd'"):
        gl.choose_trainer(model, 100, trainer="sgd")


# ------------------------------------------------ a trainer that knows when it is done


class _Fragile(gl.models.AbstractFeedForwardIntegrator):
    """z ↦ a z, NaN where |a z| > 1.5: a model that fails for large steps."""

    structure = "none"
    dim: int = eqx.field(static=True)
    a: jax.Array

    def __init__(self, a=0.5, *, dim=1):
        self.dim = dim
        self.a = jnp.full((dim,), a)

    def __call__(self, z, h=None):
        out = self.a * z
        return jnp.where(jnp.abs(out) > 1.5, jnp.nan, out)


def _fragile_data():
    x = jnp.concatenate([jnp.full((19, 1), 0.1), jnp.full((1, 1), 1.2)])
    y = jnp.concatenate([1.4 * x[:19], jnp.full((1, 1), 1.44)])
    return x, y


def test_lm_refuses_a_step_that_is_not_finite_on_all_samples():
    # the subset's optimum a = 1.4 makes the one large sample NaN: the step is refused
    # like a rejected trial (parameters kept, λ raised, counted as rejected), which is
    # not a stall while λ is below max_damping
    x, y = _fragile_data()
    lm = gl.LevenbergMarquardt(subset=2, patience=3)
    k, model = jax.random.PRNGKey(0), _Fragile()
    inputs = _inputs.resolve(model, (x, y), epochs=1, batch_size=None, optimizer=lm,
                             loss="relative", prediction_window=None, seq_length=None,
                             val_data=None, checkpoint=None, checkpoint_every=None,
                             resume=False, time_budget=None)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    # an epoch whose subset holds two small samples; the solver alone accepts its step
    epoch = next(e for e in range(20) if 19 not in np.asarray(
        jax.random.choice(jax.random.fold_in(k, e), 20, (2,), replace=False)))

    def residual(p, xi, yi):
        return eqx.combine(p, static)(xi) - yi

    alone, _, info = lm.step(params, lm.init(params), residual, x, y, jax.random.fold_in(k, epoch))
    assert bool(info.accepted) and not np.isfinite(float(_Fragile(float(alone.a[0]))(x[19])[0]))
    state = lm.init(params)
    kept, after, out = _loop.train_group(params, state, epoch, 1, k, inputs.data,
                                         static=static, run=inputs.run, group=1)
    assert float(kept.a[0]) == 0.5  # refused: the parameters stay
    assert int(after.accepted) == 0 and int(after.rejected) == int(info.tries)
    assert float(after.damping) == pytest.approx(lm.damping * lm.increase)
    assert np.isfinite(out[0][0]) and int(out[4][0]) == training._trainers.CONTINUE
    # through fit: refusals never become NaN, do not stop the run, and it still learns
    model, history = gl.fit(model, (x, y), epochs=40, optimizer=lm, key=k, progress=False)
    assert all(np.isfinite(history["loss"]))
    assert abs(float(model.a[0]) * 1.2) <= 1.5
    assert history["stop_reason"] == "epochs" and len(history["epoch"]) == 40
    assert history["loss"][-1] < 0.5 * history["loss"][0]


def test_lm_stops_on_a_stall_and_records_why(key):
    # a noisy linear least-squares problem: LM reaches its minimum in a few iterations,
    # after which no trial can lower the loss (before, every further iteration burned
    # max_tries trials until `epochs` ran out)
    x = jax.random.normal(key(), (30, 3))
    y = x @ jax.random.normal(key(), (3, 3)).T + 0.01 * jax.random.normal(key(), (30, 3))
    model, k = LinearMap(3, key=key()), key()
    _, history = gl.fit(model, (x, y), epochs=200, optimizer=gl.LevenbergMarquardt(patience=2),
                        key=k, progress=False)
    assert history["stop_reason"] == "stalled"
    n = len(history["epoch"])
    assert n < 50
    # without patience it runs every epoch (the negative control; the same compiled loop)
    _, full = gl.fit(model, (x, y), epochs=n + 5, optimizer=gl.LevenbergMarquardt(patience=None),
                     key=k, progress=False)
    assert full["stop_reason"] == "epochs" and len(full["epoch"]) == n + 5
    # and the stop cost nothing: the loss it stopped at is the loss the full run reaches
    assert full["loss"][-1] == history["loss"][-1]
    with pytest.raises(ValueError, match="patience must be an int >= 1"):
        gl.LevenbergMarquardt(patience=0)


def test_stop_reason_says_budget_callback_and_interrupted(key):
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    _, h = gl.fit(model, (x, y), epochs=10**6, time_budget=0.3, key=key(), progress=False)
    assert h["stop_reason"] == "budget" and len(h["epoch"]) < 10**6
    _, h = gl.fit(model, (x, y), epochs=50, key=key(), progress=False,
                  callback=lambda epoch, m, hist: epoch == 3)
    assert h["stop_reason"] == "callback" and h["epoch"][-1] == 3

    def interrupt(epoch, m, hist):
        if epoch == 2:
            raise KeyboardInterrupt

    with pytest.warns(gl.training.TrainingInterrupted):
        _, h = gl.fit(model, (x, y), epochs=50, key=key(), progress=False, callback=interrupt)
    assert h["stop_reason"] == "interrupted"
    assert set(training.STOP_REASONS) == {"converged", "stalled", "budget", "epochs",
                                          "interrupted", "callback"}


def test_a_time_budget_alone_is_a_plan(key):
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    gl.fit(model, (x, y), epochs=2, key=key(), progress=False)  # compiled before the budget runs
    _, h = gl.fit(model, (x, y), time_budget=1.5, key=key(), progress=False)
    assert h["stop_reason"] == "budget" and len(h["epoch"]) > 10
    # the default schedule was planned for the epochs the budget allows: it decays
    assert h["learning_rate"][0] == pytest.approx(1e-2)
    assert h["learning_rate"][-1] < 1e-3
    with pytest.raises(ValueError, match="fit needs epochs, a time_budget, or both"):
        gl.fit(model, (x, y), key=key(), progress=False)
    # the command line's trainer choice has one budget rule instead: at most its epochs
    # and at most the seconds, whichever comes first (tests/test_cli.py)
    solver, epochs, budget, text = gl.choose_trainer(model, 1000, trainer="adam", time_budget=60)
    assert solver is None and epochs == 100 and budget == 60 and "60 s" in text
    solver, epochs, budget, _ = gl.choose_trainer(model, 100, trainer="lm", time_budget=5)
    assert epochs == 500 and budget == 5


def test_a_non_finite_loss_keeps_the_last_good_model_and_the_hint_fits_the_trainer(key, tmp_path):
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    with pytest.raises(NonFiniteLossError, match="lower the learning rate") as e:
        gl.fit(model, (x, y), epochs=200, optimizer=optax.sgd(1e6), key=key(), progress=False)
    good = e.value.model
    assert isinstance(good, TinyShear)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree_util.tree_leaves(good))
    assert e.value.history["loss"] and all(np.isfinite(e.value.history["loss"]))
    # under Levenberg–Marquardt a non-finite loss can only come from the start
    xf, yf = _fragile_data()
    with pytest.raises(NonFiniteLossError) as e:
        gl.fit(_Fragile(a=2.0), (xf, yf), epochs=5, optimizer=gl.LevenbergMarquardt(),
               key=key(), progress=False)
    assert "learning rate" not in str(e.value) and "initial parameters" in str(e.value)
    assert float(e.value.model.a[0]) == 2.0


# ------------------------------------------------------------------ KeepBest


def test_keep_best_keeps_the_lowest_score_and_counts_non_finite_as_inf():
    values = iter([3.0, float("nan"), 1.0, 2.0, 1.0, float("inf")])
    best = training.KeepBest(lambda model: next(values), every=2)
    for epoch in range(1, 13):
        assert best(epoch, f"model {epoch}", {}) is False
    assert best.scores == [(2, 3.0), (4, float("inf")), (6, 1.0), (8, 2.0), (10, 1.0), (12, float("inf"))]
    assert (best.model, best.epoch, best.best) == ("model 6", 6, 1.0)  # a tie keeps the earlier
    # the first score is kept even when it is not finite
    first = training.KeepBest(lambda model: float("nan"))
    first.consider("m", 1)
    assert (first.model, first.best) == ("m", float("inf"))
    # patience: stop after that many scores in a row without improvement
    values = iter([2.0, 1.0, 1.5, 1.2, 0.5])
    patient = training.KeepBest(lambda model: next(values), patience=2)
    assert [patient(e, e, {}) for e in range(1, 5)] == [False, False, False, True]
    with pytest.raises(TypeError, match="score must be a callable"):
        training.KeepBest(1.0)
    with pytest.raises(ValueError, match="every must be >= 1"):
        training.KeepBest(len, every=0)
    with pytest.raises(ValueError, match="patience must be >= 1"):
        training.KeepBest(len, patience=0)


def test_keep_best_in_fit_returns_the_scored_iterate(key):
    """Scored by the distance of its parameters from the start, the kept model is the one
    after the first epoch — bit for bit the model a one-epoch run gives (plain SGD, so
    the first update does not depend on the planned length); the last differs."""
    x, y = rotation_pairs(key(), n=16)
    model = TinyShear(2, key=key())
    start = jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_inexact_array))

    def distance(m):
        leaves = jax.tree_util.tree_leaves(eqx.filter(m, eqx.is_inexact_array))
        return float(sum(jnp.sum((a - b) ** 2) for a, b in zip(leaves, start)))

    best = training.KeepBest(distance)
    k = key()
    last, history = gl.fit(model, (x, y), epochs=6, optimizer=optax.sgd(0.05), key=k,
                           progress=False, callback=best)
    one, _ = gl.fit(model, (x, y), epochs=1, optimizer=optax.sgd(0.05), key=k, progress=False)
    assert best.epoch == 1 and [e for e, _ in best.scores] == [1, 2, 3, 4, 5, 6]
    assert params_equal(best.model, one)
    assert not params_equal(best.model, last)  # negative control
    assert history["stop_reason"] == "epochs"
