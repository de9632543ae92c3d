#!/usr/bin/env bash
# mlc_lab's two entry points, each setting itself up from a fresh clone:
#   ./run.sh lab    JupyterLab on the lecture notebooks (a working copy in .work/notebooks)
#   ./run.sh test   the whole test suite: Python, widgets, JS, real-browser JupyterLab tests, a Slurm cluster
# Needs only python3 (>= 3.11), node/npm and the package registries. Re-runs skip what is done.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)
VENV="$ROOT/.venv"
STAMPS="$ROOT/.venv/.mlc_lab_stamps"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
FIRST_NOTEBOOK=00_start.ipynb  # the notebook README.md tells a new user to open first

say() { printf '\033[1m[mlc-lab]\033[0m %s\n' "$*" >&2; }

digest() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }

setup_python() {
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating the Python environment in .venv"
        python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install -q --upgrade pip
    fi
    mkdir -p "$STAMPS"
    local want; want=$(digest pyproject.toml)
    if [ "$(cat "$STAMPS/python" 2>/dev/null)" != "$want" ]; then
        say "installing mlc_lab and its pinned dependencies (TVM 0.27, JupyterLab, ...)"
        # The JS bundles are built below by npm directly; skip the build hook's own npm run here.
        HATCH_JUPYTER_BUILDER_SKIP_NPM=1 "$VENV/bin/python" -m pip install -q -e ".[lab,test]"
        echo "$want" > "$STAMPS/python"
    fi
}

setup_js() {
    local want; want=$(digest package.json package-lock.json)
    if [ ! -d node_modules ] || [ "$(cat "$STAMPS/npm" 2>/dev/null)" != "$want" ]; then
        say "installing the front-end toolchain (npm install from package-lock.json)"
        # `npm install` follows the lock file (which lists rspack's optional per-platform
        # bindings as npm itself writes them, so this leaves it unchanged) and, unlike `npm ci`,
        # keeps a node_modules that is already there.
        npm install --no-audit --no-fund --loglevel=error
        echo "$want" > "$STAMPS/npm"
    fi
    local src; src=$( (find js -type f \( -name '*.ts' -o -name '*.css' -o -name '*.mjs' -o -name '*.json' \) \
        ! -path '*/__tests__/*' ! -path 'js/labextension/lib/*' -print0 | sort -z | xargs -0 cat; cat package.json) \
        | sha256sum | cut -c1-16)
    if [ ! -d mlc_lab/static ] || [ ! -e mlc_lab/labextension/package.json ] \
        || [ "$(cat "$STAMPS/bundles" 2>/dev/null)" != "$src" ]; then
        say "building the widget bundles and the JupyterLab extension"
        # jupyter-builder (the labextension builder) lives in the venv.
        PATH="$VENV/bin:$PATH" npm run --silent build
        echo "$src" > "$STAMPS/bundles"
    fi
}

# The checkout's prebuilt JupyterLab extension, found through JUPYTER_PATH (an installed wheel puts
# it in share/jupyter/labextensions instead); the shared venv is left alone.
use_labextension() {
    local data="$ROOT/.work/jupyter"
    mkdir -p "$data/labextensions"
    ln -sfn "$ROOT/mlc_lab/labextension" "$data/labextensions/mlc-lab-jupyterlab"
    export JUPYTER_PATH="$data${JUPYTER_PATH:+:$JUPYTER_PATH}"
    # mlc_lab's server extension (mlc_lab/_server.py: the kernel websocket without Nagle's delay)
    export JUPYTER_CONFIG_PATH="$ROOT/jupyter-config${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
}

lab() {
    setup_python
    setup_js
    local work="$ROOT/.work/notebooks"
    mkdir -p "$work"
    # Copy notebooks the working copy does not have yet; the student's edits are never overwritten.
    for nb in notebooks/*.ipynb; do
        [ -e "$nb" ] || continue
        [ -e "$work/$(basename "$nb")" ] || cp "$nb" "$work/"
    done
    local extra=()
    [ "$(id -u)" = 0 ] && extra+=(--allow-root)
    # The first start opens the notebook the README names; later starts restore the workspace.
    # (LabApp.default_url: JupyterLab sets the server's default_url from its own, so
    # --ServerApp.default_url is overridden; tests/e2e/test_run_sh_lab.py checks where / goes.)
    if [ ! -e "$work/.mlc_lab_opened" ] && [ -e "$work/$FIRST_NOTEBOOK" ]; then
        extra+=(--LabApp.default_url="/lab/tree/$FIRST_NOTEBOOK")
        touch "$work/.mlc_lab_opened"
    fi
    use_labextension
    say "opening JupyterLab on $work (Notebook 7 at /tree)"
    exec "$VENV/bin/jupyter" lab --notebook-dir="$work" "${extra[@]}" "$@"
}

test_all() {
    setup_python
    setup_js
    bash scripts/install_browser.sh
    bash scripts/install_slurm.sh  # Debian's Slurm and munge: the batch runner's tests start a one-node cluster
    # Types, lint and the import contract first (seconds; scripts/check.sh also runs alone); the
    # tests still run when a check fails, and the run fails at the end.
    local checks=ok
    bash scripts/check.sh || checks=failed
    say "JS unit tests (vitest)"
    npm test --silent
    use_labextension
    say "Python, widget and real-browser tests (pytest)"
    "$VENV/bin/python" -m pytest "$@"
    if [ "$checks" != ok ]; then say "the static checks failed (see the start of this run)"; return 1; fi
}

case "${1:-}" in
    lab) shift; lab "$@" ;;
    test) shift; test_all "$@" ;;
    *) echo "usage: ./run.sh lab | ./run.sh test [pytest args]" >&2; exit 2 ;;
esac
