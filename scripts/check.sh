#!/usr/bin/env bash
# The static checks, seconds in all: the TypeScript types (tsc --noEmit), ruff's lint with the rules
# of pyproject.toml's [tool.ruff] and its layout (ruff format --check), and the import contract of
# [tool.importlinter] (layers point down, only mlc_lab.tvm imports tvm, no circles). Every check runs;
# the exit status is 1 when any failed.
# `./run.sh test` runs it first; alone (`bash scripts/check.sh`) it needs the environment that sets
# up: .venv with the test extra, and node_modules.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
failed=()

check() {  # check NAME COMMAND...: the command's output is shown only when it fails
    local name=$1 out; shift
    printf '\033[1m[mlc-lab]\033[0m %s\n' "$name" >&2
    if ! out=$("$@" 2>&1); then
        printf '%s\n' "$out" >&2
        failed+=("$name")
    fi
}

check "TypeScript types (tsc --noEmit)" npx --no-install tsc --noEmit -p tsconfig.json
check "lint (ruff check)" "$VENV/bin/ruff" check --output-format concise .
check "layout (ruff format --check)" "$VENV/bin/ruff" format --check .
check "import contract (lint-imports)" "$VENV/bin/lint-imports" --no-cache
if [ ${#failed[@]} -gt 0 ]; then
    printf '\033[1m[mlc-lab]\033[0m failed: %s\n' "$(IFS=,; echo "${failed[*]}")" >&2
    exit 1
fi
