"""The argument parser and `main`: exit status, error lines, 64-bit mode per command."""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import sys

import jax

from .._files import read_json
from .._version import __version__
from ._commands import evaluate, train
from ._inspect import check, list_all
from ._errors import CLIError
from ._options import TrainOptions, horizon_argument, train_arguments
from ._predict import predict, predict_arguments

__all__ = ["main", "EXAMPLES"]

EXAMPLES = {
    "train": ("geomlearn train\n  geomlearn train --system rigid_body --model vp-transformer --positional-encoding"
              "\n  geomlearn train --system parametric_pendulum --model vp-transformer "
              "--positional-encoding"
              "\n  geomlearn train --data traj.csv --model gsympnet --val-fraction 0.25"
              "\n  geomlearn train --system kepler --symmetry rotation:0,1"
              "\n  geomlearn train --data traj.csv --q-columns x y --p-columns px py"
              "\n  geomlearn train --data traj.csv --hamiltonian my_system.py:H "
              "--hamiltonian-separable"
              "\n  geomlearn train --data uneven.csv --irregular --model symplectic-transformer"),
    "predict": ("geomlearn predict runs/traj-gsympnet-20261201-101500-3fa2/ --from-data traj.csv "
                "--steps 500 --out rollout.csv\n  geomlearn predict RUN --initial starts.npz "
                "--steps 1000 --out rollout.npz\n  geomlearn predict RUN --from-data uneven.csv "
                "--times times.txt --out at_times.csv"),
    "evaluate": ("geomlearn evaluate runs/pendulum-gsympnet-20261201-101500-3fa2/"
                 "\n  geomlearn evaluate runs/pendulum-gsympnet-20261201-101500-3fa2/ --horizon 100000"),
    "check": "geomlearn check runs/pendulum-gsympnet-*/ --points 32",
    "list": "geomlearn list | head",
}
_HANDLERS = {"train": train, "evaluate": evaluate, "check": check, "list": list_all,
             "predict": predict}


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line (the usage is `--help`'s)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    def sub_parser(name, help):
        return sub.add_parser(name, help=help, description=help, epilog=f"example:\n  {EXAMPLES[name]}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    p = _Parser(
        prog="geomlearn", description="Train, evaluate and check structure-preserving neural integrators.",
        epilog="exit status: 0 success, 1 a failed check or training, 2 a usage error, 3 a check "
               "of a model that claims no structure (nothing to verify), 4 train or evaluate: "
               "trained but did not learn (\"not trained\" in the summary and metrics.json; "
               "all files written), 5 predict: some trajectories failed (all written, with "
               "their status), 130 interrupted")
    p.add_argument("--version", action="version", version=f"geomlearn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="{train,predict,evaluate,check,list}")
    train_arguments(sub_parser("train", "train a model on a system's data or your own file, evaluate it, write a report"))
    predict_arguments(sub_parser("predict", "roll a trained model out from initial states and write the trajectories"))
    e = sub_parser("evaluate", "evaluate a trained model again and rewrite metrics.json")
    e.add_argument("dir", help="a folder written by geomlearn train")
    horizon_argument(e)
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
        try:
            return TrainOptions.from_run(read_json(pathlib.Path(args.dir) / "run.json")).x64
        except (OSError, ValueError):
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
