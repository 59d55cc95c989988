#!/usr/bin/env bash
# The router's concurrent streams (BENCHMARKS.md, "Router: concurrent streams"):
# one cell on a synthetic model with a 512-token vocabulary, one router in
# front of it, and scripts/stream_load.py opening N streams at once (N = 100,
# 1,000, 5,000 by default), first straight to the cell, then through the
# router, whose resident memory it samples. Loopback only; about a minute.
#
#   scripts/bench_router_streams.sh [N...]
#
# Environment: TH_BIN (default build/tokenhive), MAX_TOKENS (32).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TH_BIN:-$root/build/tokenhive}
counts=("$@")
(( ${#counts[@]} )) || counts=(100 1000 5000)
max_tokens=${MAX_TOKENS:-32}
ulimit -n 20000  # 5,000 streams are 5,000 sockets in the client, 10,000 in the router, 5,000 in the cell
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
model=$work/synth.gguf
"$bin" mkmodel --shape custom --dim 64 --layers 2 --heads 4 --kv-heads 4 --ffn 172 --type f32 \
  --vocab "$root/../shared/models/stories260K.gguf" -o "$model" >/dev/null
cell_port=18471 router_port=18472
"$bin" serve -m "$model" --port $cell_port -t 1 --max-num-seqs 5000 --max-pending 10000 --max-num-batched-tokens 16384 \
  --kv-cache-mib 1024 --access-log "" >"$work/cell.log" 2>&1 &
# A cell decoding 5,000 streams on a loaded 2-core machine can miss the default 150 ms
# heartbeat timeout (and be declared dead at 300 ms; at 5,000 streams here even a 2 s one):
# this measures the proxy, not the detector.
"$bin" router --cell http://127.0.0.1:$cell_port --port $router_port --heartbeat-timeout-ms 15000 --dead-after-ms 60000 >"$work/router.log" 2>&1 &
router_pid=$!
for url in http://127.0.0.1:$cell_port/ready http://127.0.0.1:$router_port/ready; do
  for _ in $(seq 300); do curl -sf "$url" >/dev/null && break; sleep 0.1; done
done
for n in "${counts[@]}"; do
  python3 "$root/scripts/stream_load.py" --url http://127.0.0.1:$cell_port --streams "$n" --max-tokens "$max_tokens" || true
  python3 "$root/scripts/stream_load.py" --url http://127.0.0.1:$router_port --streams "$n" --max-tokens "$max_tokens" \
    --pid $router_pid || true
done
echo "router threads at the end: $(ls /proc/$router_pid/task | wc -l)"
