"""Child process of `benchmarks._common.run_pinned`: one function on one CPU core.

`python -m benchmarks._pinned REQUEST.json RESULT.json` pins itself to the requested core
(before JAX starts its thread pools), enables float64, applies the parent's promotion
rules, calls the function and writes its JSON result with this process's machine info.
"""

from __future__ import annotations

import importlib
import json
import os
import sys


def main(argv: list[str]) -> int:
    request_path, result_path = argv
    with open(request_path) as f:
        request = json.load(f)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(request["cpu"])})

    import jax

    jax.config.update("jax_enable_x64", True)
    for name, value in request.get("config", {}).items():
        jax.config.update(name, value)

    from benchmarks._common import jsonable, machine_info

    module = importlib.import_module(request["module"])
    result = getattr(module, request["function"])(**request["kwargs"])
    result = dict(result)
    result["_machine"] = machine_info()
    with open(result_path, "w") as f:
        json.dump(jsonable(result), f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
