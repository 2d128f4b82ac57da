"""The commands `check` and `list`; each returns an exit status."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..systems import AbstractPortHamiltonianSystem
from ._system_names import SYSTEMS
from ._errors import CLIError, user
from ._options import DEFAULT_SEQ_LENGTH, TrainOptions
from ._own_data import check_model_fits
from ._recipes import phase_space
from ._registry import MODELS, spec_of
from ._runs import load_run
from ._symmetry import symmetry_lines

__all__ = ["check", "NOTHING_TO_CHECK", "list_all"]


#: The exit status of `geomlearn check` on a model whose iterated map claims no structure.
NOTHING_TO_CHECK = 3


def _check_task(model, options: TrainOptions, dt):
    """The task of `geomlearn check` (the run's window, if any); `CLIError` when the model
    needs a time step that neither its file nor `--dt` gives."""
    T = getattr(model, "seq_length", None) or options.seq_length or DEFAULT_SEQ_LENGTH
    shape_options = {"seq_length": T} if hasattr(model, "seq_length") else {}
    task = user(model.task, **shape_options, prediction_window=options.prediction_window,
                data_dt=dt)
    try:
        model.rollout_task(model.state_shape(task), prediction_window=task.prediction_window,
                           dt=task.dt)
    except ValueError as e:
        raise CLIError(f"{e}; its file does not store one (saved before models stored their "
                       "time step): pass it with --dt") from None
    return task


def check(args) -> int:
    """`geomlearn check`: the structure residuals of a saved model at random points (exit
    status 1 when a claimed structure fails, `NOTHING_TO_CHECK` = 3 when the model's
    iterated map claims no structure)."""
    if args.points < 1:
        raise CLIError(f"--points must be at least 1, got {args.points}")
    dt = getattr(args, "dt", None)
    if dt is not None and not dt > 0:
        raise CLIError(f"--dt must be a number > 0, got {dt}")
    out, model, run = load_run(args.dir, need_run=False)
    task = _check_task(model, user(TrainOptions.from_run, run),
                       dt if dt is not None else getattr(model, "dt", None))
    name = f"{type(model).__name__} ({out})"
    shape = model.state_shape(task)
    points = jax.random.normal(jax.random.PRNGKey(0), (args.points, *shape), dtype=jnp.float64)
    result = spec_of(model).check(model, points, prediction_window=task.prediction_window, dt=task.dt)
    claimed = getattr(result, "claimed", None)  # an integrator's check: which residuals it claims
    if claimed is not None and not any(claimed(r) for r in result.residuals):
        print(f"{name}: no structure claimed; nothing to verify (exit status {NOTHING_TO_CHECK})")
        return NOTHING_TO_CHECK
    print(f"points: {args.points} draws of shape {shape} from the standard normal "
          "distribution N(0, I) (float64, key PRNGKey(0))"
          + (f"; dt = {task.dt}" if task.dt is not None else ""))
    print(result.report(title=name))
    return 0 if result.passed else 1


def _fits(spec, name, system) -> bool:
    """Whether `geomlearn train --system name --model spec` would build (`_system_and_spec`)."""
    shape = phase_space(name, system)
    if shape is system:
        return spec.incompatibility(system) is None
    try:
        check_model_fits(spec, shape, name)
    except CLIError:
        return False
    return True


def list_all(args) -> int:
    """`geomlearn list`: the systems and models, and which structure each preserves."""
    systems = {name: cls() for name, cls in SYSTEMS.items()}
    lines = ["systems:"]
    for name, s in systems.items():
        kind = ("canonical" if s.canonical else "damped/driven, port-Hamiltonian"
                if isinstance(s, AbstractPortHamiltonianSystem) else "non-canonical, volume-preserving")
        shape = phase_space(name, s)
        rows = "" if shape is s else f" (trained on its {', '.join(shape.labels)} rows)"
        lines.append(f"  {name:<22} dim {s.dim}{rows}  {kind}; invariants: "
                     f"{', '.join(s.invariants) or 'none'}")
    lines.append("  your own: --data FILE --hamiltonian MODULE:FUNCTION (canonical; add "
                 "--hamiltonian-separable for H = T(p) + V(q))")
    lines.append("models:")
    for name, spec in MODELS.items():
        fits = [s for s, system in systems.items() if _fits(spec, s, system)]
        lines.append(f"  {name:<31} {spec.cls.__name__:<28} preserves: {spec.structure:<10}  "
                     f"systems: {', '.join(fits)}")
    lines.extend(symmetry_lines())
    print("\n".join(lines))
    return 0
