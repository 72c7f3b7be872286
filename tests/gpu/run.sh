#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU and no network (the H200 image:
# Python 3.12 with numpy, Cython, scikit-build-core, CMake, ninja, nvcc 13 and torch; the wheels
# it lacks are carried in tests/gpu/wheels/). From the repository root:
#
#     bash tests/gpu/run.sh            # logs and results under $OUT (default /tmp/pymx-gpu)
#
# Steps: install the carried wheels into a venv that sees the system packages, build pymx with
# PYMX_CUDA=ON, run the GPU tests, then the whole Python suite (-x), then bench/gpu_bench.py.
# Every step logs to $OUT/<step>.log; a failed step does not stop the later ones; the summary
# table at the end gives each step's status and time. Budget: well under 8 minutes.
set -u
OUT="${OUT:-/tmp/pymx-gpu}"
mkdir -p "$OUT"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
VENV="${PYMX_GPU_VENV:-/tmp/pymx-gpu-venv}"
SUMMARY=()

step() {  # step NAME TIMEOUT_S COMMAND...: runs COMMAND with its output in $OUT/NAME.log
  local name="$1" limit="$2"
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-12s rc=%-4s %4ss' "$name" "$rc" "$((SECONDS - start))")")
  echo "== $name: rc=$rc ($((SECONDS - start)) s); last lines of $OUT/$name.log:"
  tail -n 25 "$OUT/$name.log"
  return $rc
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -2
  python3 --version; } >"$OUT/machine.log" 2>&1
cat "$OUT/machine.log"

python3 -m venv --system-site-packages "$VENV"
PY="$VENV/bin/python"
step wheels 120 "$PY" -m pip install --no-index --no-deps tests/gpu/wheels/*.whl
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" PYMX_CUDA=ON
step build 300 "$PY" -m pip install --no-build-isolation --no-deps --no-index -v . ||
  { printf '%s\n' "${SUMMARY[@]}"; exit 1; }
# Leave the source tree so that `import pymx` finds the installed package, not ./pymx.
cd "$OUT"
step gputests 240 "$PY" -m pytest "$ROOT"/tests/python/test_gpu_*.py -q -p no:cacheprovider \
  --rootdir "$ROOT" --junitxml "$OUT/gputests.xml"
step suite 300 "$PY" -m pytest "$ROOT"/tests/python -x -q -p no:cacheprovider --rootdir "$ROOT"
step bench 200 "$PY" "$ROOT"/bench/gpu_bench.py --out "$OUT/gpu_bench.json"
echo
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
grep -A 12 '^measurement' "$OUT/bench.log" || true
