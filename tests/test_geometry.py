from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from geomlearn.geometry import (
    jacobian,
    symplectic_matrix,
    symplecticity_residual,
    volume_residual,
)


def test_symplectic_matrix_structure():
    for n in (1, 2, 3):
        J = np.asarray(symplectic_matrix(n, dtype=jnp.float64))
        assert J.shape == (2 * n, 2 * n)
        np.testing.assert_array_equal(J[:n, n:], np.eye(n))
        np.testing.assert_array_equal(J[n:, :n], -np.eye(n))
        np.testing.assert_array_equal(J[:n, :n], 0)
        np.testing.assert_array_equal(J.T, -J)
        np.testing.assert_array_equal(J @ J, -np.eye(2 * n))


def test_symplectic_matrix_dtype_and_errors():
    assert symplectic_matrix(2, dtype=jnp.float32).dtype == jnp.float32
    assert symplectic_matrix(2).dtype == jnp.float64  # x64 on in the suite
    with pytest.raises(ValueError, match="n must be >= 1"):
        symplectic_matrix(0)
    with pytest.raises(TypeError):
        symplectic_matrix(1.5)


def test_jacobian_of_linear_map_is_its_matrix(key):
    A = jax.random.normal(key(), (6, 6))
    np.testing.assert_allclose(jacobian(lambda z: A @ z, jnp.ones(6)), A, rtol=0, atol=1e-14)


def test_jacobian_window_is_row_major(key):
    B = jax.random.normal(key(), (3, 3))  # mixes time steps
    Z = jax.random.normal(key(), (3, 2))
    M = jacobian(lambda W: B @ W, Z)
    # f(Z)_{i a} = sum_j B_ij Z_{j a} → M = B ⊗ I_2 for row-major flattening.
    np.testing.assert_allclose(M, np.kron(np.asarray(B), np.eye(2)), atol=1e-14)


def test_jacobian_rejects_bad_shapes():
    with pytest.raises(ValueError, match="shape"):
        jacobian(lambda z: z, jnp.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="entries"):
        jacobian(lambda z: z[:1], jnp.ones(2))
    with pytest.raises(TypeError, match="floating"):
        jacobian(lambda z: z, jnp.ones(2, dtype=jnp.int32))


def rotation(theta):
    c, s = np.cos(theta), np.sin(theta)
    return jnp.array([[c, -s], [s, c]])


def nonlinear_shear(z):  # q ← q + sin(p): symplectic
    n = z.shape[-1] // 2
    q, p = z[..., :n], z[..., n:]
    return jnp.concatenate([q + jnp.sin(p), p], axis=-1)


def test_symplectic_maps_have_tiny_residual(key):
    z = jax.random.normal(key(), (2,))
    for theta in (0.3, 1.7, -2.9):
        R = rotation(theta)
        assert symplecticity_residual(lambda v: R @ v, z) <= 1e-14
        assert volume_residual(lambda v: R @ v, z) <= 1e-14
    assert symplecticity_residual(nonlinear_shear, z) <= 1e-14
    z4 = jax.random.normal(key(), (4,))
    assert symplecticity_residual(nonlinear_shear, z4) <= 1e-14
    assert volume_residual(nonlinear_shear, z4) <= 1e-14


def test_scaling_is_caught():
    z = jnp.array([0.3, -0.2])
    res = symplecticity_residual(lambda v: 1.1 * v, z)
    # M = 1.1 I → MᵀJM − J = 0.21 J → relative residual exactly 0.21.
    np.testing.assert_allclose(res, 0.21, rtol=1e-12)
    np.testing.assert_allclose(volume_residual(lambda v: 1.1 * v, z), 0.21, rtol=1e-12)


def test_volume_preserving_but_not_symplectic():
    # (q1, q2, p1, p2) ↦ (2 q1, q2 / 2, p1, p2) preserves volume but not ω.
    # (Whereas diag(2, 1, 1/2, 1), which scales q1 and p1 inversely, would be symplectic.)
    D = jnp.diag(jnp.array([2.0, 0.5, 1.0, 1.0]))
    z = jnp.ones(4)
    assert volume_residual(lambda v: D @ v, z) <= 1e-14
    assert symplecticity_residual(lambda v: D @ v, z) > 0.1


def test_row_wise_map_inherits_row_residual(key):
    Z = jax.random.normal(key(), (5, 4))
    for row_map in (nonlinear_shear, lambda v: 1.1 * v, lambda v: v + 0.1 * jnp.tanh(v)):
        window_res = symplecticity_residual(jax.vmap(row_map), Z)
        row_res = [symplecticity_residual(row_map, z) for z in Z]
        if max(row_res) < 1e-14:
            assert window_res < 1e-14
        else:
            # Each row contributes its own block; the residual is the RMS of the rows'.
            expected = np.sqrt(np.mean(np.square(row_res)))
            np.testing.assert_allclose(window_res, expected, rtol=1e-10)


def test_mixing_time_steps(key):
    T, n = 4, 2
    Z = jax.random.normal(key(), (T, 2 * n))
    A = jax.random.normal(key(), (T, T))

    def shear_with(B):
        def f(W):
            Q, P = W[:, :n], W[:, n:]
            return jnp.concatenate([Q + B @ P, P], axis=1)

        return f

    assert symplecticity_residual(shear_with(A + A.T), Z) <= 1e-13  # symmetric: symplectic
    assert symplecticity_residual(shear_with(A), Z) > 1e-2  # non-symmetric: not
    # Both are shears (unit-triangular Jacobian), so both preserve volume.
    assert volume_residual(shear_with(A), Z) <= 1e-13


def test_window_volume_residual(key):
    Z = jax.random.normal(key(), (3, 3))  # odd d is fine for volume
    def triangular_shear(W):  # column 1 += sin(column 0), column 2 += column 0 * column 1
        c0, c1 = W[:, 0], W[:, 1] + jnp.sin(W[:, 0])
        return jnp.stack([c0, c1, W[:, 2] + c0 * c1], axis=1)

    assert volume_residual(triangular_shear, Z) <= 1e-14
    assert volume_residual(lambda W: W * 1.01, Z) > 0.05  # 1.01**9 - 1 ≈ 0.094


def test_odd_dimension_rejected_for_symplecticity():
    with pytest.raises(ValueError, match="even"):
        symplecticity_residual(lambda v: v, jnp.ones(3))
    with pytest.raises(ValueError, match="even"):
        symplecticity_residual(lambda v: v, jnp.ones((2, 3)))


def test_residuals_follow_input_dtype():
    z32 = jnp.ones(2, dtype=jnp.float32)
    assert symplecticity_residual(lambda v: v, z32).dtype == jnp.float32
    assert volume_residual(lambda v: v, z32).dtype == jnp.float32


def test_residuals_are_jittable(key):
    z = jax.random.normal(key(), (4,))
    f = jax.jit(lambda x: symplecticity_residual(nonlinear_shear, x))
    assert f(z) <= 1e-14


def test_structure_residuals_are_the_maxima_over_the_points():
    from geomlearn.geometry import jacobian, structure_residuals

    points = jnp.array([[0.3, -0.2], [1.0, 0.5], [-0.7, 0.1]])

    def shear(z):  # symplectic: (q + p², p)
        return jnp.stack([z[0] + z[1] ** 2, z[1]])

    def scale(z):  # neither: det = 1.21 everywhere
        return 1.1 * z

    res = structure_residuals(shear, points, 2)
    assert list(res) == ["symplecticity", "volume", "condition"]
    assert res["symplecticity"] < 1e-15 and res["volume"] < 1e-15
    expected = max(float(jnp.linalg.cond(jacobian(shear, z))) for z in points)
    np.testing.assert_allclose(res["condition"], expected, rtol=1e-12)
    bad = structure_residuals(scale, points, 2)
    np.testing.assert_allclose(bad["volume"], 1.21 - 1, rtol=1e-12)
    np.testing.assert_allclose(bad["symplecticity"], 1.21 - 1, rtol=1e-12)
    odd = structure_residuals(lambda z: z[::-1], jnp.ones((2, 3)), 3)
    assert set(odd) == {"volume", "condition"}


class _CountedScale(eqx.Module):
    """z ↦ s z, counting its traces (a Python side effect runs once per trace)."""

    s: jax.Array
    traces: ClassVar[list] = []

    def __call__(self, z):
        _CountedScale.traces.append(1)
        return self.s * z


def test_structure_residuals_of_models_of_one_structure_share_their_program():
    """A model is passed as a pytree: a second model of the same structure (other
    parameters) reuses the compiled residuals, and gets its own values."""
    from geomlearn.geometry import structure_residuals

    _CountedScale.traces.clear()
    points = jnp.array([[0.3, -0.2], [1.0, 0.5]])
    one = structure_residuals(_CountedScale(jnp.asarray(1.0)), points, 2)
    traced = len(_CountedScale.traces)
    other = structure_residuals(_CountedScale(jnp.asarray(1.1)), points, 2)
    assert traced >= 1 and len(_CountedScale.traces) == traced  # not traced again
    assert one["volume"] == 0.0
    np.testing.assert_allclose(other["volume"], 1.21 - 1, rtol=1e-12)  # its own parameters
    # negative control: a new points shape is a new program
    structure_residuals(_CountedScale(jnp.asarray(1.0)), points[:1], 2)
    assert len(_CountedScale.traces) > traced
