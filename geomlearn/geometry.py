r"""Measuring structure: the canonical symplectic form, Jacobians and residuals.

A map $f$ of phase space $\mathbb{R}^{2n}$ is **symplectic** when its Jacobian
$M = \partial f/\partial z$ satisfies $M^\top \mathbb{J} M = \mathbb{J}$ with the canonical
form

$$\mathbb{J} = \begin{pmatrix} 0 & I_n \\ -I_n & 0 \end{pmatrix},
\qquad z = (q, p)\ \text{(q first)}.$$

It is **volume-preserving** when $|\det M| = 1$. Symplectic maps preserve volume,
but not conversely.

A map $f$ of $\mathfrak{so}(3)^* \cong \mathbb{R}^3$ (a rigid body's angular momentum)
is a **Lie–Poisson map** when it keeps the bracket
$\{F, G\}(z) = -z\cdot(\nabla F \times \nabla G) = \nabla F^\top \hat z\, \nabla G$,
i.e. $M(z)\, \hat z\, M(z)^\top = \widehat{f(z)}$ with the hat matrix
$\hat z v = z \times v$ (`hat_matrix`; `poisson_residual`). The flows of this bracket's
Hamiltonian vector fields are such maps, and they also keep the Casimir $|z|^2$
(`casimir_residual`).

Maps of windows $Z \in \mathbb{R}^{T \times 2n}$ (row $t$ the state at time $t$) are
judged in the product-space sense: $M$ is the Jacobian on the flattened (row-major)
window, and the form is $\Omega = I_T \otimes \mathbb{J}$, i.e. every row carries its own
canonical form. A map that applies one symplectic map to each row is symplectic in this
sense; a map that mixes rows usually is not.

The residuals below return a scalar that is zero exactly when the structure holds and
grows with its violation; in float64 a structure-preserving network gives about
$10^{-15}$ to $10^{-13}$, an unconstrained one $10^{-2}$ or more.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._typing import Array, Float, Scalar, State
from ._validation import check_int, float_dtype

__all__ = [
    "symplectic_matrix",
    "jacobian",
    "symplecticity_residual",
    "volume_residual",
    "hat_matrix",
    "poisson_residual",
    "casimir_residual",
    "conformal_symplecticity_residual",
    "structure_residuals",
]


def _symplectic_matrix_np(n: int) -> np.ndarray:
    eye = np.eye(n)
    zero = np.zeros((n, n))
    return np.block([[zero, eye], [-eye, zero]])


def symplectic_matrix(n: int, dtype=None) -> Float[Array, "2n 2n"]:
    r"""The canonical symplectic matrix $\mathbb{J} = \begin{pmatrix} 0 & I_n \\ -I_n & 0\end{pmatrix}$.

    **Arguments:**

    - `n`: the number of degrees of freedom (the phase space has dimension `2n`), `n ≥ 1`.
    - `dtype`: a floating dtype; `None` means JAX's default float.

    **Returns:** the `(2n, 2n)` matrix, with $\mathbb{J}^\top = -\mathbb{J} = \mathbb{J}^{-1}$.

    ```python
    >>> symplectic_matrix(1)
    Array([[ 0.,  1.],
           [-1.,  0.]], dtype=float32)
    ```
    """
    n = check_int("n", n, minimum=1)
    return jnp.asarray(_symplectic_matrix_np(n), dtype=float_dtype(dtype))


def _check_state(x) -> tuple[int, ...]:
    shape = jnp.shape(x)
    if len(shape) not in (1, 2):
        raise ValueError(
            f"expected a point of shape (d,) or a window of shape (T, d), got shape {shape}"
        )
    if not jnp.issubdtype(jnp.result_type(x), jnp.floating):
        raise TypeError(f"expected a floating-point input, got dtype {jnp.result_type(x)}")
    return shape


def jacobian(f: Callable[[State], State], x: State) -> Float[Array, "N N"]:
    r"""The Jacobian of `f` at `x` as a square matrix on the flattened input.

    `x` is a point `(d,)` or a window `(T, d)`; `f` must return an array of the same size.
    The window is flattened row-major, so entry `(i·d + a, j·d + b)` is
    $\partial f(x)_{i a} / \partial x_{j b}$. Computed with `jax.jacfwd` (forward mode:
    the matrices here are square and small).

    **Arguments:**

    - `f`: a map from arrays of `x`'s shape to arrays with as many entries.
    - `x`: the point of evaluation.

    **Returns:** the `(N, N)` Jacobian, `N = x.size`.
    """
    shape = _check_state(x)
    x = jnp.asarray(x)
    size = int(np.prod(shape))

    def flat(v):
        out = jnp.asarray(f(v.reshape(shape)))
        if out.size != size:
            raise ValueError(
                f"f must map an input of shape {shape} to an output with {size} entries, "
                f"got an output of shape {out.shape}"
            )
        return out.reshape(size)

    return jax.jacfwd(flat)(x.reshape(size))


def symplecticity_residual(f: Callable[[State], State], x: State) -> Scalar:
    r"""Relative violation of symplecticity, $\|M^\top \Omega M - \Omega\|_F / \|\Omega\|_F$.

    $M$ is `jacobian(f, x)`; $\Omega = \mathbb{J}$ for a point `(2n,)` and
    $\Omega = I_T \otimes \mathbb{J}$ for a window `(T, 2n)` (the product-space form).
    Since $\|\Omega\|_F = \sqrt{2nT}$, a map applied row by row to a window has the same
    residual as the row map itself.

    **Arguments:**

    - `f`: the map to test.
    - `x`: a point `(2n,)` or a window `(T, 2n)` at which to test it.

    **Returns:** a non-negative scalar in `x`'s dtype; `0` for an exactly symplectic map.

    **Raises:** `ValueError` when the last dimension is odd (there is no canonical form).
    """
    shape = _check_state(x)
    d = shape[-1]
    if d % 2:
        raise ValueError(
            f"symplecticity needs an even last dimension 2n (z = (q, p)), got shape {shape}"
        )
    return _symplecticity_of(jacobian(f, x), shape)


def _symplecticity_of(M, shape: tuple[int, ...]) -> Scalar:
    """`symplecticity_residual` of a Jacobian `M` at a state of `shape` (even last
    dimension)."""
    T, d = (shape[0] if len(shape) == 2 else 1), shape[-1]
    omega_np = np.kron(np.eye(T), _symplectic_matrix_np(d // 2))
    omega = jnp.asarray(omega_np, dtype=M.dtype)
    diff = M.T @ omega @ M - omega
    return jnp.linalg.norm(diff) / jnp.asarray(np.linalg.norm(omega_np), dtype=M.dtype)


def volume_residual(f: Callable[[State], State], x: State) -> Scalar:
    r"""Violation of volume preservation, $\big|\,|\det M| - 1\,\big|$.

    Computed from `slogdet` as $|\exp(\log|\det M|) - 1|$ via `expm1`, which stays
    accurate near `det = ±1` and does not overflow for large Jacobians. `x` is a point
    `(d,)` (any `d`, odd included) or a window `(T, d)`.

    **Returns:** a non-negative scalar in `x`'s dtype; `0` for an exactly volume-preserving
    map (orientation-reversing maps with $\det M = -1$ also give `0`).
    """
    _check_state(x)
    return _volume_of(jacobian(f, x))


def _volume_of(M) -> Scalar:
    """`volume_residual` of a Jacobian `M`."""
    _, logabsdet = jnp.linalg.slogdet(M)
    return jnp.abs(jnp.expm1(logabsdet))


def hat_matrix(z: Float[Array, " 3"]) -> Float[Array, "3 3"]:
    r"""The hat matrix of $z \in \mathbb{R}^3$, $\hat z v = z \times v$:

    $$\hat z = \begin{pmatrix} 0 & -z_3 & z_2 \\ z_3 & 0 & -z_1 \\ -z_2 & z_1 & 0
      \end{pmatrix}.$$

    It is the Poisson tensor $B(z)$ of the Lie–Poisson bracket on
    $\mathfrak{so}(3)^*$ in the sign convention
    $\{F, G\}(z) = -z\cdot(\nabla F\times\nabla G) = \nabla F^\top \hat z\,\nabla G$,
    whose Hamiltonian vector fields are $\dot z = \hat z\,\nabla H = z \times \nabla H$
    (Euler's equations for `geomlearn.systems.RigidBody`).

    **Returns:** the skew `(3, 3)` matrix, in `z`'s dtype.
    """
    z = jnp.asarray(z)
    if z.shape != (3,):
        raise ValueError(f"the hat matrix needs a point of shape (3,), got shape {z.shape}")
    zero = jnp.zeros((), z.dtype)
    return jnp.stack([
        jnp.stack([zero, -z[2], z[1]]),
        jnp.stack([z[2], zero, -z[0]]),
        jnp.stack([-z[1], z[0], zero]),
    ])


def _check_so3_point(x, what: str) -> None:
    shape = _check_state(x)
    if shape != (3,):
        raise ValueError(
            f"the {what} residual is defined on so(3)* = R^3: expected a point of shape (3,), "
            f"got shape {shape}"
        )


def poisson_residual(f: Callable[[State], State], x: Float[Array, " 3"]) -> Scalar:
    r"""Relative violation of the Lie–Poisson property on $\mathfrak{so}(3)^*$,
    $\|M \hat x M^\top - \widehat{f(x)}\|_F / \|\hat x\|_F$.

    $M$ is `jacobian(f, x)` and $\hat x$ the hat matrix (`hat_matrix`), the Poisson
    tensor $B(x)$ of $\{F, G\}(z) = -z\cdot(\nabla F \times \nabla G)$. It is zero
    exactly when $f$ is a Poisson map at `x`: $\{F\circ f, G\circ f\} = \{F, G\}\circ f$
    for all $F, G$. (The opposite sign convention, $B = -\hat z$, gives the same
    residual: both terms change sign.)

    **Arguments:** `f`, the map to test; `x`, a point `(3,)`, not zero.

    **Returns:** a non-negative scalar in `x`'s dtype.
    """
    _check_so3_point(x, "Poisson")
    x = jnp.asarray(x)
    M = jacobian(f, x)
    B = hat_matrix(x)
    diff = M @ B @ M.T - hat_matrix(jnp.asarray(f(x)).reshape(3))
    return jnp.linalg.norm(diff) / jnp.linalg.norm(B)


def casimir_residual(f: Callable[[State], State], x: Float[Array, " 3"]) -> Scalar:
    r"""Relative change of the Casimir $C(z) = |z|^2$ of $\mathfrak{so}(3)^*$,
    $\big|\,|f(x)|^2 - |x|^2\big| / |x|^2$.

    **Arguments:** `f`, the map to test; `x`, a point `(3,)`, not zero.

    **Returns:** a non-negative scalar in `x`'s dtype; `0` for a map that keeps every
    sphere $|z| = r$ (every layer of `geomlearn.LiePoissonNet`).
    """
    _check_so3_point(x, "Casimir")
    x = jnp.asarray(x)
    y = jnp.asarray(f(x)).reshape(3)
    c0 = jnp.sum(x * x)
    return jnp.abs(jnp.sum(y * y) - c0) / c0


def conformal_symplecticity_residual(f: Callable[[State], State], x: State, factor) -> Scalar:
    r"""Relative violation of conformal symplecticity with the factor $c$ = `factor`,
    $\|M^\top \Omega M - c\,\Omega\|_F / (c\,\|\Omega\|_F)$.

    $M$ is `jacobian(f, x)` and $\Omega$ as in `symplecticity_residual`. It is zero
    exactly when $M^\top\Omega M = c\,\Omega$: the map contracts (or expands) the
    symplectic form by the one factor $c$ — the flow of a Hamiltonian system with linear
    damping $\dot p = -\partial_q H - \gamma p$ over a time $t$ has $c = e^{-\gamma t}$.
    `factor = 1` gives `symplecticity_residual`.

    **Arguments:** `f`, the map to test; `x`, a point `(2n,)` or a window `(T, 2n)`;
    `factor`, the factor $c > 0$ (a scalar, may be traced).

    **Returns:** a non-negative scalar in `x`'s dtype.
    """
    c = jnp.asarray(factor, dtype=jnp.result_type(x))
    return symplecticity_residual(lambda v: f(v) / jnp.sqrt(c), x)


@eqx.filter_jit  # a module `fmap` is a pytree: a model of the same structure reuses the program
def _residual_values(fmap, points, dim: int) -> dict[str, Array]:
    def one(z):  # one Jacobian for the three measures: the map is traced once
        _check_state(z)
        M = jacobian(fmap, z)
        out = {"volume": _volume_of(M), "condition": jnp.linalg.cond(M)}
        if dim % 2 == 0:
            out["symplecticity"] = _symplecticity_of(M, z.shape)
        return out

    return jax.vmap(one)(points)


def structure_residuals(fmap: Callable[[State], State], points, dim: int) -> dict[str, float]:
    r"""The structure residuals of the map `fmap` at a batch of `points`, the maximum
    over the points of each.

    **Arguments:**

    - `fmap`: the map to test, on one state (a point `(d,)` or a window `(T, d)`).
    - `points`: a batch of states `(B, ...)`, evaluated in their dtype (one compiled,
      vectorised computation).
    - `dim`: the last dimension `d` of a state; the symplecticity residual is computed
      only when it is even.

    **Returns:** `{"symplecticity": …, "volume": …, "condition": …}` as Python floats:
    `symplecticity_residual` (even `dim` only), `volume_residual` and the condition
    number $\kappa(M) = \sigma_{\max}/\sigma_{\min}$ of the Jacobian `jacobian(fmap, z)`
    (which sets how much rounding the residuals carry).
    """
    values = _residual_values(fmap, points, dim)
    res = {name: float(np.max(np.asarray(v, dtype=np.float64))) for name, v in values.items()}
    return {k: res[k] for k in ("symplecticity", "volume", "condition") if k in res}
