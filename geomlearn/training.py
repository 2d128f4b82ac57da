r"""Training: `fit(model, data, *, epochs, key, ...)` → `(model, history)`.

What is fitted depends on the kind of model:

| model                                 | samples                        | prediction                          |
|---------------------------------------|--------------------------------|-------------------------------------|
| feed-forward integrator               | one-step pairs $(z_t, z_{t+1})$ | $\Phi_\theta(z_t)$                  |
| transformer integrator                | windows `(T, d)` and the windows shifted by `pw` | last `pw` rows of the output |
| Hamiltonian network, trajectories     | one-step pairs                 | one implicit-midpoint step of $J\nabla H_\theta$ |
| Hamiltonian network, `(z, ż)` arrays  | states and time derivatives    | $J\nabla H_\theta(z)$               |

**Losses.** `"relative"` (the default, as in the SympNets and transformer papers):
$\|\hat Y - Y\|_F / \|Y\|_F$ over the whole minibatch; `"mse"`: the mean of
$(\hat Y - Y)^2$; or any callable `loss(prediction, target) -> scalar` on batched arrays.
For transformers only the last `pw` rows of each window count.

**Speed.** The data are moved to the device once. One epoch is **one** jit-compiled call:
a `jax.lax.scan` over the shuffled minibatches (a fresh permutation per epoch, drawn from
`fold_in(key, epoch)`), with the optimiser update inside the loop. There is no Python loop
over batches, no host transfer per step, and no recompilation between epochs; the host
reads back one number per epoch (the mean training loss), which also drives the progress
bar, the history and the non-finite check. Compiled epochs are cached: another `fit` of
a model of the same structure, with the same optimiser update, loss and data sizes, does
not compile again.

**Many devices.** When `jax.devices()` lists more than one device, the parameters and the
data are replicated on a one-axis `jax.sharding.Mesh` and every minibatch is sharded along
its batch axis (data parallelism: XLA inserts the gradient all-reduce). Beyond one
machine, start the processes with `jax.distributed.initialize()` and the same code runs
on all their devices. The result equals the one-device result to round-off.

**Default optimiser.** `optimizer=None` is Adam with a learning rate decaying
exponentially from $10^{-2}$ to $10^{-6}$ **over the planned training**:
$\eta_k = 10^{-2}\,(10^{-4})^{k/(K-1)}$ for update $k = 0, \dots, K-1$ of
$K = \text{epochs} \times \text{batches per epoch}$, so the last update of the last epoch
uses $10^{-6}$ (see `default_optimizer`).
GeometricMachineLearning.jl's `AdamOptimizerWithDecay(n_epochs)` uses the rate
$\gamma = (10^{-6}/10^{-2})^{1/n_\text{epochs}}$ but multiplies it in once per
*optimiser step*, i.e. per minibatch: its learning rate is already $10^{-6}$ after
`n_epochs` updates — within the first epochs when an epoch has many batches — and keeps
shrinking below $10^{-6}$ for the rest of training. Here the decay is spread over all
$K$ updates of the planned epochs and stops at $10^{-6}$.

**Nothing lost.** With `checkpoint=path` the model, the optimiser state, the number of
completed epochs, the key and the history are written atomically (temporary file, then
rename) every `checkpoint_every` epochs and at the end. `resume=True` continues from the
checkpoint; the resumed run equals an uninterrupted one bit for bit (on CPU). A
non-finite training loss raises `NonFiniteLossError` naming the epoch, and the checkpoint
keeps the last good state. `Ctrl-C` (`KeyboardInterrupt`) saves a checkpoint and returns
what was trained, with a warning.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import pathlib
import time
import warnings
from typing import Any, Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from . import io as _gio
from ._progress import ProgressBar
from ._validation import check_int
from .rollout import _check_prediction_window, _midpoint_step, _model_kind

__all__ = ["fit"]

#: Fixed-point iterations of the implicit midpoint step when training a Hamiltonian
#: network on one-step pairs (differentiated through).
TRAIN_MIDPOINT_ITERATIONS = 5

LOSSES = ("relative", "mse")


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite; the message names the epoch."""


# ------------------------------------------------------------------------ helpers


_ADAM = optax.scale_by_adam()
_LR_START, _LR_END = 1e-2, 1e-6


class DefaultOptimizerState(NamedTuple):
    """State of `default_optimizer`: Adam's moments, the update count, the planned total."""

    adam: Any
    count: jax.Array
    total: jax.Array


def _default_init(params, *, total_steps: int) -> DefaultOptimizerState:
    return DefaultOptimizerState(
        adam=_ADAM.init(params),
        count=jnp.zeros((), dtype=jnp.int32),
        total=jnp.asarray(total_steps, dtype=jnp.int32),
    )


def _default_update(updates, state: DefaultOptimizerState, params=None):
    updates, adam = _ADAM.update(updates, state.adam, params)
    span = jnp.maximum(state.total - 1, 1)
    frac = jnp.minimum(state.count, span).astype(float) / span.astype(float)
    log_lr = math.log(_LR_START) + frac * (math.log(_LR_END) - math.log(_LR_START))
    lr = jnp.exp(log_lr)
    updates = jax.tree_util.tree_map(lambda g: -lr.astype(g.dtype) * g, updates)
    return updates, DefaultOptimizerState(adam, state.count + 1, state.total)


def default_optimizer(total_steps: int) -> optax.GradientTransformation:
    r"""Adam with $\eta_k = 10^{-2}(10^{-4})^{k/(K-1)}$ for update $k$ of $K$ = `total_steps`.

    The first update uses $10^{-2}$, the last one $10^{-6}$ (and any beyond it too). $K$
    is kept in the optimiser *state*, not in the compiled code, so runs planned for
    different numbers of epochs share one compiled epoch.
    """
    total_steps = check_int("total_steps", total_steps, minimum=1)
    return optax.GradientTransformation(
        functools.partial(_default_init, total_steps=total_steps), _default_update
    )


def _default_learning_rate(step: int, total_steps: int) -> float:
    """The default optimiser's learning rate at update `step` (plain Python, for the history)."""
    span = max(int(total_steps) - 1, 1)
    return _LR_START * (_LR_END / _LR_START) ** (min(step, span) / span)


def _relative_loss(pred, target):
    return jnp.linalg.norm((pred - target).ravel()) / jnp.linalg.norm(target.ravel())


def _mse_loss(pred, target):
    return jnp.mean(jnp.square(pred - target))


def _resolve_loss(loss) -> Callable:
    if callable(loss):
        return loss
    if loss == "relative":
        return _relative_loss
    if loss == "mse":
        return _mse_loss
    raise ValueError(f"unknown loss {loss!r}; expected one of {list(LOSSES)} or a callable")


def _is_typed_key(key) -> bool:
    return jax.dtypes.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key)


def _raw_key(key):
    return jax.random.key_data(key) if _is_typed_key(key) else jnp.asarray(key)


def _restore_key(raw, like):
    if _is_typed_key(like):
        return jax.random.wrap_key_data(raw, impl=jax.random.key_impl(like))
    return raw


def _prepare(model, kind: str, data, *, T, pw, what: str):
    """`(x, y, mode, dt, T, pw)` for `data` (a TrajectoryData or an `(inputs, targets)` pair)."""
    d = model.dim
    if isinstance(data, (tuple, list)):
        if len(data) != 2:
            raise ValueError(f"{what} as a tuple must be (inputs, targets), got {len(data)} items")
        x, y = (jnp.asarray(a) for a in data)
        for name, a in (("inputs", x), ("targets", y)):
            if not jnp.issubdtype(a.dtype, jnp.floating):
                raise TypeError(f"{what} {name} must be floating-point, got {a.dtype}")
        if x.shape != y.shape:
            raise ValueError(
                f"{what}: inputs and targets must have the same shape, got {x.shape} and {y.shape}"
            )
        if kind == "transformer":
            if x.ndim != 3 or x.shape[-1] != d:
                raise ValueError(f"{what}: expected windows of shape (M, T, {d}), got {x.shape}")
            if T is not None and x.shape[1] != T:
                raise ValueError(
                    f"{what}: the model reads windows of length {T}, got windows of length "
                    f"{x.shape[1]}"
                )
            T = x.shape[1]
            pw = _check_prediction_window(model, T, pw)
            mode = "windows"
        else:
            if x.ndim != 2 or x.shape[-1] != d:
                raise ValueError(f"{what}: expected states of shape (M, {d}), got {x.shape}")
            mode = "vector_field" if kind == "hamiltonian" else "pairs"
        return x, y, mode, None, T, pw
    if not (hasattr(data, "pairs") and hasattr(data, "windows") and hasattr(data, "dt")):
        raise TypeError(
            f"{what} must be a TrajectoryData or a tuple (inputs, targets) of arrays, got "
            f"{type(data).__name__}"
        )
    if data.dim != d:
        raise ValueError(f"{what} has dimension {data.dim}, but the model has dim={d}")
    if kind == "transformer":
        if T is None:
            raise ValueError(
                f"{type(model).__name__} accepts windows of any length; pass seq_length=T "
                "to fit to choose the window length"
            )
        pw = _check_prediction_window(model, T, pw)
        x, y = data.windows(T, pw)
        return jnp.asarray(x), jnp.asarray(y), "windows", None, T, pw
    x, y = data.pairs()
    if kind == "hamiltonian":
        return jnp.asarray(x), jnp.asarray(y), "midpoint", float(data.dt), T, pw
    return jnp.asarray(x), jnp.asarray(y), "pairs", None, T, pw


def _find_learning_rate(opt_state):
    """The `learning_rate` of an `optax.inject_hyperparams` optimiser, if there is one."""
    for s in jax.tree_util.tree_leaves(opt_state, is_leaf=lambda s: hasattr(s, "hyperparams")):
        hp = getattr(s, "hyperparams", None)
        if isinstance(hp, dict) and "learning_rate" in hp:
            return float(hp["learning_rate"])
    return None


def _empty_history() -> dict[str, list]:
    return {"epoch": [], "loss": [], "val_loss": [], "learning_rate": [], "time": []}


# ------------------------------------------------------------------ compiled epoch


class _Setup(NamedTuple):
    """Everything static about a training run (hashable: part of the compilation key).

    Only the optimiser's `update` is here (its `init` may carry run-specific constants,
    e.g. the default optimiser's planned number of updates, without forcing a compile).
    """

    update: Callable
    loss_fn: Callable
    mode: str
    dt: float | None
    pw: int | None
    M: int
    B: int
    n_batches: int
    batch_sharding: Any


def _predict(model, x, setup: _Setup):
    mode = setup.mode
    if mode == "pairs":
        return model(x)
    if mode == "windows":
        return model(x)[x.shape[0] - setup.pw :]
    if mode == "midpoint":
        return _midpoint_step(model, x, setup.dt, TRAIN_MIDPOINT_ITERATIONS)
    return model.vector_field(x)  # "vector_field"


def _batch_loss(params, static, setup: _Setup, xb, yb):
    model = eqx.combine(params, static)
    pred = jax.vmap(lambda s: _predict(model, s, setup))(xb)
    if setup.mode == "windows":
        yb = yb[:, yb.shape[1] - setup.pw :]
    return setup.loss_fn(pred, yb)


def _val_loss(params, xv, yv, *, static, setup: _Setup):
    return _batch_loss(params, static, setup, xv, yv)


def _epoch(params, opt_state, epoch, key, x, y, *, static, setup: _Setup):
    """One epoch: a `lax.scan` over the shuffled minibatches, optimiser step inside."""
    M, B, n_batches = setup.M, setup.B, setup.n_batches

    def train_step(carry, batch):
        p, s = carry
        xb, yb = batch
        if setup.batch_sharding is not None:  # data parallel: shard the batch axis
            xb = jax.lax.with_sharding_constraint(xb, setup.batch_sharding)
            yb = jax.lax.with_sharding_constraint(yb, setup.batch_sharding)
        value, grads = jax.value_and_grad(_batch_loss)(p, static, setup, xb, yb)
        # Optax is not written for strict dtype promotion; trace its update in the
        # standard mode (parameters keep their dtype through apply_updates).
        with jax.numpy_dtype_promotion("standard"):
            updates, s = setup.update(grads, s, p)
            p = optax.apply_updates(p, updates)
        return (p, s), value

    if n_batches == 1 and B == M:  # full batch: the order does not matter
        batches = (x[None], y[None])
    else:
        perm = jax.random.permutation(jax.random.fold_in(key, epoch), M)
        perm = perm[: n_batches * B].reshape(n_batches, B)
        batches = (jnp.take(x, perm, axis=0), jnp.take(y, perm, axis=0))
    (params, opt_state), losses = jax.lax.scan(train_step, (params, opt_state), batches)
    leaves = jax.tree_util.tree_leaves(params)
    finite = (
        jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in leaves]))
        if leaves
        else jnp.asarray(True)
    )
    return params, opt_state, jnp.mean(losses), finite


_COMPILED: collections.OrderedDict = collections.OrderedDict()
_COMPILED_MAX = 32


def _compiled(fn, static, setup: _Setup):
    """`jax.jit(fn)` with `static` and `setup` bound, shared by runs with equal ones.

    Runs of the same model structure with the same optimiser update, loss and data sizes
    reuse one compiled epoch (plain `jax.jit` keeps the per-epoch dispatch cheap).
    """
    leaves, treedef = jax.tree_util.tree_flatten(static)
    cache_key = (fn, treedef, tuple(leaves), setup)
    try:
        hash(cache_key)
    except TypeError:  # an unhashable static leaf: compile for this run only
        return jax.jit(functools.partial(fn, static=static, setup=setup))
    if cache_key not in _COMPILED:
        _COMPILED[cache_key] = jax.jit(functools.partial(fn, static=static, setup=setup))
        if len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    _COMPILED.move_to_end(cache_key)
    return _COMPILED[cache_key]


# ---------------------------------------------------------------------------- fit


def fit(
    model,
    data,
    *,
    epochs: int,
    batch_size: int | None = None,
    optimizer: optax.GradientTransformation | None = None,
    loss: str | Callable = "relative",
    prediction_window: int | None = None,
    seq_length: int | None = None,
    val_data=None,
    key,
    progress: bool = True,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    callback: Callable | None = None,
):
    r"""Train a geomlearn model on trajectory data.

    **Arguments:**

    - `model`: a feed-forward integrator, a transformer integrator or a Hamiltonian
      neural network.
    - `data`: a `TrajectoryData` (pairs, windows or implicit-midpoint pairs are taken
      from it according to the model), or a tuple `(inputs, targets)` of arrays already
      prepared: `(M, d)` pairs for a feed-forward integrator, `(M, T, d)` windows for a
      transformer, `(M, d)` states and their time derivatives `ż` for a Hamiltonian
      network (vector-field regression).
    - `epochs`: the total number of epochs (also on `resume`, counting the ones done).
    - `batch_size`: samples per minibatch; `None` means the full data set. Each epoch
      uses `M // batch_size` minibatches of a fresh permutation (the remainder is left
      out of that epoch, a different one each time). Must be between 1 and `M`.
    - `optimizer`: any `optax.GradientTransformation`; `None` means Adam with the
      exponential decay $10^{-2} \to 10^{-6}$ over all planned updates (see the module
      documentation for how this differs from GeometricMachineLearning.jl).
    - `loss`: `"relative"`, `"mse"` or a callable `loss(prediction, target)` on batches.
    - `prediction_window`: transformers, the number `pw` of predicted rows (default `T`).
    - `seq_length`: transformers whose `seq_length` is `None` (any `T`): the window
      length `T` to train on. Models with a fixed `seq_length` use theirs.
    - `val_data`: optional validation data in the same form as `data`; its loss is
      evaluated after every epoch.
    - `key`: a JAX PRNG key (shuffling).
    - `progress`: draw a progress bar (epoch, loss, validation loss, epochs/s) on
      stderr — only when stderr is a terminal.
    - `checkpoint`: a file path for checkpoints; `None` for none.
    - `checkpoint_every`: epochs between checkpoints (`None`: `max(1, epochs // 10)`);
      one is always written at the end.
    - `resume`: continue from `checkpoint` if that file exists (a fresh start otherwise,
      so a preemptible job can always pass `resume=True`). The model's class and
      configuration, the number of samples and the batch size must match the
      checkpoint; the checkpoint's key is used, and the default optimiser keeps the
      schedule it was planned with (stored in its state), so a resume with a larger
      `epochs` trains on at $10^{-6}$.
    - `callback`: `callback(epoch, model, history)` after every epoch; return `True` to
      stop training early.

    **Returns:** `(model, history)`: the trained model and a dict of per-epoch lists
    `epoch` (1-based), `loss` (mean training loss of the epoch), `val_loss` (`None`
    without validation data), `learning_rate` (at the start of the epoch; `None` when
    the optimiser does not expose it) and `time` (wall-clock seconds since the start of
    training, across resumes).

    **Raises:** `NonFiniteLossError` (a `FloatingPointError`) naming the epoch when the
    training loss is NaN or infinite; `ValueError`/`TypeError` for data that do not fit
    the model.

    ```python
    train, test = gl.datasets.pendulum_sympnets()
    model = gl.GSympNet(2, n_layers=4, width=16, key=jax.random.PRNGKey(0))
    model, history = gl.fit(model, train, epochs=2000, key=jax.random.PRNGKey(1))
    ```
    """
    kind = _model_kind(model)
    epochs = check_int("epochs", epochs, minimum=1)
    loss_fn = _resolve_loss(loss)
    T = None
    if kind == "transformer":
        T = model.seq_length
        if seq_length is not None:
            seq_length = check_int("seq_length", seq_length, minimum=1)
            if T is not None and seq_length != T:
                raise ValueError(
                    f"{type(model).__name__} has seq_length={T}, got seq_length={seq_length}"
                )
            T = seq_length
    elif seq_length is not None or prediction_window is not None:
        raise ValueError("seq_length and prediction_window apply to transformer integrators only")

    x, y, mode, dt, T, pw = _prepare(model, kind, data, T=T, pw=prediction_window, what="data")
    M = x.shape[0]
    if M < 1:
        raise ValueError("data holds no training samples")
    if val_data is not None:
        xv, yv, vmode, vdt, _, _ = _prepare(model, kind, val_data, T=T, pw=pw, what="val_data")
        if vmode != mode or vdt != dt:
            raise ValueError(
                f"val_data must have the same form as data (got {vmode!r} with dt={vdt} "
                f"for {mode!r} with dt={dt})"
            )
    B = M if batch_size is None else check_int("batch_size", batch_size, minimum=1)
    if B > M:
        raise ValueError(f"batch_size must be at most the number of samples {M}, got {B}")
    n_batches = M // B
    if checkpoint_every is None:
        checkpoint_every = max(1, epochs // 10)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=1)
    if checkpoint is not None:
        checkpoint = pathlib.Path(checkpoint)
        encoded = _gio._encode_config(model)  # fail now, not at the first checkpoint
    if resume and checkpoint is None:
        raise ValueError("resume=True needs a checkpoint path")

    default_opt = optimizer is None
    if default_opt:
        optimizer = default_optimizer(epochs * n_batches)

    params, static = eqx.partition(model, eqx.is_inexact_array)
    with jax.numpy_dtype_promotion("standard"):
        opt_state = optimizer.init(params)
    raw_key = _raw_key(key)
    history = _empty_history()
    start_epoch = 0

    if resume and checkpoint.exists():
        header, sections = _gio._read_container(checkpoint)
        if header.get("kind") != "checkpoint":
            raise ValueError(f"{checkpoint} is not a training checkpoint (it holds a {header.get('kind')})")
        for field in ("class", "config", "dtype"):
            if header.get(field) != encoded.get(field):
                raise ValueError(
                    f"the checkpoint {checkpoint} was written for a different model: its "
                    f"{field} is {header.get(field)!r}, the model's is {encoded.get(field)!r}"
                )
        for field, value in (("n_samples", M), ("batch_size", B), ("mode", mode)):
            if header.get(field) != value:
                raise ValueError(
                    f"cannot resume from {checkpoint}: it was trained with {field}="
                    f"{header.get(field)!r}, this call has {field}={value!r}"
                )
        model = _gio._deserialise(sections["model"], model, f"{checkpoint} (model)")
        params, static = eqx.partition(model, eqx.is_inexact_array)
        opt_state, raw_key = _gio._deserialise(
            sections["state"], (opt_state, raw_key), f"{checkpoint} (optimiser state)"
        )
        history = {k: list(v) for k, v in header["history"].items()}
        start_epoch = int(header["epoch"])
    run_key = _restore_key(raw_key, key)

    # ----------------------------------------------------------- placement
    devices = jax.devices()
    batch_sharding = None
    if len(devices) > 1:
        mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        batch_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        x, y, params, opt_state = jax.device_put((x, y, params, opt_state), replicated)
        if val_data is not None:
            xv, yv = jax.device_put((xv, yv), replicated)

    setup = _Setup(optimizer.update, loss_fn, mode, dt, pw, M, B, n_batches, batch_sharding)
    run_epoch = _compiled(_epoch, static, setup)
    val_loss_fn = _compiled(_val_loss, static, setup)

    planned_steps = int(opt_state.total) if default_opt else None

    def learning_rate(state, step):
        if default_opt:
            return _default_learning_rate(step, planned_steps)
        return _find_learning_rate(state)

    def save_checkpoint(p, s, done, hist):
        header = {
            "kind": "checkpoint",
            "format": "geomlearn",
            **encoded,
            "epoch": done,
            "planned_epochs": epochs,
            "n_samples": M,
            "batch_size": B,
            "mode": mode,
            "history": hist,
            "geomlearn_version": _gio._package_version(),
        }
        sections = {
            "model": _gio._serialise(eqx.combine(p, static)),
            "state": _gio._serialise((s, raw_key)),
        }
        _gio._write_container(checkpoint, header, sections)

    bar = ProgressBar(epochs, enabled=progress)
    t_offset = history["time"][-1] if history["time"] else 0.0
    t0 = time.perf_counter()
    saved_epoch = start_epoch if (resume and start_epoch > 0) else None
    done = start_epoch
    try:
        for epoch in range(start_epoch, epochs):
            lr = learning_rate(opt_state, epoch * n_batches)
            new_params, new_state, loss_value, finite = run_epoch(
                params, opt_state, epoch, run_key, x, y
            )
            loss_value, finite = jax.device_get((loss_value, finite))
            loss_value = float(loss_value)
            if not (math.isfinite(loss_value) and finite):
                what = (
                    f"the training loss became {loss_value}"
                    if not math.isfinite(loss_value)
                    else f"the parameters became non-finite (training loss {loss_value})"
                )
                kept = (
                    f"; the checkpoint {checkpoint} keeps the last good state (epoch "
                    f"{saved_epoch})"
                    if checkpoint is not None and saved_epoch is not None
                    else ""
                )
                raise NonFiniteLossError(
                    f"{what} at epoch {epoch + 1}{kept}; lower the learning rate, or check "
                    "the data for outliers"
                )
            val_value = None
            if val_data is not None:
                val_value = float(val_loss_fn(new_params, xv, yv))
            params, opt_state, done = new_params, new_state, epoch + 1
            history["epoch"].append(done)
            history["loss"].append(loss_value)
            history["val_loss"].append(val_value)
            history["learning_rate"].append(lr)
            history["time"].append(t_offset + time.perf_counter() - t0)
            bar.update(done, loss_value, val_value)
            if checkpoint is not None and (done % checkpoint_every == 0 or done == epochs):
                save_checkpoint(params, opt_state, done, history)
                saved_epoch = done
            if callback is not None and callback(done, eqx.combine(params, static), history):
                break
    except KeyboardInterrupt:
        bar.close()
        if checkpoint is not None and saved_epoch != done:
            save_checkpoint(params, opt_state, done, history)
        where = f"; checkpoint saved to {checkpoint}" if checkpoint is not None else ""
        warnings.warn(
            f"training interrupted after epoch {done} of {epochs}; returning the model "
            f"trained so far{where}",
            RuntimeWarning,
            stacklevel=2,
        )
        return eqx.combine(params, static), history
    finally:
        bar.close()
    if checkpoint is not None and saved_epoch != done:
        save_checkpoint(params, opt_state, done, history)
    return eqx.combine(params, static), history
