#!/usr/bin/env bash
# The static checks, seconds in all: the TypeScript types (tsc --noEmit), ruff's lint with the rules
# of pyproject.toml's [tool.ruff] (F821, an undefined name, among them) and its layout (ruff format
# --check), the Python types (mypy with [tool.mypy]: mlc_lab/model strictly, mlc_lab/widgets with
# every def typed, mlc_lab/core), js/lib/model.ts as mlc_lab.model generates it (model_ts --check), and the import
# contract of [tool.importlinter] (layers point down, only mlc_lab.tvm imports tvm, no circles).
# Every check runs; the exit status is 1 when any failed.
#   bash scripts/check.sh              every check
#   bash scripts/check.sh lint types   only the checks named (tsc, lint, format, types, model-ts, imports)
# `./run.sh test` runs it first; alone it needs the environment that sets up: .venv with the test
# extra, and node_modules.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
failed=()

wanted=("$@")
known=(tsc lint format types model-ts imports)
for w in "${wanted[@]}"; do
    if [[ " ${known[*]} " != *" $w "* ]]; then
        printf 'check.sh: no check called %q; the checks are: %s\n' "$w" "${known[*]}" >&2
        exit 2
    fi
done

check() {  # check KEY NAME COMMAND...: the command's output is shown only when it fails
    local key=$1 name=$2 out; shift 2
    if [ ${#wanted[@]} -gt 0 ] && [[ " ${wanted[*]} " != *" $key "* ]]; then
        return
    fi
    printf '\033[1m[mlc-lab]\033[0m %s\n' "$name" >&2
    if ! out=$("$@" 2>&1); then
        printf '%s\n' "$out" >&2
        failed+=("$name")
    fi
}

check tsc "TypeScript types (tsc --noEmit)" npx --no-install tsc --noEmit -p tsconfig.json
check lint "lint (ruff check)" "$VENV/bin/ruff" check --output-format concise .
check format "layout (ruff format --check)" "$VENV/bin/ruff" format --check .
check types "Python types (mypy)" "$VENV/bin/mypy"
check model-ts "js/lib/model.ts is generated (model_ts --check)" "$VENV/bin/python" -m mlc_lab.core.model_ts --check
check imports "import contract (lint-imports)" "$VENV/bin/lint-imports" --no-cache
if [ ${#failed[@]} -gt 0 ]; then
    printf '\033[1m[mlc-lab]\033[0m failed: %s\n' "$(IFS=,; echo "${failed[*]}")" >&2
    exit 1
fi
