"""The documentation site builds with `mkdocs build --strict`: a broken reference, a
missing page or an unresolvable API name fails the test suite (and so CI). The built
pages are then read the way a browser would load them: every formula must reach the
local copy of MathJax, and no page may load a script or a style sheet from the network
(`docs/tooling/check_in_browser.sh` is the same check by eye, in a real browser)."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
MATHJAX_CONFIG = ROOT / "docs" / "javascripts" / "mathjax.js"
MATHJAX_ENTRY = "assets/mathjax/tex-mml-chtml.js"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once for this module with `mkdocs build --strict`."""
    local = Path(sys.executable).parent / "mkdocs"  # the virtual environment's own
    mkdocs = str(local) if local.exists() else shutil.which("mkdocs")
    assert mkdocs, "mkdocs is not installed: install the test extra, pip install -e '.[test]'"
    site_dir = tmp_path_factory.mktemp("docs") / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    out = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return site_dir


@pytest.mark.slow
def test_mkdocs_build_strict(site):
    assert (site / "index.html").exists()
    assert (site / "api" / "layers" / "index.html").exists()


# MathJax's defaults for the tags whose content it never reads (`skipHtmlTags`).
_SKIPPED_TAGS = {"script", "noscript", "style", "textarea", "pre", "code", "annotation",
                 "annotation-xml"}
# A formula between any of the four delimiter pairs; `$…$` as TeX writes it (no space
# inside the dollars), so prices and shell prompts are not taken for math.
_FORMULA = re.compile(
    r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<![\\$])\$(?![\s$])[^$]*?(?<!\s)\$", re.S
)
# A dollar sign glued to a formula that arithmatex did convert (\x00 stands for it):
# Markdown math that was only half understood, e.g. `$$…$$` inside a paragraph.
_HALF_PARSED = re.compile(r"\$\s*\x00|\x00[^\w\s]?\s*\$")


def _mathjax_option(name):
    found = re.search(rf'{name}\s*:\s*"([^"]*)"', MATHJAX_CONFIG.read_text())
    assert found, f"{MATHJAX_CONFIG} does not set {name}"
    return found.group(1)


def _class_pattern(option):
    """The regular expression MathJax 3 builds from `ignoreHtmlClass` or
    `processHtmlClass` (HTMLDomStrings.getPatterns); it is matched against the class
    attribute, the empty string for an element without one."""
    return re.compile(rf"(?:^| )(?:{option})(?: |$)")


def _formulas(html, ignore_class=None, process_class=None):
    """`(formula, typeset)` for every formula in the page's body, where `typeset` says
    whether MathJax's document walk reaches it. The walk follows MathJax 3's rule
    (HTMLDomStrings.handleContainer): an element whose class matches `ignoreHtmlClass`
    hides its content, unless its class matches `processHtmlClass`, which shows it
    again; skipped tags are not read. The options default to the site's own."""
    from bs4 import BeautifulSoup, NavigableString
    from bs4.element import Comment

    ignore = _class_pattern(ignore_class or _mathjax_option("ignoreHtmlClass"))
    process = _class_pattern(process_class or _mathjax_option("processHtmlClass"))
    found = []

    def walk(node, hidden):
        for child in node.children:
            if isinstance(child, Comment):
                continue
            if isinstance(child, NavigableString):
                found.extend((m.group(0), not hidden) for m in _FORMULA.finditer(str(child)))
                continue
            cls = " ".join(child.get("class") or [])
            processed = bool(process.search(cls))
            if child.name in _SKIPPED_TAGS and not processed:
                continue
            walk(child, (hidden or bool(ignore.search(cls))) and not processed)

    soup = BeautifulSoup(html, "html.parser")
    walk(soup.body or soup, False)
    return found


def _half_parsed(html):
    """Stray dollar signs next to a formula that arithmatex converted."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    body = soup.body or soup
    for tag in body.find_all(list(_SKIPPED_TAGS)):
        tag.decompose()
    for math in body.find_all(class_="arithmatex"):
        math.replace_with("\x00")
    text = body.get_text()
    return [text[max(m.start() - 30, 0): m.end() + 30] for m in _HALF_PARSED.finditer(text)]


def _scripts_and_styles(html):
    """The `src` of every script and the `href` of every style sheet, in page order."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    scripts = [s["src"] for s in soup.find_all("script", src=True)]
    links = soup.find_all("link", href=True)
    styles = [s["href"] for s in links if "stylesheet" in s.get("rel", [])]
    return scripts, styles


def _is_remote(url):
    return bool(urlsplit(url).scheme) or url.startswith("//")


def test_the_mathjax_configuration_takes_every_delimiter():
    config = MATHJAX_CONFIG.read_text()
    for pair in ('["$", "$"]', '["\\\\(", "\\\\)"]', '["$$", "$$"]', '["\\\\[", "\\\\]"]'):
        assert pair in config, f"{MATHJAX_CONFIG} does not take the delimiters {pair}"


def test_the_formula_finder_sees_what_mathjax_reads():
    page = (
        '<body><p class="x">$a$ hidden</p><div class="arithmatex">\\(b\\)</div>'
        '<div class="jp-RenderedMarkdown"><p>$$c$$ and \\[d\\] and $e_1$ for $5 or $ 6 $</p>'
        '<pre>$f$</pre><span class="note">$g$</span></div></body>'
    )
    assert _formulas(page, ".+", "arithmatex|jp-RenderedMarkdown") == [
        ("$a$", False), ("\\(b\\)", True), ("$$c$$", True), ("\\[d\\]", True),
        ("$e_1$", True), ("$g$", False),
    ]
    # The usual "ignore everything" pattern also ignores elements without a class, so
    # it hides the math in the paragraphs of a notebook cell: what the site once did.
    assert _formulas(page, ".*|", "arithmatex|jp-RenderedMarkdown") == [
        ("$a$", False), ("\\(b\\)", True), ("$$c$$", False), ("\\[d\\]", False),
        ("$e_1$", False), ("$g$", False),
    ]


def test_half_parsed_markdown_math_is_found():
    whole = '<body><p>So <span class="arithmatex">\\(x\\)</span>, costs $5.</p></body>'
    half = '<body><li>So $\n<span class="arithmatex">\\(x\\)</span>,$ with</li></body>'
    assert _half_parsed(whole) == []
    assert len(_half_parsed(half)) == 1


@pytest.mark.slow
def test_every_formula_is_typeset_offline(site):
    """Every page with a formula loads the local MathJax after its configuration, every
    formula on it lies where that configuration makes MathJax look, and none was left
    half converted; no page loads a script or a style sheet from the network. A
    concept page, an API page and a notebook page are among the pages with formulas."""
    assert (site / MATHJAX_ENTRY).is_file()
    assert list((site / "assets/mathjax/output/chtml/fonts/woff-v2").glob("MathJax_Main-*.woff"))
    with_math, problems = set(), []
    for page in sorted(site.rglob("*.html")):
        name = page.relative_to(site).as_posix()
        html = page.read_text(encoding="utf-8")
        scripts, styles = _scripts_and_styles(html)
        remote = [url for url in scripts + styles if _is_remote(url)]
        if remote:
            problems.append(f"{name} loads from the network: {remote}")
        formulas = _formulas(html)
        if not formulas:
            continue
        with_math.add(name)
        missed = [f for f, typeset in formulas if not typeset]
        if missed:
            problems.append(
                f"{name}: {len(missed)} formulas MathJax never reaches, e.g. {missed[:3]}"
            )
        half = _half_parsed(html)
        if half:
            problems.append(f"{name}: dollar signs left around converted math: {half[:3]}")
        resolved = [
            (site / src.lstrip("/") if src.startswith("/") else page.parent / src).resolve()
            for src in scripts if src
        ]
        entry = (site / MATHJAX_ENTRY).resolve()
        config = (site / "javascripts" / "mathjax.js").resolve()
        if entry not in resolved or config not in resolved:
            problems.append(
                f"{name} has formulas but does not load {MATHJAX_ENTRY} and its configuration"
            )
        elif resolved.index(config) > resolved.index(entry):
            problems.append(f"{name} loads MathJax before its configuration")
    assert not problems, "\n".join(problems)
    for page in ("concepts/volume/index.html", "api/layers/index.html",
                 "tutorials/positional_encoding/index.html"):
        assert page in with_math, f"no formula found on {page}"


def test_quickstart_is_shared_with_the_docs():
    """The installation page includes the README's Quickstart verbatim (a snippet)."""
    readme = (ROOT / "README.md").read_text()
    assert "<!-- --8<-- [start:quickstart] -->" in readme
    assert "<!-- --8<-- [end:quickstart] -->" in readme
    assert '--8<-- "README.md:quickstart"' in (ROOT / "docs" / "installation.md").read_text()


def test_the_quickstart_sets_a_fresh_machine_up_with_two_commands():
    """The README's Quickstart (the docs include it) installs and runs the main job with
    one command and the tests with another, as `.ci/run` does."""
    readme = (ROOT / "README.md").read_text()
    quickstart = readme.split("[start:quickstart]")[1].split("[end:quickstart]")[0]
    for command in ('pip install -e ".[plot]" && geomlearn train',
                    'pip install -e ".[test]" && pytest', "pytest -m slow"):
        assert command in quickstart, f"the Quickstart lost {command!r}"
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install --quiet -e ".[test]"' in ci and "\npytest\n" in ci
    assert "\npytest -m slow\n" in ci


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
