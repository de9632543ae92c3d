#!/usr/bin/env bash
# On the device machine, from the repo root, with the folder prepare.py filled carried as
# .work/gpu_check:  bash .work/gpu_check/run_on_gpu.sh [--only NAME ...]
# Results: $OUT/gpu_results.json, $OUT/gpu_table.txt, and the table on stdout. See run_on_gpu.py.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || exit 2
py=${GPU_CHECK_PYTHON:-python3}
if ! command -v "$py" >/dev/null; then
    echo "run_on_gpu.sh: $py is not on the PATH (set GPU_CHECK_PYTHON)" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1
exec "$py" "$here/run_on_gpu.py" --dir "$here" --python "$(command -v "$py")" "$@"
