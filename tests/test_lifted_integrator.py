"""LiftedIntegrator: a GSympNet on the codes of a manifold cotangent lift — its training
pairs, its latent rollout as `evaluate_reduction` measures it, persistence of the fitted
lift, and that it learns the Toda bump."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomlearn as gl
from geomlearn.evaluation import evaluate_reduction
from geomlearn.integrators import integrate
from geomlearn.reduction import manifold_cotangent_lift, proper_symplectic_decomposition
from geomlearn.systems import TodaLattice

from _helpers import randomize

N_PARTICLES, N_STEPS, STRIDE = 40, 800, 4


@pytest.fixture(scope="module")
def bump():
    """`(system, data)`: a 40-particle Toda bump, 800 implicit-midpoint steps of 0.1 (one
    and a half periods)."""
    system = TodaLattice(N_PARTICLES)
    z0 = system.default_initial_conditions(jnp.float64)[0]
    X = integrate(system, z0, 0.1, N_STEPS)
    return system, gl.TrajectoryData(X[None], 0.1)


def _model(**options):
    return gl.LiftedIntegrator(2 * N_PARTICLES, 2, stride=STRIDE, n_layers=4, width=8,
                               key=jax.random.PRNGKey(0), dtype=jnp.float64, **options)


def test_the_lift_is_the_fitted_manifold_cotangent_lift(bump):
    _, data = bump
    model = _model()
    fitted = model.with_lift(data)
    reference = manifold_cotangent_lift(data.states[0], 2, n_features=16)
    for a, b in zip(jax.tree_util.tree_leaves(fitted.lift), jax.tree_util.tree_leaves(reference)):
        np.testing.assert_allclose(a, b, atol=1e-12)
    # the integrator is kept; before fitting the lift is the unbent coordinate reduction
    assert eqx.tree_equal(fitted.integrator_net, model.integrator_net)
    assert float(jnp.max(jnp.abs(model.lift.coefficients))) == 0.0
    assert float(jnp.max(jnp.abs(fitted.lift.coefficients))) > 1e-3


def test_training_pairs_are_codes_stride_steps_apart_within_each_trajectory(bump):
    _, data = bump
    model = _model().with_lift(data)
    X = np.asarray(data.states[0])
    ragged = gl.TrajectoryData.from_arrays([X[:50], X[100:103], X[200:230]], 0.1)
    x, y, _ = model.training_samples(ragged, model.task())
    # lengths 50, 3, 30 give 46, 0, 26 pairs: none across two trajectories
    assert x.shape == y.shape == (46 + 26, 2)
    encode = jax.vmap(model.lift.encode)
    np.testing.assert_allclose(x[:46], encode(X[:46]), atol=1e-13)
    np.testing.assert_allclose(y[:46], encode(X[STRIDE:50]), atol=1e-13)
    np.testing.assert_allclose(x[46:], encode(X[200:226]), atol=1e-13)
    np.testing.assert_allclose(y[46:], encode(X[204:230]), atol=1e-13)
    # full states given as arrays are encoded; codes are used as they are
    xs, ys, _ = model.training_samples((X[:10], X[STRIDE:10 + STRIDE]), model.task())
    np.testing.assert_allclose(xs, encode(X[:10]), atol=1e-13)
    assert model.training_samples((xs, ys), model.task())[0] is not None
    with pytest.raises(ValueError, match=r"stride=4"):
        model.training_samples(gl.TrajectoryData(jnp.asarray(X[None, :4]), 0.1), model.task())
    with pytest.raises(ValueError, match=r"full states \(M, 80\) or codes \(M, 2\)"):
        model.training_samples((X[:5, :3], X[:5, :3]), model.task())


def test_argument_errors():
    with pytest.raises(ValueError, match="reduced_dim must be below full_dim"):
        gl.LiftedIntegrator(4, 4, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="stride"):
        gl.LiftedIntegrator(8, 2, stride=0, key=jax.random.PRNGKey(0))
    model = _model()
    with pytest.raises(ValueError, match=r"GSympNet\(2, n_layers=4, width=8"):
        model.with_integrator(gl.GSympNet(2, n_layers=3, width=8, key=jax.random.PRNGKey(1)))
    with pytest.raises(ValueError, match=r"\(M, 80\)"):
        model.with_lift(np.zeros((20, 6)))


def _identity(net):
    """The net with every parameter zero: each gradient layer's update vanishes."""
    return jax.tree_util.tree_map(lambda a: jnp.zeros_like(a) if eqx.is_inexact_array(a) else a, net)


def test_evaluate_reduction_measures_the_latent_rollout(bump):
    """With an identity latent map the codes stay at Ψ_enc(x₀), so every produced state is
    Ψ_dec(Ψ_enc(x₀)); its errors against x₀, x_S, x_2S, … are computed here in NumPy."""
    system, data = bump
    model = _model().with_lift(data)
    model = model.with_integrator(_identity(model.integrator_net))
    X = np.asarray(data.states[0])
    m = evaluate_reduction(model, system, data)
    z = np.asarray(model.decode(model.encode(X[0])))
    Xs = X[::STRIDE]
    rows = np.linalg.norm(z - Xs, axis=1) / np.linalg.norm(Xs, axis=1)
    assert (m["latent_stride"], m["latent_steps"]) == (STRIDE, N_STEPS // STRIDE)
    assert m["latent_error_mean"] == pytest.approx(rows.mean(), rel=1e-10)
    assert m["latent_error_max"] == pytest.approx(rows.max(), rel=1e-10)
    assert m["latent_error_end"] == pytest.approx(rows[-1], rel=1e-10)
    assert m["latent_online_speedup"] == pytest.approx(m["full_order_seconds"] / m["latent_seconds"])
    assert m["latent_online_speedup_every"] == pytest.approx(
        m["full_order_seconds"] / m["latent_seconds_every"])
    np.testing.assert_allclose(m.series["latent"], rows, rtol=1e-10)
    assert "latent integrator" in m.summary(title="t")
    # negative control: a reduction without a latent integrator has none of these
    psd = evaluate_reduction(proper_symplectic_decomposition(X, 2, centred=True), system, data)
    assert "latent_error_mean" not in psd and psd.series["latent"] is None


def test_a_fitted_model_round_trips_through_a_file(bump, tmp_path):
    _, data = bump
    model = _model().with_lift(data)
    model = model.with_integrator(randomize(model.integrator_net, np.random.default_rng(3), 0.3))
    gl.save(tmp_path / "m.geomlearn", model)
    loaded = gl.load(tmp_path / "m.geomlearn")
    z = data.states[0, 7]
    assert isinstance(loaded, gl.LiftedIntegrator) and loaded.stride == STRIDE
    np.testing.assert_array_equal(loaded(z), model(z))
    # negative control: the same configuration without the fitted lift predicts otherwise
    assert float(jnp.max(jnp.abs(_model()(z) - model(z)))) > 1e-3


def test_the_latent_sympnet_learns_the_bump(bump):
    """Trained alone by Levenberg–Marquardt on the code pairs (60 iterations), the latent
    GSympNet follows the bump over the whole horizon as well as the lift's reduced
    Hamiltonian system does (measured: 0.083 against 0.094; the centred PSD's 0.37)."""
    system, data = bump
    model = _model().with_lift(data)
    x, y, _ = model.training_samples(data, model.task())
    net, history = gl.fit(model.integrator_net, (x, y), epochs=60,
                          optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(1),
                          progress=False)
    m = evaluate_reduction(model.with_integrator(net), system, data)
    assert history["loss"][-1] < 0.2 * history["loss"][0]
    assert m["latent_error_mean"] < 1.5 * m["reduction_error_mean"]
    assert m["reduction_error_mean"] < 0.5 * m["psd_reduction_error_mean"]


def test_reduced_system_pairs_follow_the_data_and_spread_around_it(bump):
    """With no spread the pairs start at data codes and end near the code `stride` steps
    later (the reduced system follows the bump); with a spread the starts leave the data's
    curve by about that fraction of the codes' spread."""
    system, data = bump
    model = _model().with_lift(data)
    codes = np.asarray(jax.vmap(model.lift.encode)(data.states[0]))
    x, y = model.reduced_system_pairs(system, data, n_samples=16, spread=0.0,
                                      key=jax.random.PRNGKey(4))
    assert x.shape == y.shape == (16, 2)
    k = np.argmin(np.linalg.norm(codes[None] - np.asarray(x)[:, None], axis=2), axis=1)
    np.testing.assert_allclose(x, codes[k], atol=1e-12)  # data codes
    keep = k + STRIDE < codes.shape[0]
    moved = np.linalg.norm(codes[k + STRIDE][keep] - codes[k][keep], axis=1)
    off = np.linalg.norm(np.asarray(y)[keep] - codes[k + STRIDE][keep], axis=1)
    assert np.all(off < 0.2 * moved)  # y is the later code, not the start (negative control)
    xs, _ = model.reduced_system_pairs(system, data, n_samples=200, spread=0.05,
                                       key=jax.random.PRNGKey(4))
    gap = np.min(np.linalg.norm(codes[None] - np.asarray(xs)[:, None], axis=2), axis=1)
    assert 0.005 * codes.std() < np.median(gap) < 0.2 * codes.std()
    with pytest.raises(ValueError, match="spread"):
        model.reduced_system_pairs(system, data, n_samples=4, spread=-1.0, key=jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="system has dim=8"):
        model.reduced_system_pairs(TodaLattice(4), data, n_samples=4, key=jax.random.PRNGKey(0))


def test_latent_rollout_error_is_the_mean_relative_error_of_the_decoded_rollout(bump):
    """With an identity latent map every produced state is Ψ_dec(Ψ_enc(x₀)): the score
    over the first `fraction` of each trajectory, computed here in NumPy; on the whole
    trajectory it is `evaluate_reduction`'s `latent_error_mean`."""
    system, data = bump
    model = _model().with_lift(data)
    model = model.with_integrator(_identity(model.integrator_net))
    X = np.asarray(data.states[0])
    z = np.asarray(model.decode(model.encode(X[0])))
    Xs = X[::STRIDE]
    rows = np.linalg.norm(z - Xs, axis=1) / np.linalg.norm(Xs, axis=1)
    assert model.latent_rollout_error(data) == pytest.approx(rows.mean(), rel=1e-10)
    # the first half: 400 steps, 100 applications, 101 states
    assert model.latent_rollout_error(data, fraction=0.5) == pytest.approx(rows[:101].mean(), rel=1e-10)
    assert model.latent_rollout_error(data) == pytest.approx(
        evaluate_reduction(model, system, data)["latent_error_mean"], rel=1e-10)
    # two trajectories: all produced states pooled
    two = gl.TrajectoryData.from_arrays([X[:401], X[400:]], 0.1)
    z2 = np.asarray(model.decode(model.encode(X[400])))
    rows2 = np.linalg.norm(z2 - X[400::STRIDE], axis=1) / np.linalg.norm(X[400::STRIDE], axis=1)
    assert model.latent_rollout_error(two) == pytest.approx(
        np.concatenate([rows[:101], rows2]).mean(), rel=1e-10)
    # a map whose rollout is not finite scores inf, not nan
    blown = model.with_integrator(jax.tree_util.tree_map(
        lambda a: jnp.full_like(a, jnp.nan) if eqx.is_inexact_array(a) else a, model.integrator_net))
    assert blown.latent_rollout_error(data) == float("inf")
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\]"):
        model.latent_rollout_error(data, fraction=0.0)
    with pytest.raises(ValueError, match="no trajectory has 4 steps"):
        model.latent_rollout_error(gl.TrajectoryData(jnp.asarray(X[None, :10]), 0.1), fraction=0.1)
    with pytest.raises(TypeError, match="TrajectoryData"):
        model.latent_rollout_error(X)


def test_keeping_the_best_iterate_by_its_rollout(bump):
    """`KeepBest` scoring the latent rollout along Levenberg–Marquardt's iterations keeps
    the network whose rollout follows the data best: its score is the lowest recorded
    and equals the kept model's rollout error (recomputed here), and it is no worse than
    the last iterate's."""
    _, data = bump
    model = _model().with_lift(data)
    x, y, _ = model.training_samples(data, model.task())
    best = gl.training.KeepBest(
        lambda net: model.with_integrator(net).latent_rollout_error(data, fraction=0.5), every=3)
    net, history = gl.fit(model.integrator_net, (x, y), epochs=20,
                          optimizer=gl.LevenbergMarquardt(), key=jax.random.PRNGKey(1),
                          progress=False, callback=best)
    assert [e for e, _ in best.scores] == [3, 6, 9, 12, 15, 18]
    assert best.best == min(s for _, s in best.scores)
    assert best.epoch == dict((s, e) for e, s in reversed(best.scores))[best.best]
    kept = model.with_integrator(best.model)
    assert kept.latent_rollout_error(data, fraction=0.5) == pytest.approx(best.best, rel=1e-12)
    assert best.best <= model.with_integrator(net).latent_rollout_error(data, fraction=0.5)


def test_the_command_line_keeps_the_iterate_whose_rollout_scores_best(bump):
    """`LiftPlan.fit` scores the latent rollout on the validation data when there are
    some, else on the first half of the training trajectories, and returns the kept
    network: its score is the recorded one (recomputed here)."""
    from geomlearn.cli import MODELS

    spec = MODELS["symplectic-autoencoder"]
    _, data = bump
    X = np.asarray(data.states[0])
    train = gl.TrajectoryData(jnp.asarray(X[None, :500]), 0.1)
    val = gl.TrajectoryData(jnp.asarray(X[None, 400:]), 0.1)
    model = _model().with_lift(train)
    optimizer, epochs, _, how = spec.trainer(model, 496, epochs=12)
    assert "the iterate kept" in how and epochs == 12
    fitted, history = spec.fit(model, train, val_data=val, key=jax.random.PRNGKey(1),
                               optimizer=optimizer, epochs=epochs, progress=False)
    assert history["kept_score_on"] == "val_data" and history["kept_epoch"] in (5, 10, 12)
    assert history["kept_score"] == pytest.approx(fitted.latent_rollout_error(val), rel=1e-12)
    fitted, history = spec.fit(model, train, key=jax.random.PRNGKey(1), optimizer=optimizer,
                               epochs=epochs, progress=False)
    assert history["kept_score_on"] == "first 50% of the training trajectories"
    assert history["kept_score"] == pytest.approx(fitted.latent_rollout_error(train, fraction=0.5), rel=1e-12)
