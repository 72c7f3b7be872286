#!/usr/bin/env bash
# Fetches, on a machine with PyPI in reach, the wheels that tests/gpu/run.sh installs on the GPU
# machine (which has no network): what the H200 image (Python 3.12, manylinux x86_64) lacks.
# They are kept out of git (.gitignore); carry tests/gpu/wheels with the device call.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf wheels   # pip download keeps older versions, which would then be installed side by side
mkdir -p wheels/fallback
fetch() {
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 "$@"
}
fetch --no-deps -d wheels scipy-openblas32 cython-cmake pytest-timeout tqdm pillow mpi4py mpich
fetch -d wheels matplotlib
rm -f wheels/numpy-*.whl wheels/packaging-*.whl   # the image's numpy and packaging stay
fetch -d wheels/fallback pytest                   # installed only when the image lacks pytest
rm -f wheels/fallback/numpy-*.whl
ls wheels wheels/fallback
