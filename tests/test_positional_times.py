"""The sinusoidal encoding at real times: `PositionalEncoding(d)(x, times)` and `times=`
on the transformers (no parameters, identity Jacobian, 1 ulp against an exact reference,
structure kept for every parameter value, clear errors)."""

from decimal import Decimal, localcontext

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomlearn import PositionalEncoding, positional_encoding
from geomlearn.geometry import symplecticity_residual, volume_residual
from geomlearn.models import (
    LinearSymplecticTransformer,
    SymplecticTransformer,
    Transformer,
    VolumePreservingTransformer,
)

from _helpers import normal, random_module

# ---------------------------------------------------------------------------------------
# An exact reference, independent of the library: Decimal arithmetic at 90 digits, pi by
# the Gauss-Legendre iteration, the angle t * w exact (both floats converted exactly),
# sin and cos by their Taylor series after removing whole turns.

_DIGITS = 90


def _decimal_pi() -> Decimal:
    with localcontext() as ctx:
        ctx.prec = _DIGITS + 10
        a, b, t, p = Decimal(1), 1 / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
        for _ in range(9):
            a, b, t, p = (a + b) / 2, (a * b).sqrt(), t - p * ((a - b) / 2) ** 2, 2 * p
        return (a + b) ** 2 / (4 * t)


_PI = _decimal_pi()


def _sin_cos(x: Decimal) -> tuple[Decimal, Decimal]:
    with localcontext() as ctx:
        ctx.prec = _DIGITS
        r = x - (x / (2 * _PI)).to_integral_value() * 2 * _PI
        sums, term, n = [Decimal(0)] * 4, Decimal(1), 0
        while abs(term) > Decimal(10) ** -_DIGITS or n < 2:
            sums[n % 4] += term  # r^n / n!, sorted by n mod 4
            n += 1
            term = term * r / n
        return sums[1] - sums[3], sums[0] - sums[2]


def _reference(times, d, base=10000.0):
    """The exact table at `times` (floats of any dtype) as a list of Decimal rows."""
    w = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # the table's definition
    rows = []
    for t in times:
        row = []
        for c in range(d):
            with localcontext() as ctx:
                ctx.prec = _DIGITS
                s, co = _sin_cos(Decimal(float(t)) * Decimal(float(w[c // 2])))
            row.append(s if c % 2 == 0 else co)
        rows.append(row)
    return rows


def _worst_ulps(values, exact, dtype) -> float:
    """max |value - exact| in units of the spacing of |exact| rounded to `dtype`."""
    worst = 0.0
    for vrow, erow in zip(np.asarray(values), exact):
        for v, e in zip(vrow, erow):
            spacing = np.spacing(np.abs(np.float64(e)).astype(dtype))
            worst = max(worst, float(abs(Decimal(float(v)) - e) / Decimal(float(spacing))))
    return worst


def test_reference_checks_itself():
    """The reference against Python's float64 sin/cos on small angles."""
    ref = _reference([0.0, 0.5, 3.0, -2.25], 4)
    for row, t in zip(ref, [0.0, 0.5, 3.0, -2.25]):
        expected = [np.sin(t), np.cos(t), np.sin(t / 100), np.cos(t / 100)]
        np.testing.assert_allclose([float(v) for v in row], expected, rtol=0, atol=2e-16)


# ---------------------------------------------------------------------------------------
# The encoding


def _times(T, dtype, seed=0, low=-5.0, high=1e5):
    """`T` strictly increasing times in `dtype`: uniform in [low, high] with a few tiny,
    fractional and whole values."""
    rng = np.random.default_rng(seed)
    special = np.array([0.0, 1e-30, 3e-8, 0.3, 0.7, 0.99, 1.0, 1.5, 2.0, 1000.5], dtype)
    t = np.unique(np.concatenate([rng.uniform(low, high, T).astype(dtype), special]))
    return t[:T] if t.size >= T else t


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_no_parameters_and_identity_jacobian(dtype):
    pe = PositionalEncoding(3)
    assert jax.tree_util.tree_leaves(eqx.filter(pe, eqx.is_inexact_array)) == []
    times = jnp.asarray([-1.5, 0.25, 7.0, 1e4 + 0.125, 9e4], dtype)
    x = jnp.ones((5, 3), dtype)

    @jax.jit  # one program (eagerly, every operation compiles alone)
    def jacobian_at_zero_and_table(x, times):
        J = jax.jacfwd(lambda z: pe(z, times))(x)
        return J, pe(jnp.zeros_like(x), times), pe.table(x, times)

    J, at_zero, table = jacobian_at_zero_and_table(x, times)
    np.testing.assert_array_equal(np.asarray(J).reshape(15, 15), np.eye(15))
    # the constant added is the table, whatever the input
    np.testing.assert_array_equal(at_zero, table)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("T", [300, 20_000])
def test_integer_times_agree_with_the_integer_table(dtype, T):
    """Times 0..T-1 give the integer table to within 1 ulp (both are within 1 ulp of the
    exact value, computed with different work: short float32 tables are float64 NumPy
    constants, long ones and the times path work in float32; the limb counts differ)."""
    d = 2
    by_times, by_rows = jax.jit(lambda: (  # one program (eagerly, every operation alone)
        PositionalEncoding(d).table(jnp.zeros((T, d), dtype), jnp.arange(T, dtype=dtype)),
        positional_encoding(T, d, dtype=dtype)))()
    diff = np.abs(np.asarray(by_times, np.float64) - np.asarray(by_rows, np.float64))
    spacing = np.spacing(np.abs(np.asarray(by_rows)))
    assert (diff <= spacing).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_ulp_against_the_exact_reference_at_T_100000(dtype):
    """A window of 100,000 real times up to 1e5 (negative, tiny and fractional ones
    included): the rows with the smallest entries and random rows within 1 ulp of the
    exact values; the plain formula sin(fl(t w)) in the same dtype fails on them."""
    d = 8
    times = _times(100_000, dtype)
    P = np.asarray(PositionalEncoding(d)(jnp.zeros((times.size, d), dtype), jnp.asarray(times)))
    rng = np.random.default_rng(1)
    rows = np.unique(np.concatenate([
        np.argsort(np.abs(P).min(axis=1))[:60], rng.integers(0, times.size, 60),
        np.searchsorted(times, [0.0, 1e-30, 0.3, 0.99, 1.0, 1000.5])]))
    exact = _reference(times[rows], d)
    assert _worst_ulps(P[rows], exact, dtype) <= 1.0
    w = (10000.0 ** (-np.arange(0, d, 2) / d)).astype(dtype)
    angles = times[rows, None] * np.repeat(w, 2)[None, :d]  # rounded in `dtype`
    plain = np.where(np.arange(d) % 2 == 0, np.sin(angles), np.cos(angles)).astype(dtype)
    assert _worst_ulps(plain, exact, dtype) > 2.0  # negative control


def test_jit_vmap_and_leading_axes():
    pe = PositionalEncoding(4)
    times = jnp.asarray(_times(7, np.float32, seed=2, high=50.0))
    x = normal(np.random.default_rng(0), (3, 7, 4), jnp.float32)
    eager = pe(x, times)
    batch = jnp.asarray(np.stack([np.asarray(times), np.asarray(times) * np.float32(1.5)]))

    @jax.jit  # every compiled form in one program
    def compiled(x, times, batch):
        out = jax.vmap(lambda z, t: pe(z, t))(x[:2], batch)
        return pe(x, times), pe(x[0], times), out, pe(x[1], batch[1])

    jitted, first, out, second = compiled(x, times, batch)
    np.testing.assert_array_equal(jitted, eager)
    np.testing.assert_array_equal(first, eager[0])  # leading axes broadcast
    np.testing.assert_array_equal(out[1], second)


@pytest.mark.parametrize("times, message", [
    ([0.0, 1.0, 2.0], "shape (4,)"),
    ([[0.0, 1.0, 2.0, 3.0]], "shape (4,)"),
    ([0.0, 1.0, np.nan, 3.0], "finite"),
    ([0.0, 1.0, 2.0, 3e9], "below 2**31"),
    ([0.0, 2.0, 2.0, 3.0], "strictly increasing times, got times[2] = 2.0 after times[1] = 2.0"),
    ([3.0, 2.0, 1.0, 0.0], "strictly increasing"),
])
def test_bad_times_get_a_one_line_error(times, message):
    pe = PositionalEncoding(2)
    with pytest.raises(ValueError) as info:
        pe(jnp.zeros((4, 2)), jnp.asarray(times))
    assert message in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(TypeError, match="real times"):
        pe(jnp.zeros((4, 2)), jnp.ones(4, bool))


def test_under_jit_only_the_shape_is_checked():
    pe = PositionalEncoding(2)
    f = jax.jit(lambda z, t: pe(z, t))
    with pytest.raises(ValueError, match="shape"):
        f(jnp.zeros((4, 2)), jnp.arange(3.0))
    f(jnp.zeros((4, 2)), jnp.asarray([3.0, 2.0, 1.0, 0.0]))  # values are not checked


# ---------------------------------------------------------------------------------------
# The transformers


def _random(build, seed=1, scale=0.5):
    """The model `build()` makes with every inexact array drawn from N(0, scale²) (position
    gains away from zero), drawn by NumPy from its skeleton."""
    return random_module(build, np.random.default_rng(seed), scale)


def _states(shape, seed=2):
    return normal(np.random.default_rng(seed), shape)


_T = 5

_TIMES = jnp.asarray([-0.7, 0.4, 1.9, 2.05, 6.5])  # non-uniform steps
_REVERSED, _SHORT = jnp.asarray([6.5, 2.05, 1.9, 0.4, -0.7]), jnp.asarray([-0.7, 0.4, 1.9])


@eqx.filter_jit
def _with_times(check, model, Z, times, calls=("times", "indices", "plain")):
    """In one compiled program: `check` (a structure residual) of
    `z -> model(z, times=times)` at `Z`, then what `calls` names: that map at `Z`
    (`"times"`), at the rows' indices as times (`"indices"`), the plain call `model(Z)`
    (`"plain"`), and for the VPT the inverse at `model(Z, times)` (`"inverse"`) and the
    inference form at `Z` (`"inference"`), both at `times`."""
    forms = {
        "times": lambda: model(Z, times=times),
        "indices": lambda: model(Z, times=jnp.arange(Z.shape[0], dtype=Z.dtype)),
        "plain": lambda: model(Z),
        "inverse": lambda: model.inverse(model(Z, times=times), times=times),
        "inference": lambda: model.inference_form()(Z, times=times),
    }
    return check(lambda y: model(y, times=times), Z), *[forms[c]() for c in calls]


_SYMPLECTIC = [
    (SymplecticTransformer, {}, "amplitude"),
    (SymplecticTransformer, {}, "bias"),
    (SymplecticTransformer, {}, "conjugate"),
    (LinearSymplecticTransformer, {"seq_length": _T}, "amplitude"),
    (LinearSymplecticTransformer, {"seq_length": _T}, "scaled"),
]


@pytest.mark.parametrize("cls, extra, signal", _SYMPLECTIC)
def test_symplectic_with_times(cls, extra, signal):
    model = _random(lambda: cls(4, **extra, n_sympnet=1, positional_encoding=signal,
                                key=jax.random.PRNGKey(0)))
    Z = _states((_T, 4))
    residual, timed, indexed, plain = _with_times(symplecticity_residual, model, Z, _TIMES)
    assert residual < 1e-12
    # the times are read: other times, another map; the rows' indices, the plain call
    assert np.abs(timed - plain).max() > 1e-3
    np.testing.assert_allclose(indexed, plain, rtol=0, atol=1e-13)


def test_symplectic_negative_control():
    """The standard transformer with the same times is not symplectic."""
    model = _random(lambda: Transformer(4, L=1, n_blocks=0, positional_encoding="amplitude",
                                        key=jax.random.PRNGKey(0)))
    Z = _states((_T, 4))
    residual, timed, plain = _with_times(symplecticity_residual, model, Z, _TIMES,
                                         calls=("times", "plain"))
    assert residual > 1e-2
    assert np.abs(timed - plain).max() > 1e-3


@pytest.mark.parametrize("signal", ["split-amplitude", "amplitude", "bias", "input", "conjugate"])
def test_volume_preserving_with_times(signal):
    model = _random(lambda: VolumePreservingTransformer(3, positional_encoding=signal,
                                                        key=jax.random.PRNGKey(0)))
    Z = _states((_T, 3))
    residual, Y, plain, inverse, inference = _with_times(
        volume_residual, model, Z, _TIMES, calls=("times", "plain", "inverse", "inference"))
    assert residual < 1e-12
    assert np.abs(Y - plain).max() > 1e-3
    np.testing.assert_allclose(inverse, Z, rtol=0, atol=1e-10)
    np.testing.assert_allclose(inference, Y, rtol=0, atol=1e-12)


def test_volume_negative_control():
    """The arbitrary weighting with the same times does not preserve volume."""
    model = _random(lambda: VolumePreservingTransformer(3, weighting="arbitrary",
                                                        positional_encoding="split-amplitude",
                                                        key=jax.random.PRNGKey(0)))
    Z = _states((_T, 3))
    assert _with_times(volume_residual, model, Z, _TIMES, calls=())[0] > 1e-3


def test_models_under_jit_and_vmap_and_errors():
    model = _random(lambda: SymplecticTransformer(4, n_sympnet=1, positional_encoding="amplitude",
                                                  key=jax.random.PRNGKey(0)))
    Z = _states((2, _T, 4))
    times = np.stack([np.asarray(_TIMES), np.asarray(_TIMES) + 3.0])
    out = jax.jit(jax.vmap(lambda z, t: model(z, times=t)))(Z, jnp.asarray(times))
    # against one eager call (rows taken on the host: no compiled slicing)
    second = model(jnp.asarray(np.asarray(Z)[1]), times=jnp.asarray(times[1]))
    np.testing.assert_allclose(out[1], second, rtol=0, atol=1e-13)
    for m in (model, _random(lambda: Transformer(4, key=jax.random.PRNGKey(0))),
              _random(lambda: VolumePreservingTransformer(3, key=jax.random.PRNGKey(0)))):
        with pytest.raises(ValueError, match="strictly increasing"):
            m(jnp.zeros((_T, m.dim)), times=_REVERSED)
        with pytest.raises(ValueError, match=r"shape \(5,\)"):
            m(jnp.zeros((_T, m.dim)), times=_SHORT)
