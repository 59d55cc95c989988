#!/usr/bin/env bash
# On a GPU machine: build tokenhive with the CUDA backend, print the GPU, run the
# CUDA unit tests (the CUDA backend op by op against the reference backend) and
# print a short table last. Logs go under $OUT when it is set (the device tool's
# output folder), else out/device-check/.
#
# Usage: scripts/device-check.sh            (one command; ~5 min on 16 cores)
#   BUILD   build folder (default build-cuda)
#   JOBS    ninja jobs (default: nproc)
#   FILTER  gtest filter (default 'Cuda*')
#
# Needs what the project always needs (CMake >= 3.25, ninja, libpcre2-dev, libssl-dev,
# nlohmann-json3-dev, libxxhash-dev, libgtest-dev) plus nvcc and cuBLAS. The
# dependency check below says which are missing before anything is built.
set -uo pipefail
cd "$(dirname "$0")/.."

LOG="${OUT:-out/device-check}"
mkdir -p "$LOG"
BUILD="${BUILD:-build-cuda}"
JOBS="${JOBS:-$(nproc)}"
FILTER="${FILTER:-Cuda*}"
declare -a ROWS

row() { ROWS+=("$(printf '%-22s %s' "$1" "$2")"); }

echo "== nvidia-smi"
if nvidia-smi 2>&1 | tee "$LOG/nvidia-smi.txt"; then row gpu "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else row gpu "nvidia-smi failed"; fi
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
"$NVCC" --version > "$LOG/nvcc.txt" 2>&1 && row nvcc "$(grep -o 'release [0-9.]*' "$LOG/nvcc.txt")" || row nvcc missing

echo "== dependencies"
missing=""
for pc in libpcre2-8 libxxhash; do pkg-config --exists "$pc" 2>/dev/null || missing="$missing $pc"; done
for h in nlohmann/json.hpp gtest/gtest.h openssl/evp.h; do
  echo "#include <$h>" | c++ -std=c++20 -fsyntax-only -x c++ - 2>/dev/null || missing="$missing $h"
done
row dependencies "${missing:-all found}"
echo "missing:${missing:- none}"

echo "== configure + build ($BUILD, -j$JOBS)"
start=$(date +%s)
if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTH_CUDA=ON \
     -DCMAKE_CUDA_COMPILER="$NVCC" > "$LOG/configure.txt" 2>&1 &&
   ninja -C "$BUILD" -j"$JOBS" unit_tests > "$LOG/build.txt" 2>&1; then
  row build "ok in $(( $(date +%s) - start )) s"
  built=1
else
  row build "FAILED after $(( $(date +%s) - start )) s (tail of the log below)"
  tail -30 "$LOG/configure.txt" "$LOG/build.txt" 2>/dev/null
  built=0
fi

if [ "$built" = 1 ]; then
  echo "== unit_tests --gtest_filter='$FILTER'"
  "$BUILD/unit_tests" --gtest_filter="$FILTER" --gtest_output="json:$LOG/cuda_tests.json" 2>&1 | tee "$LOG/cuda_tests.txt"
  rc=${PIPESTATUS[0]}
  passed=$(grep -c '^\[       OK \]' "$LOG/cuda_tests.txt")
  failed=$(grep -c '^\[  FAILED  \].*ms)' "$LOG/cuda_tests.txt")
  skipped=$(grep -c '^\[  SKIPPED \].*ms)' "$LOG/cuda_tests.txt")
  row "cuda tests" "rc=$rc passed=$passed failed=$failed skipped=$skipped"
  grep '^\[  FAILED  \].*ms)' "$LOG/cuda_tests.txt" | sed 's/^/  /' | head -20 | while read -r l; do echo "$l"; done > "$LOG/failed.txt"
fi

echo
echo "== summary (logs in $LOG)"
for r in "${ROWS[@]}"; do echo "$r"; done
[ -s "$LOG/failed.txt" ] && cat "$LOG/failed.txt"
exit 0
