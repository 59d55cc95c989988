#!/usr/bin/env bash
# The cluster's scale-out benchmark (BENCHMARKS.md, "Cluster"): the same
# `bench serve` workload against
#   A: one cell directly (pinned to CPU 0),
#   B: the router in front of that one cell,
#   C: the router in front of two cells (pinned to CPU 0 and CPU 1),
# printing output tokens/s and TTFT p50/p99 for each: C/B is the scale-out,
# B-A the router's added latency. Cells use one compute thread each.
#
#   scripts/bench_cluster.sh [MODEL] [CONCURRENCY] [PROMPTS]
# MODEL defaults to a synthetic 110M Q4_0 (written to /tmp once).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/tokenhive
model=${1:-/tmp/tokenhive-110m-q4_0.gguf}
conc=${2:-16}
prompts=${3:-96}
[ -f "$model" ] || $bin mkmodel --shape 110m --type q4_0 -o "$model" >/dev/null
out=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_ready() { for _ in $(seq 300); do curl -sf "$1/ready" >/dev/null && return 0; sleep 0.1; done; echo "not ready: $1" >&2; exit 1; }
taskset -c 0 $bin serve -m "$model" -t 1 --port 18201 --access-log '' 2>"$out/cell0.log" & pids+=($!)
taskset -c 1 $bin serve -m "$model" -t 1 --port 18202 --access-log '' 2>"$out/cell1.log" & pids+=($!)
wait_ready http://127.0.0.1:18201
wait_ready http://127.0.0.1:18202
$bin router --port 18210 --cell http://127.0.0.1:18201 --policy load 2>"$out/router1.log" & pids+=($!)
$bin router --port 18211 --cell http://127.0.0.1:18201 --cell http://127.0.0.1:18202 --policy load 2>"$out/router2.log" & pids+=($!)
wait_ready http://127.0.0.1:18210
wait_ready http://127.0.0.1:18211

run() {  # name url
  $bin bench serve --url "$2" --max-concurrency "$conc" --num-prompts "$prompts" --random-input-len 128 \
      --random-output-len 64 --seed 1 --no-progress --json "$out/$1.json" >/dev/null
}
run warmup http://127.0.0.1:18211
run A-cell http://127.0.0.1:18201
run B-router-1cell http://127.0.0.1:18210
run C-router-2cells http://127.0.0.1:18211
printf '%-18s %10s %10s %10s %10s %8s\n' run 'out tok/s' 'TTFT p50' 'TTFT p99' 'TPOT p50' failed
for r in A-cell B-router-1cell C-router-2cells; do
  node -e '
    const j = require(process.argv[1]); const o = j.overall || j;
    const f = (x) => x.toFixed(1);
    console.log(process.argv[2].padEnd(18), f(o.output_tokens_per_s).padStart(10), f(o.ttft_ms.p50).padStart(10),
                f(o.ttft_ms.p99).padStart(10), f(o.tpot_ms.p50).padStart(10), String(o.failed).padStart(8));
  ' "$out/$r.json" "$r"
done
