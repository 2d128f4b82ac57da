// MathJax 3 configuration; loaded before the local copy of MathJax that
// docs/tooling/offline_math.py adds to the site (assets/mathjax/), so no page needs
// a network to show its formulas.
//
// Math is looked for only inside these elements (and inside their descendants that
// have no class), so that a stray dollar sign elsewhere is left alone:
// - `arithmatex`: Markdown pages and API docstrings (pymdownx.arithmatex turns
//   $…$, $$…$$, \(…\) and \[…\] into \(…\) and \[…\] inside these elements);
// - `jp-RenderedMarkdown`: the Markdown cells of notebook pages, whose math
//   mkdocs-jupyter leaves as written ($…$, $$…$$, \(…\), \[…\]);
// - `jp-RenderedLatex`: LaTeX outputs of notebook cells;
// - `md-ellipsis`: the labels of the navigation and of the table of contents, which
//   repeat a heading's math as written.
// tests/test_docs.py reads `processHtmlClass` and the delimiters from this file.
window.MathJax = {
  tex: {
    inlineMath: [["$", "$"], ["\\(", "\\)"]],
    displayMath: [["$$", "$$"], ["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    // Any class at all (MathJax also matches an absent class against this pattern, so
    // ".*|" would hide the unclassed <p> and <li> of notebook cells).
    ignoreHtmlClass: ".+",
    processHtmlClass: "arithmatex|jp-RenderedMarkdown|jp-RenderedLatex|md-ellipsis"
  }
};

// With instant navigation, mkdocs-material swaps page content without reloading the
// page: typeset the new content once MathJax is ready. (The first page is typeset
// by MathJax's own start-up, before it is ready, so nothing is done then.)
document$.subscribe(() => {
  const mathjax = window.MathJax;
  if (!mathjax || !mathjax.startup || !mathjax.startup.promise) {
    return;
  }
  mathjax.startup.promise.then(() => {
    mathjax.startup.output.clearCache();
    mathjax.typesetClear();
    mathjax.texReset();
    return mathjax.typesetPromise();
  });
});
