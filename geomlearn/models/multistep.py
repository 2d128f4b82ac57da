r"""Multi-step training: fit a model on $k$ iterations of its own rollout step.

`MultiStep(model, n_windows=k)` is a training wrapper. It holds a geomlearn model
(the *wrapped* model) and changes only **what is fitted**: a sample is a starting state
$s_0$ (a window for a transformer, a point for a feed-forward integrator) together with
the next $k$ samples of the same trajectory, and the prediction is the wrapped model's
own rollout from $s_0$,

$$s_{j+1} = \Phi_\theta(s_j), \qquad \hat y_j = \mathrm{predict}_\theta(s_j),
\qquad j = 0, \dots, k - 1,$$

where $\Phi_\theta$ is the wrapped model's `step` (the map a rollout iterates) and
$\mathrm{predict}_\theta$ its one-sample prediction. The loss compares all $k$
predictions with the true next samples $y_0, \dots, y_{k-1}$: with `fit`'s relative
loss,

$$\mathcal{L}_k(\theta) = \frac{\big(\sum_m \sum_{j<k} \|\hat y^m_j - y^m_j\|^2\big)^{1/2}}
{\big(\sum_m \sum_{j<k} \|y^m_j\|^2\big)^{1/2}},$$

so errors that the one-step loss never sees — the drift of a prediction fed back as the
next input — are penalised during training. For $k = 1$ it is the wrapped model's own
loss on the same samples.

Everything else is the wrapped model's: `structure`, `step` (so `iterate`, `evaluate`
and `check_structure` roll out and check exactly the wrapped model's map), the task
options (`seq_length`, `prediction_window`, `dt`), the rollout. A `MultiStep` saves
and loads like any model (its file nests the wrapped model's class and configuration in
its own, and holds the wrapped model's arrays); to keep only the trained map, save
`trained.model`.

**Samples.** One step of the iterated map advances a trajectory by $s$ states: the
prediction window `pw` for a transformer integrator, one state for a point map. From a
trajectory of $N$ states the wrapper takes the wrapped model's samples of the $k$
shifted sub-trajectories `states[j s : N - (k-1-j) s]`, $j = 0, \dots, k-1$: sample $m$
of the $j$-th is sample $m$ of the first shifted by $j s$ states in time, so the
$k$ targets of one sample are consecutive. A trajectory needs at least
$n_0 + k s$ states ($n_0$ the states of one initial state: $T$ for a transformer, 1
for a point map).
"""

from __future__ import annotations

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._validation import check_int
from ._base import AbstractInferenceForm, AbstractModel
from ._task import Task, check_data_dim, sample_arrays

__all__ = ["MultiStep"]


_UNSET = object()


class _OfWrapped:
    """A class attribute that reads the wrapped model's attribute of the same name (a
    method comes bound to the wrapped model): what the wrapper leaves unchanged. Read on
    the class, it is `on_class` when one is given (the descriptor itself otherwise)."""

    def __init__(self, on_class=_UNSET):
        self.on_class = on_class

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, instance, owner=None):
        if instance is None:
            return self if self.on_class is _UNSET else self.on_class
        return getattr(instance.model, self.name)


class _WrappedModelForm(AbstractInferenceForm):
    """The inference form of the wrapped model (`MultiStep.inference`)."""

    def of(self, model):
        return model.model.inference_form()


class MultiStep(AbstractModel):
    r"""Train `model` on `n_windows` iterated steps of its own rollout.

    See the module documentation for the loss,
    $\mathcal{L}_k = \|(\hat y_j - y_j)_{j<k}\| / \|(y_j)_{j<k}\|$ with
    $\hat y_j = \mathrm{predict}(\Phi^j(s_0))$.

    **Arguments:**

    - `model`: the geomlearn model to train (any subclass of `AbstractModel` with a
      one-step map: a feed-forward or transformer integrator, a Hamiltonian network).
    - `n_windows`: $k \ge 1$, the number of iterated steps in each sample's loss.

    **Attributes:** `model` (the wrapped model, trained in place of the wrapper's
    parameters) and `n_windows`. `structure`, `dim`, `step`, `rollout` and the task
    options are the wrapped model's.

    ```python
    vpt = gl.VolumePreservingTransformer(3, n_blocks=2, L=3, key=jax.random.PRNGKey(0))
    multi, history = gl.fit(gl.models.multistep.MultiStep(vpt, 4), data, epochs=100,
                            seq_length=3, optimizer=gl.LevenbergMarquardt(),
                            key=jax.random.PRNGKey(1))
    gl.save("multi.geomlearn", multi)        # the wrapper, with the VPT nested in it
    gl.save("vpt.geomlearn", multi.model)    # the trained VPT alone
    ```

    Only `TrajectoryData` can be trained on (the next $k$ samples come from the
    trajectories); a tuple of prepared arrays is a `TypeError`.
    """

    model: AbstractModel
    n_windows: int = eqx.field(static=True)

    def __init__(self, model: AbstractModel, n_windows: int = 2):
        if not isinstance(model, AbstractModel):
            raise TypeError(
                "MultiStep wraps a geomlearn model (a subclass of "
                f"geomlearn.models.AbstractModel), got {type(model).__name__}"
            )
        if isinstance(model, MultiStep):
            raise TypeError(
                f"MultiStep wraps a model with a one-step map, not another MultiStep "
                f"(got MultiStep(n_windows={model.n_windows})); use one MultiStep with "
                "the product of the window counts"
            )
        self.model = model
        self.n_windows = check_int("n_windows", n_windows, minimum=1)

    # ------------------------------------------------------------- the wrapped model's

    dim = _OfWrapped()
    structure = _OfWrapped(on_class="none")  # the class claims nothing; an instance, its model's
    task = _OfWrapped()
    rollout_task = _OfWrapped()
    step = _OfWrapped()
    iterated_structure = _OfWrapped()
    state_shape = _OfWrapped()
    initial_states = _OfWrapped()
    n_initial_points = _OfWrapped()
    rollout = _OfWrapped()
    structure_residuals = _OfWrapped()
    describe_step = _OfWrapped()
    inference: ClassVar[AbstractInferenceForm] = _WrappedModelForm()

    # --------------------------------------------------------------- what is fitted

    @staticmethod
    def advance(task: Task) -> int:
        """The number of states one step of the iterated map advances a trajectory by:
        the prediction window for a window map, 1 for a point map."""
        return task.prediction_window or 1

    def training_samples(self, data, task: Task, *, what: str = "data"):
        r"""`(x, y, task)`: the wrapped model's samples $x$ of the trajectories and, for
        each, the stack `y[:, j]` ($j < k$) of its targets $j$ steps later.

        **Raises:** `TypeError` for a tuple of arrays; `ValueError` for irregularly
        sampled data, or when a trajectory holds fewer than $n_0 + k s$ states (see the
        module documentation).
        """
        if sample_arrays(data, what) is not None:
            raise TypeError(
                f"MultiStep takes its {what} as a TrajectoryData (the next {self.n_windows} "
                "samples of each sample come from its trajectory), got a tuple of arrays"
            )
        check_data_dim(self, data, what)
        if data.irregular:
            raise ValueError(
                f"MultiStep does not take irregularly sampled {what} (its k steps assume one "
                "step between rows); train the wrapped model on them instead")
        k, s = self.n_windows, self.advance(task)
        n0 = self.model.n_initial_points(task)
        states = jnp.asarray(data.states)
        n = states.shape[1]
        if n < n0 + k * s:
            raise ValueError(
                f"{what}: MultiStep(n_windows={k}) needs trajectories of at least "
                f"{n0 + k * s} states ({n0} in the initial state and {k} steps of {s}), "
                f"got trajectories of {n} states; use fewer windows or longer trajectories"
            )
        xs, ys, done = None, [], task
        for j in range(k):
            part = type(data)(states[:, j * s: n - (k - 1 - j) * s], data.dt)
            x, y, done = self.model.training_samples(part, task, what=what)
            if xs is None:
                xs = x
            ys.append(y)
        return xs, jnp.stack(ys, axis=1), done

    def predict(self, x, task: Task):
        r"""The stack of the $k$ predictions $\mathrm{predict}(\Phi^j(x))$, $j < k$
        (one `lax.scan` over the wrapped model's `step`)."""

        def body(state, _):
            return self.model.step(state, task), self.model.predict(state, task)

        _, predictions = jax.lax.scan(body, x, None, length=self.n_windows)
        return predictions

    def target(self, y, task: Task):
        """The wrapped model's `target` of each of the $k$ stacked targets."""
        return jax.vmap(lambda t: self.model.target(t, task))(y)
