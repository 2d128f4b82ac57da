#!/usr/bin/env bash
# Look at the documentation the way a reader does: build the site, serve it on
# localhost, and screenshot a concept page, a notebook page and an API page with a headless
# Chromium that has no network but the local server. Then open the PNGs and check
# that the formulas are typeset (no raw \[ … \] or $$ … $$ left on the page).
#
# A manual check, not run by the test suite (tests/test_docs.py checks the built HTML
# without a browser). Needs the docs extra (pip install -e '.[docs]') and Chromium
# from the distribution (Debian: apt-get install -y chromium).
#
#   bash docs/tooling/check_in_browser.sh [OUT_DIR]     # screenshots go to OUT_DIR
#
# PORT (default 8765) picks the local port; STRICT= (empty) builds without --strict,
# to look at the pages while a reference elsewhere is broken.
#
# Exit status: 0 when both screenshots were taken, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="${1:-$(mktemp -d)}"
mkdir -p "$out"
work="$(mktemp -d)"
port="${PORT:-8765}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [[ -z "$browser" ]]; then
    echo "no Chromium found: apt-get install -y chromium" >&2
    exit 1
fi

NO_MKDOCS_2_WARNING=1 mkdocs build ${STRICT---strict} --quiet --site-dir "$work/site"
python -m http.server "$port" --bind 127.0.0.1 --directory "$work/site" >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
    python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break
    sleep 0.1
done

status=0
for page in concepts/volume tutorials/positional_encoding api/layers; do
    png="$out/$(echo "$page" | tr / _).png"
    # Any host but the local server resolves nowhere, so a page that still needed
    # the network would show its formulas raw.
    "$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" \
        --user-data-dir="$work/profile-${page//\//_}" --window-size=1280,2000 \
        --virtual-time-budget=10000 --screenshot="$png" \
        "http://127.0.0.1:$port/$page/" >"$work/chromium.log" 2>&1 || true
    if [[ -s "$png" ]]; then
        echo "$page -> $png"
    else
        echo "$page: no screenshot (see the Chromium log below)" >&2
        cat "$work/chromium.log" >&2
        status=1
    fi
done
exit "$status"
