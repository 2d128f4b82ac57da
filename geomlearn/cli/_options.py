"""`TrainOptions`: the options of one `geomlearn train`, parsed once, recorded in `run.json`.

`train_arguments` declares the flags, `TrainOptions.from_args` parses them once (names
resolved, numbers checked, `--model-option` pairs read), `TrainOptions.resolved` fills in
what the run chose where a flag was left to its default, and `to_run` is what `run.json`
records under `"options"`. `TrainOptions.from_run` reads them back — for `evaluate`,
`predict` and `check` — from that key or, for a run written before it existed, from the
flat keys such a run recorded.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from ..symmetries import resolve_symmetry
from ._system_names import resolve_system
from ._errors import CLIError, user
from ._hamiltonian import hamiltonian_reference
from ._long_flags import long_arguments, long_option_values
from ._registry import resolve_model
from ._symmetry import symmetry_argument, symmetry_option

__all__ = ["DEFAULT_SEQ_LENGTH", "DEFAULT_HORIZON", "TrainOptions", "parse_model_options",
           "column_names", "train_arguments", "horizon_argument"]

DEFAULT_SEQ_LENGTH = 3
DEFAULT_HORIZON = 10_000  # steps of the long-horizon evaluation of `train` and `evaluate`


def parse_model_options(pairs) -> dict[str, Any]:
    """`{name: value}` from the strings `NAME=VALUE` of `--model-option`: a value is read
    as a Python literal (`12`, `0.5`, `True`, `None`, `(16, 16)`), otherwise kept as a
    string (`activation=tanh`). `ValueError` for a malformed pair or a name given twice."""
    options: dict[str, Any] = {}
    for pair in pairs or ():
        name, sep, text = str(pair).partition("=")
        if not sep or not name.isidentifier() or not text:
            raise ValueError(f"--model-option expects NAME=VALUE (e.g. width=12), got {pair!r}")
        if name in options:
            raise ValueError(f"--model-option {name} is given twice")
        try:
            options[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            options[name] = text
    return options


def column_names(names) -> tuple[str, ...] | None:
    """Column names from `--q-columns`/`--p-columns` (space- or comma-separated), or `None`."""
    if not names:
        return None
    return tuple(part for name in names for part in str(name).split(",") if part)


#: Fields that say where a run is written, not how it runs: not recorded in `run.json`.
_NOT_RECORDED = frozenset({"out", "force"})

#: The flat keys of a `run.json` written before `"options"`, by field.
_FLAT_KEYS = ("system", "model", "epochs", "batch_size", "time_budget", "seq_length",
              "prediction_window", "positional_encoding", "model_options", "n_trajectories",
              "seed", "x64", "val_fraction", "q_columns", "p_columns")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainOptions:
    """The options of one `geomlearn train` run (the flags of `train_arguments`).

    **Fields:** `system` (the command-line name of a built-in system; `None` with
    `data`), `data` (a trajectory file), `hamiltonian` (with `data`: the data's
    Hamiltonian, `MODULE:FUNCTION`), `hamiltonian_separable` (it is separable), `q_columns`,
    `p_columns`, `irregular` (with `data`: keep each row's time, for a file whose time
    column is not uniform), `val_fraction`,
    `model` (a command-line name), `epochs`, `batch_size`, `trainer` (`"auto"`, `"lm"`,
    `"adam"`), `time_budget` (seconds), `seq_length`, `prediction_window`,
    `positional_encoding` (`False`, `True` or a placement's name), `reduced_dim`,
    `model_options` (constructor arguments), `symmetry` (the canonical spec of a symmetry
    the model keeps, `--symmetry`), `n_trajectories`, `x64`, `seed`, `horizon`
    (steps of the long-horizon evaluation, 0: none), `particles` (the spatial dimension
    of the particles of a `data` file, whose escapes are measured in their centre-of-mass
    frame; `None`: the system's, none for a file), `stride` (the data keep every
    `stride`-th step of their recipe's time step; 1 with `data`), what the evaluation adds
    (`invariants`, `MODULE:FUNCTION`; `test_data` and `reference`, absolute paths;
    `plot_columns`; see `geomlearn.cli._long_options`), and where the run is written,
    `out` and `force` (not recorded). `None` leaves a choice to the run
    (`resolved`). Counts below 1, a time budget that is not positive, a negative
    horizon, a stride with `data`, a Hamiltonian or `irregular` without it, or `irregular`
    with `test_data` or `reference` raise `ValueError` naming the flag.
    """

    system: str | None = None
    data: str | None = None
    hamiltonian: str | None = None
    hamiltonian_separable: bool = False
    q_columns: tuple[str, ...] | None = None
    p_columns: tuple[str, ...] | None = None
    irregular: bool = False
    val_fraction: float = 0.2
    model: str = "gsympnet"
    epochs: int | None = None
    batch_size: int | None = None
    trainer: str = "auto"
    time_budget: float | None = None
    seq_length: int | None = None
    prediction_window: int | None = None
    positional_encoding: bool | str = False
    reduced_dim: int | None = None
    model_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    symmetry: str | None = None
    n_trajectories: int | None = None
    x64: bool = False
    seed: int = 0
    horizon: int = DEFAULT_HORIZON
    particles: int | None = None
    stride: int = 1
    invariants: str | None = None
    test_data: str | None = None
    reference: str | None = None
    plot_columns: tuple[str, str] | None = None
    out: str | None = None
    force: bool = False

    def __post_init__(self):
        for flag, value in (("--epochs", self.epochs), ("--batch-size", self.batch_size),
                            ("--seq-length", self.seq_length),
                            ("--n-trajectories", self.n_trajectories),
                            ("--reduced-dim", self.reduced_dim),
                            ("--particles", self.particles), ("--stride", self.stride)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be at least 1, got {value}")
        if self.time_budget is not None and not self.time_budget > 0:
            raise ValueError(f"--time-budget must be positive, got {self.time_budget}")
        if self.horizon is not None and self.horizon < 0:
            raise ValueError(f"--horizon must be at least 0 (0: no long-horizon evaluation), "
                             f"got {self.horizon}")
        if self.data is not None and self.stride != 1:
            raise ValueError("--stride applies to a system's data (--system), not to --data "
                             "(a file keeps the time step it was written with)")
        if self.hamiltonian is not None and self.data is None:
            raise ValueError("--hamiltonian applies to your own data (--data FILE); a built-in "
                             "--system brings its own Hamiltonian")
        if self.irregular and self.data is None:
            raise ValueError("--irregular applies to your own data (--data FILE)")
        if self.irregular and (self.test_data is not None or self.reference is not None):
            raise ValueError(f"--{'test-data' if self.test_data is not None else 'reference'} "
                             "does not apply with --irregular: the long horizon steps at the "
                             "training data's mean step from the held-out trajectories")
        if self.hamiltonian_separable and self.hamiltonian is None:
            raise ValueError("--hamiltonian-separable applies to --hamiltonian MODULE:FUNCTION")
        resolve_symmetry(self.symmetry)  # a spec of geomlearn.symmetries, or None
        if self.test_data is not None and self.reference is not None:
            raise ValueError("--test-data and --reference exclude each other: the long horizon "
                             "starts from one set of trajectories")
        for flag, value in (("--test-data", self.test_data), ("--reference", self.reference)):
            if value is not None and not self.horizon:
                raise ValueError(f"{flag} is for the long horizon: give --horizon N > 0")
        if self.plot_columns is not None and len(self.plot_columns) != 2:
            raise ValueError(f"--plot-columns takes two column names, got {self.plot_columns}")

    @classmethod
    def from_args(cls, args) -> TrainOptions:
        """The options of the parsed flags of `geomlearn train`: the system (default
        `pendulum`, none with `--data`) and the model by their command-line names;
        `CLIError` for an unknown name, a malformed `--model-option` or `--symmetry`, or a
        bad number."""
        spec = user(resolve_model, args.model)
        symmetry, model_options = symmetry_option(
            spec, args.symmetry, user(parse_model_options, args.model_option))
        if args.hamiltonian is not None and args.system is not None:
            raise CLIError("--hamiltonian and --system exclude each other: a built-in system "
                           "brings its own Hamiltonian (give --data FILE with --hamiltonian)")
        system = None if args.data is not None else user(resolve_system, args.system or "pendulum")
        return user(
            cls, system=system, data=args.data,
            hamiltonian=user(hamiltonian_reference, args.hamiltonian),
            hamiltonian_separable=bool(args.hamiltonian_separable),
            q_columns=column_names(args.q_columns), p_columns=column_names(args.p_columns),
            irregular=bool(args.irregular), val_fraction=args.val_fraction, model=spec.name,
            epochs=args.epochs, batch_size=args.batch_size, trainer=args.trainer,
            time_budget=args.time_budget, seq_length=args.seq_length,
            prediction_window=args.prediction_window, positional_encoding=args.positional_encoding,
            reduced_dim=args.reduced_dim, model_options=model_options, symmetry=symmetry,
            n_trajectories=args.n_trajectories, x64=bool(args.x64), seed=args.seed,
            horizon=args.horizon, particles=args.particles, stride=args.stride, out=args.out,
            force=bool(args.force), **user(long_option_values, args))

    def resolved(self, fit_options: dict, *, epochs, batch_size, time_budget) -> TrainOptions:
        """These options with what the run chose: the window length and prediction
        window of a window model (`fit_options`), the epochs, minibatch size and time
        budget of its trainer. Training again with them repeats the run."""
        return dataclasses.replace(
            self, seq_length=fit_options.get("seq_length"),
            prediction_window=fit_options.get("prediction_window"), epochs=epochs,
            batch_size=batch_size, time_budget=time_budget)

    def task_options(self) -> dict:
        """`seq_length` and `prediction_window` of a window model's task (none of another)."""
        return {k: v for k, v in (("seq_length", self.seq_length),
                                  ("prediction_window", self.prediction_window)) if v is not None}

    def to_run(self) -> dict:
        """What `run.json` records under `"options"` (JSON types; not `out`, `force`)."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self) if f.name not in _NOT_RECORDED}

    @classmethod
    def from_run(cls, run: dict | None) -> TrainOptions:
        """The options a `run.json` records: its `"options"`, or for a run written before
        them its flat keys (the trainer's choice then reads `"auto"`); what a run does not
        record takes the default. `ValueError` naming `run.json` for a value of a wrong
        kind."""
        if not run:
            return cls()
        recorded = run.get("options")
        if isinstance(recorded, dict):
            values = {k: v for k, v in recorded.items()
                      if k in _FIELDS and k not in _NOT_RECORDED}
        else:
            values = {k: run[k] for k in _FLAT_KEYS if k in run}
            data_file = run.get("data_file")
            if isinstance(data_file, dict) and data_file.get("path") is not None:
                values["data"] = data_file["path"]
        for name in ("q_columns", "p_columns", "plot_columns"):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        if values.get("model_options") is None:
            values.pop("model_options", None)
        values["x64"] = bool(values.get("x64", False))
        try:
            return cls(**values)
        except (TypeError, ValueError) as e:
            raise ValueError(f"run.json: the options it records are not valid: {e}") from None


_FIELDS = frozenset(f.name for f in dataclasses.fields(TrainOptions))


def horizon_argument(p) -> None:
    """`--horizon N` (of `train` and `evaluate`)."""
    p.add_argument("--horizon", type=int, default=DEFAULT_HORIZON, metavar="N",
                   help=f"long-horizon evaluation: roll out N steps from each validation state and "
                        f"report escapes, valid time and invariant drift (default {DEFAULT_HORIZON}; 0: off)")


def train_arguments(t) -> None:
    """The flags of `geomlearn train` (each a field of `TrainOptions`)."""
    source = t.add_mutually_exclusive_group()
    source.add_argument("--system", default=None, help="system name (see `geomlearn list`); default pendulum")
    source.add_argument("--data", default=None, metavar="PATH",
                        help="train on your own trajectories: a .npz or .csv file (see docs: Your own data)")
    t.add_argument("--hamiltonian", default=None, metavar="MODULE:FUNCTION",
                   help="with --data: the data's Hamiltonian H(z) of one state (q first, then "
                        "p), written in jax.numpy, from a .py file (my_system.py:H) or an "
                        "importable module (my_package.systems:H): the run is then compared "
                        "with the classical integrators at equal cost (implicit midpoint, "
                        "Gauss–Legendre, RK4)")
    t.add_argument("--hamiltonian-separable", action="store_true",
                   help="with --hamiltonian: H = T(p) + V(q) (checked), so that Störmer–Verlet "
                        "and Yoshida join the comparison")
    t.add_argument("--q-columns", nargs="+", default=None, metavar="NAME",
                   help="with --data: the position columns, in order, with --p-columns (default: "
                        "the columns but trajectory and t, read by name, positions first; see "
                        "docs: Your own data)")
    t.add_argument("--p-columns", nargs="+", default=None, metavar="NAME",
                   help="with --data: the momentum columns, in order, with --q-columns")
    t.add_argument("--irregular", action="store_true",
                   help="with --data: keep each row's time, for a file whose time column is not "
                        "uniform (irregularly sampled trajectories); the time step is then the "
                        "training data's mean step. Feed-forward and transformer integrators "
                        "only (see docs: Your own data)")
    t.add_argument("--val-fraction", type=float, default=0.2,
                   help="with --data: the share of whole trajectories held out for validation (default 0.2, at least one)")
    t.add_argument("--model", default="gsympnet", help="model name (see `geomlearn list`); default gsympnet")
    t.add_argument("--epochs", type=int, default=None, help="training epochs (Levenberg–Marquardt: iterations); default by trainer and data size")
    t.add_argument("--batch-size", type=int, default=None, help="Adam's minibatch size (default: all samples up to 512, else 256)")
    t.add_argument("--trainer", choices=("auto", "lm", "adam"), default="auto",
                   help="Levenberg–Marquardt, Adam, or auto (default): LM for small networks, see geomlearn.cli.choose_trainer")
    t.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds (LM default 150)")
    t.add_argument("--seq-length", type=int, default=None, help=f"transformers: window length T (default {DEFAULT_SEQ_LENGTH})")
    t.add_argument("--prediction-window", type=int, default=None, help="transformers: rows predicted per window, 1..T (default T: the rollout keeps the structure)")
    t.add_argument("--positional-encoding", nargs="?", const=True, default=False, metavar="PLACEMENT",
                   help="transformers: add the positional encoding (the model family's measured "
                        "default, or a placement by name: bias, amplitude, split-amplitude, ...)")
    t.add_argument("--reduced-dim", type=int, default=None, help="model reduction: the reduced dimension")
    t.add_argument("--model-option", nargs="+", action="extend", default=None, metavar="NAME=VALUE",
                   help="a constructor argument of the model instead of the command line's size, e.g. "
                        "L=2 width=16 (see the model's docstring; repeatable; run.json records them)")
    symmetry_argument(t)
    t.add_argument("--n-trajectories", type=int, default=None, help="use this many trajectories of the data set (rigid body default 64)")
    t.add_argument("--x64", action="store_true", help="compute in float64 (JAX's 64-bit mode, this process only)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    horizon_argument(t)
    t.add_argument("--stride", type=int, default=1, metavar="S",
                   help="sample the system's data every S steps of its recipe's time step: the "
                        "model learns one step of S*dt, and the summary gives Störmer–Verlet's "
                        "stability limit next to it (default 1; not with --data or a fixed "
                        "data set)")
    t.add_argument("--particles", type=int, default=None, metavar="K",
                   help="with --data: the positions are particles in K dimensions (x1 y1 x2 y2 "
                        "…, momenta alike) moving under forces of their differences; the long "
                        "horizon measures escapes in their centre-of-mass frame")
    long_arguments(t)
    t.add_argument("--out", default=None, help="output folder (default runs/<system>-<model>-<time>-<id>)")
    t.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
