#!/usr/bin/env bash
# The GPU check, in one run on a machine with an NVIDIA GPU and no network (the H200 image:
# Python 3.12 with numpy, Cython, scikit-build-core, CMake, ninja, nvcc 13 and torch; the wheels
# it lacks are carried in tests/gpu/wheels/). From the repository root:
#
#     bash tests/gpu/run.sh            # logs and results under $OUT (default /tmp/pymx-gpu)
#
# Steps: install the carried wheels into the image's python3, build pymx with
# PYMX_CUDA=ON (and its native tests), run the native tests (ctest: the engine on GPU streams and
# events, allocation at first use, ...), the GPU tests, then bench/gpu_bench.py and the per-operator
# profiles of bench/profile_leafnet.py, then the whole Python suite.
# Every step logs to $OUT/<step>.log; a failed step does not stop the later ones; the summary
# table at the end gives each step's status and time. The whole run keeps within
# $GPU_RUN_BUDGET_S seconds (default 470: the 8 minutes a device check may take, with the
# machine's start and the transfers around it): a step gets at most what is left, and a step with
# under 10 s left is skipped, so the table is always printed.
# GPU_RUN_STEPS="build gputests" (say) runs only those steps, for a second call after a fix; the
# build directory is build-gpu/ in the tree (git-ignored), so a machine still warm rebuilds only
# what changed, and only logs come back under $OUT.
set -u
OUT="${OUT:-/tmp/pymx-gpu}"
BUDGET="${GPU_RUN_BUDGET_S:-470}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"  # absolute: the later steps run from inside it
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
SUMMARY=()
BUILD_DIR="$ROOT/build-gpu"
STEPS="${GPU_RUN_STEPS:-}"

step() {  # step NAME TIMEOUT_S COMMAND...: runs COMMAND with its output in $OUT/NAME.log
  local name="$1" limit="$2"
  shift 2
  if [ -n "$STEPS" ] && [[ " $STEPS " != *" $name "* ]]; then
    SUMMARY+=("$(printf '%-12s not asked for (GPU_RUN_STEPS)' "$name")")
    return 0
  fi
  local left=$((BUDGET - SECONDS))
  if [ "$left" -lt 10 ]; then
    SUMMARY+=("$(printf '%-12s skipped: the run budget (%ss) is spent' "$name" "$BUDGET")")
    return 124
  fi
  [ "$limit" -gt "$left" ] && limit=$left
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

# The image's python3 (which may itself be a venv) gets the wheels; a venv made from it would not
# see its packages (scikit-build-core, torch). PEP 668 images need the override below.
PY="$(command -v python3)"
export PIP_BREAK_SYSTEM_PACKAGES=1
step wheels 120 "$PY" -m pip install --no-index --no-deps tests/gpu/wheels/*.whl
# pytest itself only when the image lacks it (wheels/fallback holds pytest and its dependencies).
"$PY" -c "import pytest" 2>/dev/null ||
  step pytest 60 "$PY" -m pip install --no-index --find-links tests/gpu/wheels/fallback pytest
# The image's default compiler (/opt/gcc) links its libstdc++ statically into libpymx.so; that
# second libstdc++, next to the system one Python has already loaded, crashes on the first
# ostream use (an error message). Build with the system g++ when there is one.
for cxx in /usr/bin/g++ /usr/bin/g++-13; do
  if [ -x "$cxx" ]; then export CXX="$cxx" CUDAHOSTCXX="$cxx" CC="${cxx/g++/gcc}"; break; fi
done
export CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" PYMX_CUDA=ON
step build 240 "$PY" -m pip install --no-build-isolation --no-deps --no-index -v \
  -Cbuild-dir="$BUILD_DIR" -Ccmake.define.PYMX_BUILD_TESTS=ON . ||
  { echo "== summary"; printf '%s\n' "${SUMMARY[@]}"; exit 1; }
step native 120 ctest --test-dir "$BUILD_DIR" --output-on-failure -j 4
# Leave the source tree so that `import pymx` finds the installed package, not ./pymx.
cd "$OUT"
# --timeout (pytest-timeout, from the wheels): one hung test fails alone instead of taking the
# step's whole budget (and its report). Without the plugin pytest would refuse the option and
# run no test at all, so it is passed only when the plugin imports.
TIMEOUT_ARGS=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_ARGS=(--timeout 90)
# Besides test_gpu_*.py, the GPU checks of files that test an operator on both devices and
# whose GPU kernels no test_gpu_*.py file reaches (the suite step at the end rarely gets the
# time): -k gpu keeps every test of test_gpu_*.py (their module names match) and the GPU ones
# (named so, or the gpu variant of the `device` fixture) of the others.
# test_np_nan_reductions.py and test_np_sets_indexing.py: the GPU sort under nanmedian,
# nanquantile, lexsort, partition and unique.
GPU_TWIN_FILES=(test_np_sort_cumsum.py test_batch_dot_transposed.py test_take_empty_axis.py
                test_np_math_extra.py test_gamma.py test_linalg_eig.py
                test_np_nan_reductions.py test_np_sets_indexing.py)
step gputests 200 "$PY" -m pytest "$ROOT"/tests/python/test_gpu_*.py \
  "${GPU_TWIN_FILES[@]/#/$ROOT/tests/python/}" -k gpu -q -p no:cacheprovider \
  "${TIMEOUT_ARGS[@]}" --rootdir "$ROOT" --junitxml "$OUT/gputests.xml" -rfE
# The bench stops starting rows 15 s before its step's limit, and prints its table even when
# the timeout's SIGTERM comes first.
bench_s=$((BUDGET - SECONDS < 180 ? BUDGET - SECONDS : 180))
step bench 180 "$PY" "$ROOT"/bench/gpu_bench.py --out "$OUT/gpu_bench.json" \
  --budget-s $((bench_s > 25 ? bench_s - 15 : 10))
# Where the time goes (pymx.profiler, per operator, GPU and worker timelines).
step profile_train 60 "$PY" "$ROOT"/bench/profile_leafnet.py --device gpu --batch 64 \
  --hybridize --trace "$OUT/profile_train.json"
step profile_infer 60 "$PY" "$ROOT"/bench/profile_leafnet.py --device gpu --batch 1 --infer \
  --hybridize --steps 50
step suite 150 "$PY" -m pytest "$ROOT"/tests/python --maxfail 10 "${TIMEOUT_ARGS[@]}" -q \
  -p no:cacheprovider --rootdir "$ROOT" \
  --ignore-glob='*/test_gpu_*'  # those ran above
echo
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
sed -n '/^measurement/,$p' "$OUT/bench.log" 2>/dev/null || true  # table, graph counts, errors
