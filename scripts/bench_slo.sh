#!/usr/bin/env bash
# SLO scheduling against the static scheduler (BENCHMARKS.md, "SLO scheduling"): one server
# with the static limits, one with --tpot-slo-ms/--ttft-slo-ms, both up at once (an idle server
# costs nothing), and the same Poisson `bench serve` workload against each in turn, ROUNDS
# interleaved rounds (a new seed each round, the same for both servers in a round). Prints each
# run's TPOT p99, TTFT p99 and goodput (requests meeting both targets per second), then the
# medians.
#
#   [ROUNDS=3] [EXTRA="--batch-window-ms 30"] scripts/bench_slo.sh MODEL RATE PROMPTS TPOT_MS TTFT_MS [IN] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/tokenhive
model=$1 rate=$2 prompts=$3 tpot=$4 ttft=$5 in=${6:-256} out_len=${7:-32}
rounds=${ROUNDS:-3}
out=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
wait_ready() { for _ in $(seq 600); do curl -sf "$1/ready" >/dev/null && return 0; sleep 0.2; done; echo "not ready: $1" >&2; exit 1; }

common=(-m "$model" --kv-cache-mib 1024 --max-num-seqs 64 --access-log '')
$bin serve "${common[@]}" --port 18351 2>"$out/static.log" & pids+=($!)
wait_ready http://127.0.0.1:18351
$bin serve "${common[@]}" --port 18352 --tpot-slo-ms "$tpot" --ttft-slo-ms "$ttft" ${EXTRA:-} 2>"$out/slo.log" & pids+=($!)
wait_ready http://127.0.0.1:18352

run() {  # name port seed
  $bin bench serve --url "http://127.0.0.1:$2" --request-rate "$rate" --num-prompts "$prompts" \
      --random-input-len "$in" --random-output-len "$out_len" --seed "$3" --tpot-slo-ms "$tpot" \
      --ttft-slo-ms "$ttft" --no-progress --json "$out/$1.json" >/dev/null
  python3 - "$out/$1.json" "$1" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:10s} completed {j['completed']:4d}  TPOT p50/p99 {j['tpot_ms']['p50']:7.1f} {j['tpot_ms']['p99']:7.1f} ms"
      f"  TTFT p50/p99 {j['ttft_ms']['p50']:7.0f} {j['ttft_ms']['p99']:7.0f} ms  goodput {j['goodput_per_s']:.3f}/s"
      f"  good {j['good_requests']}  {j['output_tokens_per_s']:.1f} tok/s")
EOF
}
for r in $(seq "$rounds"); do
  run "static-$r" 18351 "$r"
  run "slo-$r" 18352 "$r"
done
python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for name in ("static", "slo"):
    js = [json.load(open(f"{out}/{name}-{r}.json")) for r in range(1, rounds + 1)]
    med = lambda f: statistics.median(f(j) for j in js)
    print(f"median {name:6s}: TPOT p99 {med(lambda j: j['tpot_ms']['p99']):.1f} ms, TTFT p99 "
          f"{med(lambda j: j['ttft_ms']['p99']):.0f} ms, goodput {med(lambda j: j['goodput_per_s']):.3f}/s, "
          f"output {med(lambda j: j['output_tokens_per_s']):.1f} tok/s")
EOF
grep -h "max sequences\|KV cache" "$out"/*.log | head -2 || true
curl -s http://127.0.0.1:18352/metrics | grep -E "^tokenhive_(step_cost|slo_|batch_window)" || true
