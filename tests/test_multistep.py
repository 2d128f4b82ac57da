"""`MultiStep`: training on k iterated steps of a model's own rollout.

What is checked against something computed another way:

- k = 1 is the plain model's training: the same samples, the same loss and the same
  parameters after an epoch, to round-off;
- the k predictions of one sample are the states of `geomlearn.iterate`'s rollout of the
  wrapped model (an independent code path), and the k targets are the states of the
  trajectory that follow the window;
- the wrapper's structure, iterated map and rollout are the wrapped model's;
- misuse (k < 1, trajectories too short, prepared arrays, saving the wrapper) fails
  with an error that names what was expected and what was received.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.models.multistep import MultiStep
from geomlearn.training import resolve_loss

from _helpers import randomize

RNG_SEED = 14


def _data(rng, n_traj=3, n_states=14, dim=3, dtype=jnp.float64):
    """Smooth but arbitrary trajectories (the wrapper does not care where they come from)."""
    t = np.arange(n_states)[None, :, None]
    phase = rng.uniform(0, 2 * np.pi, (n_traj, 1, dim))
    freq = rng.uniform(0.1, 0.4, (1, 1, dim))
    return gl.TrajectoryData(jnp.asarray(np.cos(freq * t + phase), dtype=dtype), 0.1)


def _vpt(key, rng):
    return randomize(gl.VolumePreservingTransformer(3, n_blocks=1, L=1, key=key), rng, 0.3)


def _full_loss(model, data, **task_kw):
    """`fit`'s relative loss of `model` on all of its samples, through the protocol."""
    task = model.task(**task_kw)
    x, y, task = model.training_samples(data, task)
    pred = jax.vmap(lambda s: model.predict(s, task))(x)
    target = jax.vmap(lambda s: model.target(s, task))(y)
    sq = jnp.mean(jnp.sum(jnp.square(target.reshape(target.shape[0], -1)), axis=1))
    return float(resolve_loss("relative")(pred, target, sq)), x.shape[0]


@pytest.mark.slow  # training runs
@pytest.mark.parametrize("kind", ["transformer", "feed_forward"])
def test_one_window_is_the_plain_loss(kind, key, rng):
    data = _data(rng, dim=4 if kind == "feed_forward" else 3)
    if kind == "transformer":
        model, kw = _vpt(key(), rng), {"seq_length": 3}
    else:
        model, kw = randomize(gl.GSympNet(4, n_layers=2, width=3, key=key()), rng, 0.3), {}
    plain, m_plain = _full_loss(model, data, **kw)
    multi, m_multi = _full_loss(MultiStep(model, 1), data, **kw)
    assert m_multi == m_plain
    assert plain > 1e-3  # a loss far from zero, so equality means something
    assert abs(multi - plain) <= 1e-13 * plain
    # and one full-batch epoch of fit moves the parameters identically
    fkw = dict(epochs=1, key=jax.random.PRNGKey(0), progress=False, **kw)
    a, ha = gl.fit(model, data, **fkw)
    b, hb = gl.fit(MultiStep(model, 1), data, **fkw)
    assert abs(ha["loss"][0] - hb["loss"][0]) <= 1e-13 * ha["loss"][0]
    for u, v in zip(jax.tree_util.tree_leaves(eqx.filter(a, eqx.is_inexact_array)),
                    jax.tree_util.tree_leaves(eqx.filter(b.model, eqx.is_inexact_array))):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("T,pw,k", [(3, 3, 4), (3, 1, 3)])
def test_predictions_are_the_rollout(T, pw, k, key, rng):
    data = _data(rng, n_states=T + k * pw + 2)
    # a standard transformer, so pw < T raises no structure warning
    inner = randomize(gl.Transformer(3, n_heads=1, L=1, n_blocks=1, key=key()), rng, 0.3)
    multi = MultiStep(inner, k)
    task = multi.task(seq_length=T, prediction_window=pw)
    x, y, task = multi.training_samples(data, task)
    per_traj = data.n_steps + 1 - T - k * pw + 1
    assert x.shape == (data.n_trajectories * per_traj, T, 3)
    assert y.shape == (x.shape[0], k, T, 3)
    for m in (0, per_traj + 1, x.shape[0] - 1):
        traj, start = divmod(m, per_traj)
        states = np.asarray(data.states)[traj]
        np.testing.assert_array_equal(np.asarray(x[m]), states[start:start + T])
        # targets: the k * pw states after the window, in order
        target = np.asarray(multi.target(y[m], task)).reshape(k * pw, 3)
        np.testing.assert_array_equal(target, states[start + T:start + T + k * pw])
        # predictions: the wrapped model's own rollout from the window
        rolled = np.asarray(gl.iterate(inner, x[m], T + k * pw, prediction_window=pw))
        pred = np.asarray(multi.predict(x[m], task)).reshape(k * pw, 3)
        np.testing.assert_allclose(pred, rolled[T:], rtol=1e-12, atol=1e-13)
        # a non-trivial map: the prediction is not the data
        assert np.abs(pred - target).max() > 1e-3


def test_feed_forward_predictions_are_the_rollout(dtype, key, rng, tol):
    data = _data(rng, dim=2, n_states=8, dtype=dtype)
    inner = randomize(gl.GSympNet(2, n_layers=2, width=3, key=key(), dtype=dtype), rng, 0.5)
    multi = MultiStep(inner, 5)
    x, y, task = multi.training_samples(data, multi.task())
    assert x.shape == (3 * (8 - 5), 2) and y.shape == (x.shape[0], 5, 2)
    assert x.dtype == y.dtype == dtype
    rolled = np.asarray(gl.iterate(inner, x[4], 6))
    pred = multi.predict(x[4], task)
    assert pred.dtype == dtype
    np.testing.assert_allclose(np.asarray(pred), rolled[1:], rtol=tol(dtype), atol=tol(dtype))
    assert np.abs(np.asarray(pred) - np.asarray(y[4])).max() > 1e-3
    traj, start = divmod(4, 3)
    np.testing.assert_array_equal(np.asarray(y[4]),
                                  np.asarray(data.states)[traj, start + 1:start + 6])


def test_structure_and_rollout_are_the_wrapped_models(key, rng):
    vpt = _vpt(key(), rng)
    multi = MultiStep(vpt, 2)
    assert multi.structure == vpt.structure == "volume"
    assert MultiStep(gl.Transformer(3, key=key()), 3).structure == "none"
    assert MultiStep(gl.GSympNet(2, key=key()), 3).structure == "symplectic"
    assert multi.dim == 3
    window = jnp.asarray(np.asarray(_data(rng).states)[0, :3])
    task = multi.task(seq_length=3)
    assert task == vpt.task(seq_length=3)
    assert multi.iterated_structure(task) == "volume"
    with pytest.warns(UserWarning, match="not volume-preserving"):
        assert multi.iterated_structure(multi.task(seq_length=3, prediction_window=1)) == "none"
    np.testing.assert_array_equal(np.asarray(multi.step(window, task)),
                                  np.asarray(vpt(window)))
    np.testing.assert_array_equal(np.asarray(gl.iterate(multi, window, 30)),
                                  np.asarray(gl.iterate(vpt, window, 30)))
    check = gl.check_structure(multi, window[None])
    assert check.structure == "volume" and check.residuals["volume"] < 1e-12
    # the trained model is the wrapped one; it is what is saved
    trained, _ = gl.fit(multi, _data(rng), epochs=2, seq_length=3, key=jax.random.PRNGKey(1),
                        progress=False)
    assert isinstance(trained, MultiStep) and trained.n_windows == 2
    assert type(trained.model) is type(vpt)


def test_save_the_wrapper_and_the_wrapped_model(key, rng, tmp_path):
    multi = MultiStep(_vpt(key(), rng), 2)
    window = jnp.asarray(np.asarray(_data(rng).states)[0, :3])
    # the wrapper saves and loads (before: a TypeError), its model nested in the file
    gl.save(tmp_path / "multi.geomlearn", multi)
    back = gl.load(tmp_path / "multi.geomlearn")
    assert isinstance(back, MultiStep) and back.n_windows == 2
    np.testing.assert_array_equal(np.asarray(back.model(window)), np.asarray(multi.model(window)))
    # and so does the trained map alone
    gl.save(tmp_path / "m.geomlearn", multi.model)
    back = gl.load(tmp_path / "m.geomlearn")
    np.testing.assert_array_equal(np.asarray(back(window)), np.asarray(multi.model(window)))
    # a checkpoint of a MultiStep run resumes like any other
    data = _data(rng)
    kw = dict(seq_length=3, optimizer=gl.LevenbergMarquardt(), key=key(), progress=False,
              checkpoint=tmp_path / "run.ckpt")
    _, first = gl.fit(multi, data, epochs=1, **kw)
    _, resumed = gl.fit(multi, data, epochs=2, resume=True, **kw)
    assert resumed["epoch"] == [1, 2] and resumed["loss"][0] == first["loss"][0]


def test_errors(key, rng):
    vpt = _vpt(key(), rng)
    with pytest.raises(ValueError, match="n_windows must be >= 1, got 0"):
        MultiStep(vpt, 0)
    with pytest.raises(TypeError, match="n_windows must be an integer, got 2.0"):
        MultiStep(vpt, 2.0)
    with pytest.raises(TypeError, match="got ndarray"):
        MultiStep(np.zeros(3), 2)
    with pytest.raises(TypeError, match="not another MultiStep"):
        MultiStep(MultiStep(vpt, 2), 2)
    # T = 3, pw = 3, k = 3 needs 3 + 9 = 12 states; these have 11
    short = _data(rng, n_states=11)
    with pytest.raises(ValueError, match="at least 12 states .* got trajectories of 11 states"):
        gl.fit(MultiStep(vpt, 3), short, epochs=1, seq_length=3, key=jax.random.PRNGKey(0),
               progress=False)
    MultiStep(vpt, 3).training_samples(_data(rng, n_states=12), vpt.task(seq_length=3))
    x, y = short.windows(3)
    with pytest.raises(TypeError, match="as a TrajectoryData .* got a tuple of arrays"):
        gl.fit(MultiStep(vpt, 2), (x, y), epochs=1, key=jax.random.PRNGKey(0), progress=False)
    with pytest.raises(ValueError, match="dimension 2, but the model has dim=3"):
        MultiStep(vpt, 2).training_samples(_data(rng, dim=2), vpt.task(seq_length=3))
