#!/usr/bin/env bash
# The cluster's scale-out benchmark (BENCHMARKS.md, "Cluster"): the same
# `bench serve` workload against
#   A: one cell directly (pinned to CPU 0),
#   B: the router in front of that one cell,
#   C: the router in front of two cells (pinned to CPU 0 and CPU 1),
# printing output tokens/s and TTFT p50/p99 for each (medians over ROUNDS
# interleaved rounds): C/B is the scale-out; A and B again at concurrency 1
# give the router's added latency. Cells use one compute thread each.
#
#   [ROUNDS=3] scripts/bench_cluster.sh [MODEL] [CONCURRENCY] [PROMPTS]
# MODEL defaults to a synthetic 110M Q4_0 (written to /tmp once).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/tokenhive
model=${1:-/tmp/tokenhive-110m-q4_0.gguf}
conc=${2:-16}
prompts=${3:-96}
rounds=${ROUNDS:-3}
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

seed=0
run() {  # name url concurrency prompts; a new seed each run: no prompt hits another run's prefix cache
  seed=$((seed + 1))
  $bin bench serve --url "$2" --max-concurrency "$3" --num-prompts "$4" --random-input-len 128 \
      --random-output-len 64 --seed "$seed" --no-progress --json "$out/$1.json" >/dev/null
}
# Rounds interleave the configurations, so drift on a shared machine hits each alike;
# the table has each number's median over the rounds.
run warmup http://127.0.0.1:18211 "$conc" "$prompts"
for round in $(seq "$rounds"); do
  run "A-cell.$round" http://127.0.0.1:18201 "$conc" "$prompts"
  run "B-router-1cell.$round" http://127.0.0.1:18210 "$conc" "$prompts"
  run "C-router-2cells.$round" http://127.0.0.1:18211 "$conc" "$prompts"
  run "A1-cell-c1.$round" http://127.0.0.1:18201 1 16
  run "B1-router-c1.$round" http://127.0.0.1:18210 1 16
done
node -e '
  const [dir, rounds] = [process.argv[1], +process.argv[2]];
  const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
  const rows = {};
  for (const r of ["A-cell", "B-router-1cell", "C-router-2cells", "A1-cell-c1", "B1-router-c1"]) {
    const js = [...Array(rounds).keys()].map((i) => require(`${dir}/${r}.${i + 1}.json`));
    rows[r] = { tps: med(js.map((j) => j.output_tokens_per_s)), p50: med(js.map((j) => j.ttft_ms.p50)),
                p99: med(js.map((j) => j.ttft_ms.p99)), tpot: med(js.map((j) => j.tpot_ms.p50)),
                failed: js.reduce((a, j) => a + j.failed, 0) };
  }
  const f = (x) => x.toFixed(1).padStart(10);
  console.log("run".padEnd(18), "out tok/s".padStart(10), "TTFT p50".padStart(10), "TTFT p99".padStart(10),
              "TPOT p50".padStart(10), "failed".padStart(7));
  for (const [k, v] of Object.entries(rows)) console.log(k.padEnd(18), f(v.tps), f(v.p50), f(v.p99), f(v.tpot), String(v.failed).padStart(7));
  console.log(`scale-out C/B ${(rows["C-router-2cells"].tps / rows["B-router-1cell"].tps).toFixed(2)}x, C/A ${(rows["C-router-2cells"].tps / rows["A-cell"].tps).toFixed(2)}x;`,
              `router TTFT at concurrency 1: +${(rows["B1-router-c1"].p50 - rows["A1-cell-c1"].p50).toFixed(1)} ms p50, +${(rows["B1-router-c1"].p99 - rows["A1-cell-c1"].p99).toFixed(1)} ms p99`);
' "$out" "$rounds"
