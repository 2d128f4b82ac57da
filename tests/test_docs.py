"""The documentation site builds with `mkdocs build --strict`: a broken reference, a
missing page or an unresolvable API name fails the test suite (and so CI)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    local = Path(sys.executable).parent / "mkdocs"  # the virtual environment's own
    mkdocs = str(local) if local.exists() else shutil.which("mkdocs")
    assert mkdocs, "mkdocs is not installed: install the test extra, pip install -e '.[test]'"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "layers" / "index.html").exists()


def test_quickstart_is_shared_with_the_docs():
    """The installation page includes the README's Quickstart verbatim (a snippet)."""
    readme = (ROOT / "README.md").read_text()
    assert "<!-- --8<-- [start:quickstart] -->" in readme
    assert "<!-- --8<-- [end:quickstart] -->" in readme
    assert '--8<-- "README.md:quickstart"' in (ROOT / "docs" / "installation.md").read_text()


def test_every_public_name_is_in_the_api_reference():
    import geomlearn

    api = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    missing = [
        name
        for name in geomlearn.__all__
        if name not in {"geometry", "layers", "models", "systems", "integrators", "datasets"}
        and name not in api
    ]
    assert not missing, f"public names without an API entry: {missing}"
