"""The argument parser and `main`: exit status, error lines, 64-bit mode per command."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import sys

import jax

from .._version import __version__
from ._commands import DEFAULT_HORIZON, DEFAULT_SEQ_LENGTH, check, evaluate, list_all, train
from ._errors import CLIError
from ._predict import predict, predict_arguments

__all__ = ["main", "EXAMPLES"]

EXAMPLES = {
    "train": ("geomlearn train\n  geomlearn train --system rigid_body --model vp-transformer --positional-encoding"
              "\n  geomlearn train --system parametric_pendulum --model vp-transformer "
              "--positional-encoding"
              "\n  geomlearn train --data traj.csv --model gsympnet --val-fraction 0.25"
              "\n  geomlearn train --data traj.csv --q-columns x y --p-columns px py"),
    "predict": ("geomlearn predict runs/traj-gsympnet-20261201-101500-3fa2/ --from-data traj.csv "
                "--steps 500 --out rollout.csv\n  geomlearn predict RUN --initial starts.npz "
                "--steps 1000 --out rollout.npz"),
    "evaluate": ("geomlearn evaluate runs/pendulum-gsympnet-20261201-101500-3fa2/"
                 "\n  geomlearn evaluate runs/pendulum-gsympnet-20261201-101500-3fa2/ --horizon 100000"),
    "check": "geomlearn check runs/pendulum-gsympnet-*/ --points 32",
    "list": "geomlearn list | head",
}
_HANDLERS = {"train": train, "evaluate": evaluate, "check": check, "list": list_all,
             "predict": predict}


def _train_arguments(t) -> None:
    source = t.add_mutually_exclusive_group()
    source.add_argument("--system", default=None, help="system name (see `geomlearn list`); default pendulum")
    source.add_argument("--data", default=None, metavar="PATH",
                        help="train on your own trajectories: a .npz or .csv file (see docs: Your own data)")
    t.add_argument("--q-columns", nargs="+", default=None, metavar="NAME",
                   help="with --data: the position columns, in order, with --p-columns (default: every column but trajectory and t, in file order, q columns first)")
    t.add_argument("--p-columns", nargs="+", default=None, metavar="NAME",
                   help="with --data: the momentum columns, in order, with --q-columns")
    t.add_argument("--val-fraction", type=float, default=0.2,
                   help="with --data: the share of whole trajectories held out for validation (default 0.2, at least one)")
    t.add_argument("--model", default="gsympnet", help="model name (see `geomlearn list`); default gsympnet")
    t.add_argument("--epochs", type=int, default=None, help="training epochs (Levenberg–Marquardt: iterations); default by trainer and data size")
    t.add_argument("--batch-size", type=int, default=None, help="Adam's minibatch size (default: all samples up to 512, else 256)")
    t.add_argument("--trainer", choices=("auto", "lm", "adam"), default="auto",
                   help="Levenberg–Marquardt, Adam, or auto (default): LM for small networks, see geomlearn.training.choose_trainer")
    t.add_argument("--time-budget", type=float, default=None, help="stop training after this many seconds (LM default 150)")
    t.add_argument("--seq-length", type=int, default=None, help=f"transformers: window length T (default {DEFAULT_SEQ_LENGTH})")
    t.add_argument("--prediction-window", type=int, default=None, help="transformers: rows predicted per window, 1..T (default T: the rollout keeps the structure)")
    t.add_argument("--positional-encoding", nargs="?", const=True, default=False, metavar="PLACEMENT",
                   help="transformers: add the positional encoding (the model family's measured "
                        "default, or a placement by name: bias, bias-light, amplitude, ...)")
    t.add_argument("--reduced-dim", type=int, default=None, help="model reduction: the reduced dimension")
    t.add_argument("--model-option", nargs="+", action="extend", default=None, metavar="NAME=VALUE",
                   help="a constructor argument of the model instead of the command line's size, e.g. "
                        "L=2 width=16 (see the model's docstring; repeatable; run.json records them)")
    t.add_argument("--n-trajectories", type=int, default=None, help="use this many trajectories of the data set (rigid body default 64)")
    t.add_argument("--x64", action="store_true", help="compute in float64 (JAX's 64-bit mode, this process only)")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _horizon_argument(t)
    t.add_argument("--out", default=None, help="output folder (default runs/<system>-<model>-<time>-<id>)")
    t.add_argument("--force", action="store_true", help="write into a non-empty --out folder")


def _horizon_argument(p) -> None:
    p.add_argument("--horizon", type=int, default=DEFAULT_HORIZON, metavar="N",
                   help=f"long-horizon evaluation: roll out N steps from each validation state and "
                        f"report escapes, valid time and invariant drift (default {DEFAULT_HORIZON}; 0: off)")


def _parser() -> argparse.ArgumentParser:
    def sub_parser(name, help):
        return sub.add_parser(name, help=help, description=help, epilog=f"example:\n  {EXAMPLES[name]}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = argparse.ArgumentParser(
        prog="geomlearn", description="Train, evaluate and check structure-preserving neural integrators.",
        epilog="exit status: 0 success, 1 a failed check or training, 2 a usage error, 3 a check "
               "of a model that claims no structure (nothing to verify), 130 interrupted")
    p.add_argument("--version", action="version", version=f"geomlearn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{train,predict,evaluate,check,list}")
    _train_arguments(sub_parser("train", "train a model on a system's data or your own file, evaluate it, write a report"))
    predict_arguments(sub_parser("predict", "roll a trained model out from initial states and write the trajectories"))
    e = sub_parser("evaluate", "evaluate a trained model again and rewrite metrics.json")
    e.add_argument("dir", help="a folder written by geomlearn train")
    _horizon_argument(e)
    c = sub_parser("check", "structure residuals of a saved model's iterated map, pass/fail")
    c.add_argument("dir", help="a folder written by geomlearn train, or a model file")
    c.add_argument("--points", type=int, default=16,
                   help="sample points, drawn from the standard normal distribution (default 16)")
    c.add_argument("--dt", type=float, default=None,
                   help="time step of a model whose map needs one (default: the one its file stores)")
    sub_parser("list", "systems and models, and which structure each preserves")
    return p


def _wants_x64(args) -> bool:
    """`train --x64`, `check` (always float64), or `evaluate` of a run trained in float64."""
    if args.command == "check" or getattr(args, "x64", False):
        return True
    if args.command in ("evaluate", "predict"):
        run_file = pathlib.Path(args.dir) / "run.json"
        try:
            return bool(json.loads(run_file.read_text()).get("x64"))
        except (OSError, ValueError, AttributeError):
            return False  # a missing or corrupt run.json is reported by the command itself
    return False


def main(argv: list[str] | None = None) -> int:
    """Run the `geomlearn` command with `argv` (default `sys.argv[1:]`); returns the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or an argparse usage error (already printed)
        return int(e.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    try:  # JAX's 64-bit mode for the duration of a command (restored afterwards)
        with jax.enable_x64(True) if _wants_x64(args) else contextlib.nullcontext():
            status = _HANDLERS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except CLIError as e:
        print(f"geomlearn: error: {e}", file=sys.stderr)
        return 2
    except FloatingPointError as e:  # fit's NonFiniteLossError: the run failed, not the usage
        print(f"geomlearn: training failed: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("geomlearn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `geomlearn list | head`: the reader left; end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
