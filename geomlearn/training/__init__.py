r"""Training: `fit(model, data, *, epochs, key, ...)` → `(model, history)`.

What is fitted is the model's business (the model protocol of `geomlearn.models`:
`training_samples`, `predict`, `target`); for the built-in families:

| model                                 | samples                        | prediction                          |
|---------------------------------------|--------------------------------|-------------------------------------|
| feed-forward integrator               | one-step pairs $(z_t, z_{t+1})$ | $\Phi_\theta(z_t)$                  |
| transformer integrator                | windows `(T, d)` and the windows shifted by `pw` | last `pw` rows of the output |
| Hamiltonian network, trajectories     | one-step pairs                 | one implicit-midpoint step of $J\nabla H_\theta$ |
| Hamiltonian network, `(z, ż)` arrays  | states and time derivatives    | $J\nabla H_\theta(z)$               |

**Losses.** `"relative"` (the default, as in the SympNets and transformer papers):
$\|\hat Y - Y\|_F / \|Y\|_F$ (`RelativeLoss`); `"mse"`: the mean of $(\hat Y - Y)^2$
(`MeanSquaredLoss`); or any callable `loss(prediction, target) -> scalar` on batched
arrays. For transformers only the last `pw` rows of each window count.

**Optimisers.** Any Optax `GradientTransformation` (one that takes Optax's extra
arguments, such as `optax.lbfgs()`, receives the minibatch's `value`, `grad` and
`value_fn`); by default Adam with the learning rate decaying from $10^{-2}$ to $10^{-6}$
over the planned updates (`default_optimizer`); or a second-order least-squares solver,
`geomlearn.LevenbergMarquardt` / `geomlearn.GaussNewton`, one iteration per epoch.
Every method runs through the same loop, with the same history, progress, checkpoints
and resume.
"""

from .._progress import AbstractProgress, NoProgress, TqdmProgress
from ._fit import fit
from ._history import STOP_REASONS, NonFiniteLossError
from ._interrupt import TrainingInterrupted
from ._keep_best import KeepBest
from ._losses import AbstractLoss, CallableLoss, MeanSquaredLoss, RelativeLoss, resolve_loss
from ._optimizer import default_optimizer
from ._staged import fit_position_last, plain_twin, trains_position_last
from ..reduction._training import fit_autoencoder  # the training of a reduction, kept with it

__all__ = [
    "fit",
    "fit_autoencoder",
    "fit_position_last",
    "plain_twin",
    "trains_position_last",
    "default_optimizer",
    "NonFiniteLossError",
    "STOP_REASONS",
    "TrainingInterrupted",
    "KeepBest",
    "AbstractLoss",
    "RelativeLoss",
    "MeanSquaredLoss",
    "CallableLoss",
    "resolve_loss",
    "AbstractProgress",
    "TqdmProgress",
    "NoProgress",
]


def __getattr__(name: str):
    # `choose_trainer` is the command line's policy; an `ImportError` (not an
    # `AttributeError`) so that `from geomlearn.training import choose_trainer` shows it too
    if name == "choose_trainer":
        raise ImportError("geomlearn.training.choose_trainer moved to "
                          "geomlearn.cli.choose_trainer (command-line policy)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
