"""`tools/compile_profile.py`: the recorder sorts JAX's compilation events into stages,
tests and the call sites of operations outside `jit`; the report adds processes up."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("_compile_profile",
                                                  ROOT / "tools" / "compile_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_events_are_sorted_into_stages_tests_and_eager_call_sites():
    tool = _tool()
    recorder = tool.Recorder(frozenset({"multiply"}))
    recorder.test = "tests/test_x.py::test_a"
    # the call site is the innermost frame in the tests: this function
    recorder("/jax/core/compile/jaxpr_to_mlir_module_duration", 0.25, fun_name="jit(multiply)")
    recorder("/jax/core/compile/backend_compile_duration", 0.5, fun_name="jit(multiply)")
    recorder("/jax/core/compile/backend_compile_duration", 2.0, fun_name="jit(train_step)")
    recorder("/jax/compilation_cache/cache_retrieval_time_sec", 9.0)  # not a stage
    out = recorder.result()
    assert out["stages"]["backend_compile"] == [2, 2.5]
    assert out["stages"]["jaxpr_to_mlir_module"] == [0, 0.25]
    assert out["tests"]["tests/test_x.py::test_a"] == [2, 2.75]
    # two lines of this function are the call sites; the jitted function is not eager
    sites = out["eager"]
    assert len(sites) == 2 and all(
        site.startswith("tests/test_compile_profile.py:") and site.endswith(
            "test_events_are_sorted_into_stages_tests_and_eager_call_sites") for site in sites)
    assert sorted(sites.values()) == [[0, 0.25], [1, 0.5]]


def test_processes_add_up_and_the_report_names_the_largest(tmp_path, capsys):
    tool = _tool()
    one = {"wall_s": 10.0, "stages": {"backend_compile": [3, 1.5]},
           "eager": {"a.py:1 f": [2, 1.0]}, "tests": {"t1": [3, 1.5]}}
    two = {"wall_s": 12.0, "stages": {"backend_compile": [1, 4.0]},
           "eager": {"a.py:1 f": [1, 0.5], "b.py:2 g": [1, 3.0]}, "tests": {"t2": [1, 4.0]}}
    merged = tool.merge([one, two])
    assert merged["stages"]["backend_compile"] == [4, 5.5]
    assert merged["eager"] == {"a.py:1 f": [3, 1.5], "b.py:2 g": [1, 3.0]}
    text = tool.report(merged, top=1)
    assert "compiling 6 s, of which operations outside jit 4 s" in text
    assert "b.py:2 g" in text and "a.py:1 f" not in text  # only the largest site
    assert tool.main([str(tmp_path)]) == 2  # no profile: says so
    assert "no profile" in capsys.readouterr().err
