#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/*_fuzz.cpp) with clang, ASan and
# UBSan, then runs them all at once, each for SECONDS (default 60). Exits
# non-zero when any target crashes, leaks, hangs, allocates hugely or fails
# to build.
#
#   scripts/fuzz.sh [SECONDS]
#
# Wall time is about SECONDS plus the build (the targets run side by side).
# Corpora persist in build-fuzz/corpus/<target>, so each run starts where
# the last one stopped; tests/fuzz/make_<stem>_corpus.cpp, where there is
# one, writes seeds for <stem>_fuzz into it first. Inputs that fail land in
# build-fuzz/artifacts/<target>/; replay one with
#   build-fuzz/<target> build-fuzz/artifacts/<target>/crash-...
# Environment: TH_FUZZ_BUILD (build dir), TH_FUZZ_JOBS (ninja -j, default 2).
set -euo pipefail

seconds=${1:-60}
if ! [[ $seconds =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
  echo "usage: $0 [SECONDS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TH_FUZZ_BUILD:-$root/build-fuzz}

targets=()
makers=()
for src in "$root"/tests/fuzz/*_fuzz.cpp; do
  [[ -e $src ]] || continue
  t=$(basename "$src" .cpp)
  targets+=("$t")
  [[ -e $root/tests/fuzz/make_${t%_fuzz}_corpus.cpp ]] && makers+=("make_${t%_fuzz}_corpus")
done
if (( ${#targets[@]} == 0 )); then
  echo "fuzz.sh: no tests/fuzz/*_fuzz.cpp" >&2
  exit 1
fi

mkdir -p "$build"
echo "fuzz.sh: building ${targets[*]} in $build"
# -O1 -gline-tables-only: how OSS-Fuzz builds its targets (a third faster to compile than -O2 -g).
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DTH_FUZZ=ON -DTH_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" >"$build/cmake.log" 2>&1 \
  || { cat "$build/cmake.log" >&2; exit 1; }
ninja -C "$build" -j"${TH_FUZZ_JOBS:-2}" "${targets[@]}" "${makers[@]}"

mkdir -p "$build/logs"
pids=()
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t
  mkdir -p "$corpus" "$build/artifacts/$t"
  maker=$build/make_${t%_fuzz}_corpus
  [[ -x $maker ]] && "$maker" "$corpus"
  # Big enough for the largest seed, so that none is cut short.
  max_len=$(find "$corpus" -type f -printf '%s\n' | sort -n | tail -1)
  max_len=$(( ${max_len:-0} > 4096 ? ${max_len:-0} : 4096 ))
  # -malloc_limit_mb: no input of a few MB has any business asking for more;
  # over it is a reader that trusts a count from the file.
  "$build/$t" "$corpus" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" >"$build/logs/$t.log" 2>&1 &
  pids+=($!)
done

failed=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  log=$build/logs/$t.log
  if wait "${pids[$i]}"; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    echo "fuzz.sh: $t ok: ${runs:-?} runs, ${rate:-?} exec/s (log: $log)"
  else
    failed=1
    echo "fuzz.sh: $t FAILED (log: $log, inputs: $build/artifacts/$t/)" >&2
    grep -v '^#' "$log" | tail -40 >&2
  fi
done
exit $failed
