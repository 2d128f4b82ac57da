"""MkDocs hook: ship MathJax with the site, so that formulas render without a network.

MathJax 3 comes from the `django-static-mathjax` package (a plain copy of the MathJax
distribution; it needs no Django), installed by the `docs` extra. Its `es5/` tree is
added to the site under `assets/mathjax/` as ordinary static files, so `mkdocs build`
and `mkdocs serve` both carry it. Only the combined component that the site loads
(`tex-mml-chtml.js`) is shipped of the top-level bundles, with the folders it loads on
demand (TeX extensions, CHTML fonts, the menu and its accessibility tools).

`mkdocs.yml` loads `javascripts/mathjax.js` (the configuration) and then
`assets/mathjax/tex-mml-chtml.js`; `tests/test_docs.py` checks the built pages.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

SITE_FOLDER = "assets/mathjax"
ENTRY = "tex-mml-chtml.js"
# Loaded on demand by the entry script; the SVG output and the other bundles are not used.
FOLDERS = ("a11y", "adaptors", "input", "output/chtml", "sre", "ui")


def mathjax_root() -> Path:
    """The `es5/` folder of the installed MathJax distribution."""
    try:
        root = Path(str(resources.files("mathjax"))) / "static" / "mathjax" / "es5"
    except ModuleNotFoundError:
        root = None
    if root is None or not (root / ENTRY).is_file():
        raise PluginError(
            "MathJax is not installed, so the site cannot render its formulas offline: "
            "install the docs extra, pip install -e '.[docs]' (it brings "
            "django-static-mathjax)"
        )
    return root


def on_files(files: Files, *, config) -> Files:
    root = mathjax_root()
    sources = [root / ENTRY]
    for folder in FOLDERS:
        sources.extend(p for p in sorted((root / folder).rglob("*")) if p.is_file())
    for path in sources:
        uri = f"{SITE_FOLDER}/{path.relative_to(root).as_posix()}"
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


# `$$…$$` written inside a paragraph (docstrings do this) is not a block for
# pymdownx.arithmatex, which then reads `$` + inline math + `$`. MathJax and notebooks
# take such display math as it is, so the page does too: the stray dollars go and the
# formula becomes display math (MathJax typesets `\[…\]` in a span as a display).
_INLINE_DISPLAY = re.compile(
    r'\$<span class="arithmatex">\\\(((?:(?!</span>).)*?)\\\)</span>\$', re.DOTALL
)


def on_page_content(html: str, **kwargs) -> str:
    return _INLINE_DISPLAY.sub(r'<span class="arithmatex">\\[\1\\]</span>', html)
