r"""P-SympNets and R-SympNets: compositions of exact flows of ridge Hamiltonians.

Each model is a composition of `n_layers` ridge layers
([`PolynomialRidgeLayer`][geomlearn.layers.PolynomialRidgeLayer] or
[`NeuralRidgeLayer`][geomlearn.layers.NeuralRidgeLayer]), each the exact time-$h$ flow
of a Hamiltonian $H_i(z) = f_i(w_i^\top z)$:

$$\Phi_{\theta,h} = \varphi^{H_L}_h \circ \cdots \circ \varphi^{H_1}_h, \qquad
  \varphi^{H_i}_h(z) = z + h\, f_i'(w_i^\top z)\,\mathbb{J} w_i .$$

So the model is a *splitting method* for the Hamiltonian $\sum_i H_i$, exactly
symplectic for every parameter value and every $h$, with the exact inverse
$\Phi_{\theta,h}^{-1} = \varphi^{H_1}_{-h} \circ \cdots \circ \varphi^{H_L}_{-h}$
(Tapley, *Symplectic neural networks based on dynamical systems*, 2024; the PyTorch
package strupnet).

**Linear systems.** With quadratic $f_i$ (`max_degree = min_degree = 2`, the defaults of
`PSympNet`) every layer is a symplectic transvection $I + c_i\,\mathbb{J} w_i w_i^\top$.
Transvections generate the symplectic group $Sp(2n)$ and every element is a product of
at most $4n$ of them; Tapley shows that **$2n$ layers suffice to represent the flow
$e^{h\mathbb{J}S}$ of every linear Hamiltonian $H = \tfrac12 z^\top S z$ exactly** (for
the harmonic oscillator, $n = 1$: two layers), so such a P-SympNet can fit linear data
to round-off.

**Symmetric compositions** (`symmetric=True`): the map becomes
$S_h = R \circ \Phi_{h/2}^{-1} \circ R \circ \Phi_{h/2}$ with the time reversal
$R(q, p) = (q, -p)$. It is still symplectic and, for every parameter value,
*reversible*: $R \circ S_h \circ R \circ S_h = \mathrm{id}$, as is Störmer–Verlet. It is
not time-symmetric: $S_{-h} \circ S_h \ne \mathrm{id}$, since a ridge layer taken at
$-h/2$ is not the inverse of the one at $h/2$. It costs twice the layer evaluations of
the plain map.

The layers are stacked along a leading axis of length `n_layers` and run as one
`lax.scan`; `model.layer(i)` returns the `i`-th layer.
"""

from __future__ import annotations

from typing import Callable

import equinox as eqx

from .._typing import PRNGKeyArray
from .._validation import check_bool, check_even, check_int
from ..layers.ridge import NeuralRidgeLayer, PolynomialRidgeLayer
from .sympnet import AbstractStackedSympNet, stack_options, stacked_layers

__all__ = ["PSympNet", "RSympNet"]


class PSympNet(AbstractStackedSympNet):
    r"""P-SympNet: `n_layers` polynomial ridge flows (P-layers), an exactly symplectic map.

    $$\Phi_{\theta,h} = \varphi^{H_L}_h \circ \cdots \circ \varphi^{H_1}_h,\qquad
      H_i(z) = \sum_{k=k_0}^{k_1} a_{i,k}\,(w_i^\top z)^k,$$

    each factor a [`PolynomialRidgeLayer`][geomlearn.layers.PolynomialRidgeLayer] (see
    the module documentation for the exactness and the linear representation result:
    with the default degree 2, `n_layers ≥ 2n` represents every linear Hamiltonian flow
    exactly). Tapley, *Symplectic neural networks based on dynamical systems* (2024).

    **Parameters** (`dim = 2n`): $n_\text{layers}\,(2n + k_1 - k_0 + 1)$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even).
    - `n_layers`: the number of layers `≥ 1`.
    - `max_degree`, `min_degree`: the degrees $1 \le k_0 \le k_1$ (default 2, 2).
    - `symmetric`: build the reversible composition $R\Phi_{h/2}^{-1}R\,\Phi_{h/2}$
      (default `False`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    **Call:** `model(z, h=None)` on one point `(dim,)`; `model.inverse(z, h=None)` is the
    exact inverse.

    ```python
    model = PSympNet(2, n_layers=2, key=jax.random.PRNGKey(0))    # harmonic oscillator
    model.inverse(model(jnp.array([1.0, 0.0])))                 # == [1, 0]
    ```
    """

    layers: PolynomialRidgeLayer
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    max_degree: int = eqx.field(static=True)
    min_degree: int = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_layers: int,
        max_degree: int = 2,
        min_degree: int = 2,
        symmetric: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim = check_even("dim", dim)
        self.n_layers = check_int("n_layers", n_layers, minimum=1)
        self.max_degree = check_int("max_degree", max_degree, minimum=1)
        self.min_degree = check_int("min_degree", min_degree, minimum=1)
        self.symmetric = check_bool("symmetric", symmetric)
        self.layers = stacked_layers(
            lambda k, dt: PolynomialRidgeLayer(self.dim, max_degree=max_degree, min_degree=min_degree, key=k,
                                               dtype=dt),
            self.n_layers, key, dtype)


class RSympNet(AbstractStackedSympNet):
    r"""R-SympNet: `n_layers` neural ridge flows (R-layers), an exactly symplectic map.

    $$\Phi_{\theta,h} = \varphi^{H_L}_h \circ \cdots \circ \varphi^{H_1}_h,\qquad
      \partial_s H_i = \sum_{j=1}^{m} a_{ij}\,\sigma(c_{ij}\, s + b_{ij}),\;
      s = w_i^\top z,$$

    each factor a [`NeuralRidgeLayer`][geomlearn.layers.NeuralRidgeLayer] with `width`
    $= m$ neurons sharing the direction $w_i$. Tapley, *Symplectic neural networks based
    on dynamical systems* (2024), who proves R-SympNets universal approximators of
    symplectic maps.

    **Parameters** (`dim = 2n`): $n_\text{layers}\,(2n + 3m)$.

    **Arguments:**

    - `dim`: the phase-space dimension `2n` (even).
    - `n_layers`: the number of layers `≥ 1`.
    - `width`: neurons per layer, `≥ 1` (default 1).
    - `activation`: a callable or a name (default `"tanh"`).
    - `symmetric`: build the reversible composition (default `False`).
    - `key`: a JAX PRNG key (keyword-only); `dtype`: the parameter dtype.

    ```python
    model = RSympNet(2, n_layers=8, width=4, key=jax.random.PRNGKey(0))
    model(jnp.array([1.0, 0.0]), 0.1)
    ```
    """

    layers: NeuralRidgeLayer
    dim: int = eqx.field(static=True)
    n_layers: int = eqx.field(static=True)
    width: int = eqx.field(static=True)
    activation: Callable | str = eqx.field(static=True)
    symmetric: bool = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        *,
        n_layers: int,
        width: int = 1,
        activation: Callable | str = "tanh",
        symmetric: bool = False,
        key: PRNGKeyArray,
        dtype=None,
    ):
        self.dim, self.n_layers, self.width, self.activation, self.symmetric = stack_options(
            dim, n_layers, width, activation, symmetric)
        self.layers = stacked_layers(
            lambda k, dt: NeuralRidgeLayer(self.dim, width=self.width, activation=activation, key=k,
                                           dtype=dt),
            self.n_layers, key, dtype)
