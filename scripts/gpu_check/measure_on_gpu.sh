#!/usr/bin/env bash
# On the device machine, from the repo root, with the folder `elsewhere.py prepare` filled carried as
# .work/gpu_check:  bash .work/gpu_check/elsewhere/measure_on_gpu.sh
# Every stashed folder (the GPU lab's kernels, a tuning round) is measured by mlc_lab's measuring side
# with TVM's runtime alone; the results are $OUT/elsewhere_results.json. See elsewhere.py.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd) || exit 2
py=${GPU_CHECK_PYTHON:-python3}
if ! command -v "$py" >/dev/null; then
    echo "measure_on_gpu.sh: $py is not on the PATH (set GPU_CHECK_PYTHON)" >&2
    exit 2
fi
if ! nvidia-smi -L; then
    echo "measure_on_gpu.sh: no NVIDIA GPU here (nvidia-smi -L failed)" >&2
    exit 2
fi
site=$(mktemp -d) || exit 2
if ! tar -xJf "$here/runtime.tar.xz" -C "$site"; then
    echo "measure_on_gpu.sh: $here/runtime.tar.xz does not unpack" >&2
    exit 2
fi
export PYTHONUNBUFFERED=1
exec "$py" "$here/elsewhere.py" device --dir "$here" --site "$site/site" "$@"
