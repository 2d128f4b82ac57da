"""Tests of `geomlearn.second_order`: Levenberg–Marquardt and Gauss–Newton."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

import geomlearn as gl
from geomlearn.second_order import (
    GaussNewton,
    LevenbergMarquardt,
    LMInfo,
    LMState,
    normal_equations,
)

# ------------------------------------------------------------------ problems


def _linear_problem(key, M=37, k=4, out=2, dtype=jnp.float64):
    """`y_i = W x_i + b + noise`: a residual linear in the parameters `(W, b)`."""
    kx, kw, kn = jax.random.split(key, 3)
    x = jax.random.normal(kx, (M, k), dtype)
    W = jax.random.normal(kw, (out, k), dtype)
    y = x @ W.T + jnp.asarray(0.5, dtype) + jnp.asarray(0.1, dtype) * jax.random.normal(
        kn, (M, out), dtype
    )
    params = {"W": jnp.zeros((out, k), dtype), "b": jnp.zeros((out,), dtype)}

    def residual(p, xi, yi):
        return p["W"] @ xi + p["b"] - yi

    return params, residual, x, y


def _exp_problem(dtype=jnp.float64):
    t = jnp.linspace(0.0, 2.0, 41, dtype=dtype)
    y = jnp.asarray(2.0, dtype) * jnp.exp(jnp.asarray(-1.3, dtype) * t) + jnp.asarray(0.3, dtype)
    params = {
        "a": jnp.asarray(1.0, dtype),
        "b": jnp.asarray(-0.5, dtype),
        "c": jnp.asarray(0.0, dtype),
    }

    def residual(p, ti, yi):
        return jnp.reshape(p["a"] * jnp.exp(p["b"] * ti) + p["c"] - yi, (1,))

    return params, residual, t, y


def _pendulum_problem(key, dtype=jnp.float64, n_layers=2, width=8):
    train, _ = gl.datasets.pendulum_sympnets(dtype=dtype)
    x, y = (jnp.asarray(a) for a in train.pairs())
    model = gl.GSympNet(2, n_layers=n_layers, width=width, key=key, dtype=dtype)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def residual(p, xi, yi):
        return eqx.combine(p, static)(xi) - yi

    return params, residual, x, y


def _run(opt, params, residual, x, y, n, key):
    """`n` iterations inside one `lax.scan`; returns the final params, state and infos."""
    state = opt.init(params)

    @jax.jit
    def go(p, s):
        def body(c, k):
            p, s = c
            p, s, info = opt.step(p, s, residual, x, y, k)
            return (p, s), info

        return jax.lax.scan(body, (p, s), jax.random.split(key, n))

    (p, s), infos = go(params, state)
    return p, s, infos


# ------------------------------------------------------------------ closed form


def test_gauss_newton_one_step_solves_linear_least_squares(key):
    params, residual, x, y = _linear_problem(key())
    # independent reference: numpy's least squares on the design matrix [x, 1]
    xn, yn = np.asarray(x), np.asarray(y)
    design = np.concatenate([xn, np.ones((xn.shape[0], 1))], axis=1)
    coef, *_ = np.linalg.lstsq(design, yn, rcond=None)  # (k+1, out)
    gn = GaussNewton(chunk_size=10)
    new, state, info = gn.step(params, gn.init(params), residual, x, y, key())
    np.testing.assert_allclose(np.asarray(new["W"]), coef[:-1].T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(new["b"]), coef[-1], rtol=1e-10, atol=1e-12)
    assert bool(info.accepted) and int(info.tries) == 1
    expected_ss = np.sum((design @ coef - yn) ** 2)
    np.testing.assert_allclose(float(info.new_loss), expected_ss, rtol=1e-10)
    np.testing.assert_allclose(
        float(info.new_relative_loss), np.sqrt(expected_ss / np.sum(yn**2)), rtol=1e-10
    )
    assert float(state.damping) == 0.0


def test_gauss_newton_rank_deficient_gives_minimum_norm_solution(key):
    """Two parameters that enter only as their sum: numpy's minimum-norm lstsq answer."""
    kx, kn = jax.random.split(key())
    x = jax.random.normal(kx, (23, 3))
    y = x @ jnp.asarray([1.0, -2.0, 0.5]) + 0.05 * jax.random.normal(kn, (23,))
    params = {"u": jnp.zeros(3), "v": jnp.zeros(3), "w": jnp.ones(2)}

    def residual(p, xi, yi):
        return jnp.reshape(xi @ (p["u"] + p["v"]) + xi[:2] @ (p["w"] - p["w"]) - yi, (1,))

    xn, yn = np.asarray(x), np.asarray(y)
    design = np.concatenate([xn, xn, np.zeros((23, 2))], axis=1)
    # the step from θ0 solves design · δ ≈ y − design · θ0 with minimum norm
    theta0 = np.concatenate([np.zeros(6), np.ones(2)])
    delta, *_ = np.linalg.lstsq(design, yn - design @ theta0, rcond=None)
    gn = GaussNewton()
    new, _, info = gn.step(params, gn.init(params), residual, x, y)
    got = np.concatenate([np.asarray(new["u"]), np.asarray(new["v"]), np.asarray(new["w"])])
    np.testing.assert_allclose(got, theta0 + delta, rtol=1e-9, atol=1e-11)
    assert bool(info.accepted)


def test_levenberg_marquardt_converges_on_linear_least_squares(key):
    params, residual, x, y = _linear_problem(key())
    xn, yn = np.asarray(x), np.asarray(y)
    design = np.concatenate([xn, np.ones((xn.shape[0], 1))], axis=1)
    coef, *_ = np.linalg.lstsq(design, yn, rcond=None)
    p, _, _ = _run(LevenbergMarquardt(damping=1.0), params, residual, x, y, 30, key())
    np.testing.assert_allclose(np.asarray(p["W"]), coef[:-1].T, rtol=1e-8, atol=1e-10)


def test_normal_equations_match_dense_jacobian_any_chunk(key):
    """Chunked accumulation (M not divisible by the chunk) = the dense Jacobian's."""
    params, residual, x, y = _pendulum_problem(key())
    flat, unravel = ravel_pytree(params)

    def all_residuals(theta):
        return jax.vmap(lambda xi, yi: residual(unravel(theta), xi, yi))(x, y).ravel()

    J = jax.jacfwd(all_residuals)(flat)
    r = all_residuals(flat)
    M = x.shape[0]
    for chunk in (7, M, 3 * M):
        assert M % 7 != 0
        A, g, S = normal_equations(residual, params, x, y, chunk_size=chunk)
        np.testing.assert_allclose(A, J.T @ J, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(g, J.T @ r, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(S, r @ r, rtol=1e-12)
    for mode in ("fwd", "rev"):
        A, g, _ = normal_equations(residual, params, x, y, chunk_size=9, jacobian=mode)
        np.testing.assert_allclose(A, J.T @ J, rtol=1e-11, atol=1e-12)


def test_chunked_step_equals_unchunked(key):
    params, residual, x, y = _pendulum_problem(key())
    k = key()
    outs = []
    for chunk in (7, x.shape[0]):
        lm = LevenbergMarquardt(chunk_size=chunk)
        outs.append(lm.step(params, lm.init(params), residual, x, y, k))
    (p1, s1, i1), (p2, s2, i2) = outs
    np.testing.assert_allclose(ravel_pytree(p1)[0], ravel_pytree(p2)[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(float(i1.new_loss), float(i2.new_loss), rtol=1e-10)
    assert float(s1.damping) == float(s2.damping)


# ------------------------------------------------------------- nonlinear problems


def test_monotone_decrease_and_beats_adam(key):
    # 192 parameters: capacity enough to go far below Adam's plateau
    params, residual, x, y = _pendulum_problem(key(), n_layers=4, width=16)
    n = 40
    p, state, infos = _run(LevenbergMarquardt(), params, residual, x, y, n, key())
    new_loss = np.asarray(infos.new_loss)
    loss = np.asarray(infos.loss)
    assert np.all(new_loss <= loss)  # never increases
    np.testing.assert_allclose(loss[1:], new_loss[:-1], rtol=1e-12)  # full batch: chained
    assert int(state.steps) == n and int(state.accepted) == int(np.sum(infos.accepted))
    lm_rel = float(infos.new_relative_loss[-1])

    # plain Adam, the same number of full-batch iterations, its best learning rate
    def rel_loss(p):
        r = jax.vmap(residual, (None, 0, 0))(p, x, y)
        return jnp.sqrt(jnp.sum(jnp.square(r)) / jnp.sum(jnp.square(y)))

    def adam(lr):
        opt = optax.adam(lr)

        def body(c, _):
            p, s = c
            g = jax.grad(rel_loss)(p)
            u, s = opt.update(g, s, p)
            return (optax.apply_updates(p, u), s), None

        (p, _), _ = jax.lax.scan(body, (params, opt.init(params)), None, length=n)
        return rel_loss(p)

    with jax.numpy_dtype_promotion("standard"):
        adam_rel = min(float(jax.jit(adam)(lr)) for lr in (1e-3, 1e-2, 1e-1))
    assert lm_rel < adam_rel / 10, (lm_rel, adam_rel)


def test_exponential_fit_recovers_parameters():
    params, residual, t, y = _exp_problem()
    p, _, infos = _run(LevenbergMarquardt(chunk_size=8), params, residual, t, y, 40,
                       jax.random.PRNGKey(0))
    np.testing.assert_allclose([float(p["a"]), float(p["b"]), float(p["c"])],
                               [2.0, -1.3, 0.3], rtol=1e-7)
    assert np.all(np.diff(np.asarray(infos.new_loss)) <= 0)


def test_levenberg_damping_identity_also_converges():
    params, residual, t, y = _exp_problem()
    lm = LevenbergMarquardt(marquardt_scaling=False, damping=1.0)
    _, _, infos = _run(lm, params, residual, t, y, 60, jax.random.PRNGKey(0))
    assert float(infos.new_relative_loss[-1]) < 1e-6


def test_rejected_step_keeps_params_and_raises_damping():
    # r(θ) = θ³ − 1 from θ = 0.1: the (nearly undamped) Gauss–Newton step overshoots to
    # θ ≈ 33 where the loss is enormous.
    params = {"theta": jnp.asarray(0.1)}
    x = jnp.zeros((3, 1))
    y = jnp.zeros((3, 1))

    def residual(p, xi, yi):
        return jnp.reshape(p["theta"] ** 3 - 1.0, (1,)) + xi - yi

    lm = LevenbergMarquardt(damping=1e-6, max_tries=1, increase=5.0)
    state = lm.init(params)
    new, state1, info = lm.step(params, state, residual, x, y)
    assert not bool(info.accepted)
    assert float(new["theta"]) == 0.1
    assert float(info.new_loss) == float(info.loss)
    np.testing.assert_allclose(float(state1.damping), 5e-6, rtol=1e-12)
    assert int(state1.rejected) == 1 and int(state1.accepted) == 0 and int(state1.steps) == 1
    # with more tries, λ grows until a step is accepted, which lowers the loss
    lm = LevenbergMarquardt(damping=1e-6, max_tries=30)
    new, state2, info = lm.step(params, lm.init(params), residual, x, y)
    assert bool(info.accepted) and int(info.tries) > 1
    assert float(info.new_loss) < float(info.loss)
    assert float(state2.damping) > 1e-6
    assert not bool(info.stalled)


def test_stalls_at_the_minimum():
    params, residual, t, y = _exp_problem()
    exact = {"a": jnp.asarray(2.0), "b": jnp.asarray(-1.3), "c": jnp.asarray(0.3)}
    lm = LevenbergMarquardt(max_damping=1e3, max_tries=20)
    p, state, info = lm.step(exact, lm.init(exact), residual, t, y)
    # no step can lower a (round-off) minimum: the trials' λ climbs to its cap, the
    # parameters stay, and the next iteration starts from at most max_growth × λ
    assert not bool(info.accepted) and bool(info.stalled)
    assert float(info.damping) == 1e3
    np.testing.assert_allclose(float(state.damping), 1e-3 * lm.max_growth, rtol=1e-12)
    assert all(float(p[k]) == float(exact[k]) for k in exact)


def _nearly_insensitive_problem(dtype=jnp.float64):
    """A line fitted to `sin(2x) + 1/2` plus two parameters a network's switched-off unit
    has: `u`, whose column of J is 1e-6 of the others' (its diag(JᵀJ) ~ 1e-12 of the
    largest) while the residual is curved in it (`10 u² cos 3x`), and `v`, which does
    not enter the residual (a zero column)."""
    x = jnp.linspace(-1.0, 1.0, 30, dtype=dtype)
    y = jnp.sin(2.0 * x) + 0.5

    def residual(p, xi, yi):
        u = p["u"]
        bump = (1e-6 * u + 10.0 * u**2 + 0.0 * p["v"]) * jnp.cos(3.0 * xi)
        return jnp.reshape(p["a"] * xi + p["b"] - yi + bump, (1,))

    params = {k: jnp.zeros((), dtype) for k in ("a", "b", "u", "v")}
    X = np.stack([np.asarray(x), np.ones(30)], axis=1)
    line = np.linalg.lstsq(X, np.asarray(y), rcond=None)[0]
    return params, residual, x, y, float(np.sum((X @ line - np.asarray(y)) ** 2))


def _until_stalled(lm, params, residual, x, y, n=60):
    """Iterations until `lm.patience` consecutive stalls (`geomlearn.fit`'s rule) or `n`:
    the infos of each."""
    p, s, infos, stalls = params, lm.init(params), [], 0
    step = jax.jit(lambda p, s: lm.step(p, s, residual, x, y))
    while len(infos) < n and stalls < lm.patience:
        p, s, info = step(p, s)
        infos.append(info)
        stalls = stalls + 1 if bool(info.stalled) else 0
    return p, infos


def test_a_nearly_insensitive_parameter_neither_blocks_nor_stalls_the_fit():
    # before: D = diag(A) + 1e-12 max diag(A) hardly damped u, every trial of the first
    # three iterations stepped far along it and was rejected, and patience = 3 stopped
    # the fit there, at the starting loss
    params, residual, x, y, S_min = _nearly_insensitive_problem()
    lm = LevenbergMarquardt()
    p, infos = _until_stalled(lm, params, residual, x, y)
    assert bool(infos[0].accepted)  # the guarded scaling: the first trial already helps
    S0 = float(infos[0].loss)
    assert float(infos[-1].new_loss) < 1.001 * S_min < 0.05 * S0
    # the floor set as low as before: the first iterations fail, but at a λ far below
    # max_damping with steps far above round-off: not a stall, and the fit goes on
    weak = LevenbergMarquardt(scaling_floor=1e-15)
    p, infos = _until_stalled(weak, params, residual, x, y)
    first = infos[: weak.patience]
    assert not any(bool(i.accepted) for i in first)
    assert not any(bool(i.stalled) for i in first)
    assert all(float(i.damping) < weak.max_damping for i in first)
    assert float(infos[-1].new_loss) < 1.001 * S_min
    # at the minimum it does stall, and stops
    assert all(bool(i.stalled) for i in infos[-weak.patience:]) and len(infos) < 60
    with pytest.raises(ValueError, match="scaling_floor"):
        LevenbergMarquardt(scaling_floor=0.0)
    with pytest.raises(ValueError, match="scaling_keep"):
        LevenbergMarquardt(scaling_keep=2.0)


def test_the_scaling_is_the_running_maximum_of_the_diagonal():
    params, residual, x, y, _ = _nearly_insensitive_problem()
    lm = LevenbergMarquardt()
    state = lm.init(params)
    assert state.scaling.shape == (4,) and not np.any(np.asarray(state.scaling))
    p, state1, _ = lm.step(params, state, residual, x, y)
    A, _, _ = normal_equations(residual, params, x, y)
    np.testing.assert_allclose(np.asarray(state1.scaling), np.diag(np.asarray(A)), rtol=1e-12)
    # a larger diagonal of an earlier iteration is kept: the maximum, entry by entry
    larger = LMState(*state1[:4], scaling=2.0 * state1.scaling)
    _, state2, _ = lm.step(p, larger, residual, x, y)
    A1, _, _ = normal_equations(residual, p, x, y)
    expected = np.maximum(np.asarray(larger.scaling), np.diag(np.asarray(A1)))
    np.testing.assert_allclose(np.asarray(state2.scaling), expected, rtol=1e-12)
    assert np.any(np.asarray(larger.scaling) > np.diag(np.asarray(A1)))  # some entry kept
    assert GaussNewton().init(params).scaling is None
    assert LevenbergMarquardt(marquardt_scaling=False).init(params).scaling is None
    # a column that has faded (a switched-off unit) keeps a share of its largest earlier
    # entry, so its trial step stays bounded; one that was never larger gets the floor
    A, g = jnp.diag(jnp.array([1.0, 0.0])), jnp.array([0.0, 1e-6])
    faded = lm._trial_solver(A, g, jnp.array([1.0, 1.0]), jnp.float64)(1.0, 1.0)
    assert float(faded[1]) == pytest.approx(-1e-6 / (lm.scaling_keep + 1e-12), rel=1e-12)
    never = lm._trial_solver(A, g, jnp.array([1.0, 0.0]), jnp.float64)(1.0, 1.0)
    assert float(never[1]) == pytest.approx(-1e-6 / (lm.scaling_floor + 1e-12), rel=1e-12)
    assert abs(float(never[1])) > 1e5 * abs(float(faded[1]))


def test_one_failed_iteration_raises_the_damping_by_at_most_max_growth():
    # before: a failed iteration of 10 trials raised λ by increase**10 ≈ 1e6, and
    # recovering took ~13 accepted iterations; now by at most max_growth
    params, residual, t, y = _exp_problem()
    exact = {"a": jnp.asarray(2.0), "b": jnp.asarray(-1.3), "c": jnp.asarray(0.3)}
    for growth in (1.0, 16.0, 100.0):
        lm = LevenbergMarquardt(max_growth=growth)
        _, state, info = lm.step(exact, lm.init(exact), residual, t, y)
        assert not bool(info.accepted) and int(info.tries) == lm.max_tries
        assert float(state.damping) <= lm.damping * growth * (1 + 1e-12)
        assert float(info.damping) > lm.damping * 1e5  # the trials themselves did climb
    # an accepted step after a climb within the iteration is capped too
    lm = LevenbergMarquardt(damping=1e-6, max_tries=30, max_growth=4.0)
    p0 = {"theta": jnp.asarray(0.1)}

    def cubic(p, xi, yi):
        return jnp.reshape(p["theta"] ** 3 - 1.0, (1,)) + xi - yi

    _, state, info = lm.step(p0, lm.init(p0), cubic, jnp.zeros((3, 1)), jnp.zeros((3, 1)))
    assert bool(info.accepted) and float(state.damping) <= 4e-6 * (1 + 1e-12)
    with pytest.raises(ValueError, match="max_growth must be a number >= 1"):
        LevenbergMarquardt(max_growth=0.5)


def test_gauss_newton_backtracks_overshooting_step():
    params = {"theta": jnp.asarray(0.1)}
    x = jnp.zeros((2, 1))
    y = jnp.zeros((2, 1))

    def residual(p, xi, yi):
        return jnp.reshape(p["theta"] ** 3 - 1.0, (1,)) + xi - yi

    gn = GaussNewton(max_tries=20)
    new, state, info = gn.step(params, gn.init(params), residual, x, y)
    assert bool(info.accepted) and 0 < float(info.step_scale) < 1
    assert float(info.new_loss) < float(info.loss)
    assert float(state.damping) == 0.0


# ---------------------------------------------------------------------- limits


def test_too_many_parameters_raise(key):
    params, residual, x, y = _pendulum_problem(key())
    P = ravel_pytree(params)[0].size
    lm = LevenbergMarquardt(max_params=P - 1)
    with pytest.raises(ValueError, match=rf"P = {P} parameters.*max_params = {P - 1}.*Adam"):
        lm.init(params)
    with pytest.raises(ValueError, match="max_params"):
        lm.step(params, LevenbergMarquardt().init(params), residual, x, y)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"damping": -1.0}, "damping must be"),
        ({"increase": 1.0}, "increase must be"),
        ({"decrease": 0.5}, "decrease must be"),
        ({"max_tries": 0}, "max_tries must be"),
        ({"chunk_size": 0}, "chunk_size must be"),
        ({"subset": 0}, "subset must be"),
        ({"jacobian": "bwd"}, "jacobian must be"),
    ],
)
def test_bad_configuration_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LevenbergMarquardt(**kwargs)


def test_gauss_newton_refuses_damping():
    with pytest.raises(ValueError, match="undamped"):
        GaussNewton(damping=1.0)
    assert GaussNewton().gauss_newton and not LevenbergMarquardt().gauss_newton


def test_mismatched_samples_raise():
    params, residual, t, y = _exp_problem()
    lm = LevenbergMarquardt()
    with pytest.raises(ValueError, match=r"\(41,\) and \(40,\)"):
        lm.step(params, lm.init(params), residual, t, y[:40])


# ------------------------------------------------------------ jit, dtypes, keys


def test_jit_equals_eager_and_config_is_hashable(key):
    params, residual, x, y = _pendulum_problem(key())
    lm = LevenbergMarquardt(chunk_size=16)
    hash(lm)
    assert lm == LevenbergMarquardt(chunk_size=16)
    state = lm.init(params)
    k = key()
    eager = lm.step(params, state, residual, x, y, k)
    jitted = jax.jit(lambda p, s, kk: lm.step(p, s, residual, x, y, kk))(params, state, k)
    for a, b in zip(jax.tree_util.tree_leaves(eager), jax.tree_util.tree_leaves(jitted)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
    # the state is a pytree of arrays (checkpointable)
    assert isinstance(state, LMState) and isinstance(eager[2], LMInfo)
    assert all(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(state))


def test_float32_parameters(key):
    params, residual, x, y = _pendulum_problem(key(), dtype=jnp.float32)
    p, state, infos = _run(LevenbergMarquardt(), params, residual, x, y, 10, key())
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(p))
    assert state.damping.dtype == jnp.float32
    assert infos.loss.dtype == jnp.float32
    assert float(infos.new_relative_loss[-1]) < 0.5 * float(infos.relative_loss[0])
    assert np.all(np.diff(np.asarray(infos.new_loss)) <= 0)


def test_mixed_dtype_parameters():
    params, residual, t, y = _exp_problem()
    params = dict(params, a=params["a"].astype(jnp.float32))

    def mixed_residual(p, ti, yi):
        return residual(dict(p, a=p["a"].astype(jnp.float64)), ti, yi)

    p, _, infos = _run(LevenbergMarquardt(), params, mixed_residual, t, y, 30,
                       jax.random.PRNGKey(0))
    assert p["a"].dtype == jnp.float32 and p["b"].dtype == jnp.float64
    assert infos.loss.dtype == jnp.float64  # computed in the highest dtype
    np.testing.assert_allclose(float(p["a"]), 2.0, rtol=1e-5)


def test_subset_is_deterministic_given_key(key):
    params, residual, x, y = _pendulum_problem(key())
    lm = LevenbergMarquardt(subset=16, chunk_size=5)
    state = lm.init(params)
    k1, k2 = key(), key()
    step = jax.jit(lambda kk: lm.step(params, state, residual, x, y, kk))
    a, b, c = step(k1), step(k1), step(k2)
    np.testing.assert_array_equal(ravel_pytree(a[0])[0], ravel_pytree(b[0])[0])
    assert int(a[2].n_samples) == 16
    assert float(a[2].loss) != float(c[2].loss)  # another subset
    # the subset's sum of squares covers 16 of the 40 samples: below the full one
    full = LevenbergMarquardt().step(params, state, residual, x, y)
    assert float(a[2].loss) < float(full[2].loss) and int(full[2].n_samples) == x.shape[0]
    with pytest.raises(ValueError, match="needs a key"):
        lm.step(params, state, residual, x, y, None)


# ------------------------------------------------------------ two finals, one base


def test_gauss_newton_is_its_own_final_class():
    from geomlearn.second_order import AbstractDampedLeastSquares

    gn, lm = GaussNewton(), LevenbergMarquardt()
    assert isinstance(GaussNewton, type) and isinstance(gn, GaussNewton)
    assert not issubclass(GaussNewton, LevenbergMarquardt)
    assert not issubclass(LevenbergMarquardt, GaussNewton)
    assert isinstance(gn, AbstractDampedLeastSquares) and isinstance(lm, AbstractDampedLeastSquares)
    assert gn.damping == 0.0 and gn.rcond == gl.second_order.GAUSS_NEWTON_RCOND
    assert GaussNewton(rcond=None).rcond is None and GaussNewton(damping=0).gauss_newton
    hash(gn)
    assert gn == GaussNewton() and gn != lm
    with pytest.raises(TypeError):
        AbstractDampedLeastSquares()
    # the undamped method is GaussNewton, not a LevenbergMarquardt without damping
    with pytest.raises(ValueError, match="damping must be a number > 0.*GaussNewton"):
        LevenbergMarquardt(damping=0.0)


def test_normal_equations_refuse_an_unknown_jacobian_mode():
    params, residual, t, y = _exp_problem()
    with pytest.raises(ValueError, match=r"jacobian must be one of \['auto', 'fwd', 'rev'\]"):
        normal_equations(residual, params, t, y, jacobian="bwd")
