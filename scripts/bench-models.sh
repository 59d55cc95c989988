#!/usr/bin/env bash
# Makes the six synthetic benchmark models when they are missing (110M and 1.1B
# shapes, each in Q8_0, Q4_0 and Q4_K) and runs `tokenhive bench model --json`
# on each, one JSON file per model, then prints BENCHMARKS.md's table rows (a row
# per model and ISA: pass `--isa all` to get every ISA the CPU runs).
#
# Usage: scripts/bench-models.sh [OUT_DIR] [extra `bench model` flags...]
#   OUT_DIR   default out/bench/YYYYmmdd-HHMMSS
#   THREADS   threads (default 2, as in BENCHMARKS.md)
#   MODELS    a subset, e.g. MODELS="1.1b-q4_0 110m-q8_0" (default: all six)
#   LLAMA_BIN a llama.cpp build's bin/ folder: then llama-bench (pp512, tg128) and
#             llama-batched-bench (32 sequences) run on the same files right after
#             ours, into OUT_DIR/NAME.llama-bench.json and NAME.llama-batched.txt.
#             llama.cpp is built outside this repository; nothing of it is in ours.
# Example: THREADS=2 scripts/bench-models.sh out/bench/today --reps 5 --isa all --context 8,4096
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-out/bench/$(date +%Y%m%d-%H%M%S)}"
if [ $# -gt 0 ]; then shift; fi
THREADS="${THREADS:-2}"
ALL="110m-q8_0 110m-q4_0 110m-q4_k 1.1b-q8_0 1.1b-q4_0 1.1b-q4_k"
MODELS="${MODELS:-$ALL}"

[ -x build/tokenhive ] || { cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C build tokenhive; }
mkdir -p models "$OUT"

model_path() {  # shape type
  case "$1" in
    1.1b) echo "models/tinyllama-1.1b-$2.gguf" ;;
    110m) echo "models/stories-110m-$2.gguf" ;;
    *) echo "bench-models: unknown shape $1" >&2; exit 2 ;;
  esac
}

for name in $MODELS; do
  shape="${name%-*}"
  type="${name#*-}"
  path="$(model_path "$shape" "$type")"
  if [ ! -f "$path" ]; then
    echo "bench-models: making $path" >&2
    build/tokenhive mkmodel --shape "$shape" --type "$type" -o "$path.tmp"
    mv "$path.tmp" "$path"
  fi
  echo "bench-models: $name ($path), $THREADS threads" >&2
  build/tokenhive bench model -m "$path" --threads "$THREADS" --json "$@" > "$OUT/$name.json"
  if [ -n "${LLAMA_BIN:-}" ]; then
    echo "bench-models: llama.cpp on $name" >&2
    "$LLAMA_BIN/llama-bench" -m "$path" -t "$THREADS" -p 512 -n 128 -r 3 -o json > "$OUT/$name.llama-bench.json"
    "$LLAMA_BIN/llama-batched-bench" -m "$path" -t "$THREADS" -c 8192 -b 2048 -ub 512 -npp 8 -ntg 32 -npl 1,8,32 \
      > "$OUT/$name.llama-batched.txt" 2>/dev/null
  fi
done

# One markdown row per model, in BENCHMARKS.md's column order.
if command -v jq >/dev/null; then
  echo
  echo "| model | isa | prefill t/s (% ceil) | decode t/s (% ceil) | decode t/s by context | batched decode t/s by batch | GB/s | int8 GOPS | fp32 GFLOP/s |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for name in $MODELS; do
    jq -r --arg name "$name" '
      def f1: if . == null then "-" else (. * 10 | round / 10 | tostring) end;
      . as $top | .runs[] |
      "| \($name) | \(.isa) | \(.prefill_tokens_per_s | f1) (\(.prefill_pct_of_ceiling | f1)%) | \(.decode_tokens_per_s | f1) (\(.decode_pct_of_ceiling | f1)%) | " +
      ([.decode_at_context_tokens_per_s | to_entries[] | "@\(.key): \(.value | f1)"] | join(", ")) + " | " +
      ([.batched_decode_tokens_per_s | to_entries[] | "b\(.key): \(.value | f1)"] | join(", ")) +
      " | \($top.bandwidth_gb_per_s | f1) | \($top.int8_peak_gops | f1) | \($top.fp32_peak_gflops | f1) |"' "$OUT/$name.json"
    if [ -f "$OUT/$name.llama-bench.json" ]; then
      jq -r --arg name "$name" '"| \($name) | llama.cpp | " + ([.[] | "\(.n_prompt)/\(.n_gen): \(.avg_ts * 10 | round / 10)"] | join(", ")) + " |"' \
        "$OUT/$name.llama-bench.json"
    fi
  done
fi
echo "bench-models: JSON in $OUT" >&2
