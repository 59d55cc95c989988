#!/usr/bin/env bash
# The whole test suite: a release build and an ASan+UBSan build, each running
# every unit, conformance and integration test, then each libFuzzer target for
# a bounded time. Usage: scripts/test.sh [fuzz-seconds-per-target, default 20: ten
# targets, and CI has 40 minutes on 2 cores for everything]
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS="${1:-20}"
JOBS="$(nproc)"

scripts/setup.sh >/dev/null

total_pass=0
total_fail=0
run_ctest() {  # dir label
  rm -f "$1/Testing/Temporary/LastTestsFailed.log"  # ctest leaves an old one when all pass
  set +e
  (cd "$1" && ctest --output-on-failure -j "$JOBS" --timeout 600)
  local rc=$?
  set -e
  # Each ctest test is a gtest shard (see TH_TEST_SHARDS); count gtest's own verdicts,
  # which ctest keeps in LastTest.log. A shard that crashed has no verdict: it counts
  # as one failure at least.
  local log="$1/Testing/Temporary/LastTest.log" n failed skipped shards_failed
  n="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | awk '{s+=$1} END{print s+0}')"
  failed="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | awk '{s+=$1} END{print s+0}')"
  skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | awk '{s+=$1} END{print s+0}')"
  if [ "$rc" -ne 0 ]; then
    shards_failed="$(wc -l < "$1/Testing/Temporary/LastTestsFailed.log" 2>/dev/null || echo 1)"
    if [ "$failed" -lt "$shards_failed" ]; then failed="$shards_failed"; fi
  fi
  total_pass=$((total_pass + n))
  total_fail=$((total_fail + failed))
  echo "test.sh: $2: $n gtest tests passed, $failed failed, $skipped skipped (no GPU, an ISA this CPU lacks, or release-stage only)"
  if [ "$rc" -ne 0 ]; then echo "test.sh: $2 tests failed"; fi
  return 0
}

echo "== layout (include rules, file and function sizes)"
if python3 scripts/check_layout.py; then
  total_pass=$((total_pass + 1))
else
  total_fail=$((total_fail + 1)); echo "test.sh: the layout check failed"
fi

echo "== release build"
ninja -C build
run_ctest build release

echo "== ASan + UBSan build"
# The library at -Og, not -O1: with every sanitizer check kept, json-heavy files compile in
# 58% of -O1's time (server/embeddings_api.cpp 29.3 -> 16.9 s, cli/bench_model.cpp 48.5 ->
# 25.9 s with g++ 12; -O1 made this build 1,529 s of a 3,288 s test.sh on 2 cores).
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTH_SANITIZE=ON \
  -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" >/dev/null
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run_ctest build-asan sanitizer

echo "== fuzz (${FUZZ_SECONDS}s per target)"
fuzz_rc=0
scripts/fuzz.sh "$FUZZ_SECONDS" || fuzz_rc=$?
if [ "$fuzz_rc" -ne 0 ]; then total_fail=$((total_fail + 1)); echo "test.sh: fuzzing found a failure"; fi

echo
# CI shows the end of this output: name each failed test again here, with its failure lines.
for d in build build-asan; do
  [ -s "$d/Testing/Temporary/LastTestsFailed.log" ] || continue
  echo "$d: failed ctest shards: $(tr '\n' ' ' < "$d/Testing/Temporary/LastTestsFailed.log")"
  awk -v d="$d" '/: Failure$/ {n = 4} /^\[  FAILED  \] [A-Za-z]/ && !/listed below/ {n = 1}
    /==[0-9]+==ERROR|^SUMMARY: |\*\*\*Timeout/ {n = 2} n > 0 {print d ": " $0; n--}' \
    "$d/Testing/Temporary/LastTest.log" | head -60
done
echo "tests: ${total_pass} passed, ${total_fail} failed"
[ "$total_fail" -eq 0 ]
