#!/usr/bin/env bash
# On a GPU machine: the CUDA backend's checks and a short benchmark, in one command.
#   1. nvidia-smi, nvcc, the binaries' libraries;
#   2. every CUDA unit test (CudaOps: each op against the reference backend on odd shapes,
#      per weight type and both product paths), batched greedy = alone on the GPU
#      (LlamaModelOn.*/cuda), stories260K's greedy ids from BOS on the GPU (Stories260KOn.*/cuda);
#   3. `generate --device cuda` from BOS; `serve --device cuda` answering 4 greedy requests
#      at once as it answers each alone; compute-sanitizer memcheck on the ops (not QUICK);
#   4. BENCH=1: `bench model --device cuda` of a synthetic Llama-3-8B-shape model (mkmodel,
#      bf16 file) as the file (bf16) and as --compute-type fp8: batch-1 decode against the
#      GPU's probed read bandwidth, and 256 sequences decoding together.
# A table last. Logs under $OUT when set (the device tool's output folder: at most 8 files
# come back, so they are few), else out/device-check/.
#
# Usage: scripts/device-check.sh
#   PREBUILT  a folder with bin/{tokenhive,unit_tests,conformance_tests} built elsewhere,
#             lib/ (their libraries), libstd/ (libstdc++, used if the system's is too old)
#             and shared/ (the files of ../shared the tests read); else this builds
#   BUILD     build folder (default build-cuda), JOBS ninja jobs (default: nproc)
#   QUICK     1: no serve or memcheck step
#   PROFILE   1: ncu's kernel times and DRAM bytes for a 2-layer decode (ncu_*.csv), of
#             PROFILE_TYPES (default "native fp8")
#   BENCH     1: the benchmark (about 2 minutes on an H200); MODEL_DIR where its 16 GB
#             model is written (default /dev/shm, else /tmp); BENCH_EAGER=1 also the bf16
#             run without CUDA graphs (TOKENHIVE_CUDA_GRAPHS=0)
set -uo pipefail
cd "$(dirname "$0")/.."

LOG="${OUT:-out/device-check}"
mkdir -p "$LOG"
ALL="$LOG/device-check.log"
: > "$ALL"
declare -a ROWS
row() { ROWS+=("$(printf '%-24s %s' "$1" "$2")"); }
say() { echo "== $*" | tee -a "$ALL"; }

say "nvidia-smi"
if nvidia-smi >> "$ALL" 2>&1; then row gpu "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else row gpu "nvidia-smi failed"; fi
NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
row nvcc "$("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*' || echo missing)"
row cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"

if [ -n "${PREBUILT:-}" ]; then
  BIN="$PREBUILT/bin"
  export LD_LIBRARY_PATH="$PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export TOKENHIVE_SHARED="$(cd "$PREBUILT/shared" && pwd)"
  if ldd "$BIN/tokenhive" | grep -q 'libcublas.*not found'; then  # the image's cuBLAS
    d="$(dirname "$(find /usr/local /opt /usr/lib -name 'libcublas.so.13' 2>/dev/null | head -1)")"
    [ -n "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
  fi
  if ! "$BIN/tokenhive" --version >> "$ALL" 2>&1; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PREBUILT/libstd"
  fi
  ldd "$BIN/tokenhive" "$BIN/unit_tests" >> "$ALL" 2>&1
  if "$BIN/tokenhive" --version >> "$ALL" 2>&1; then row binaries "prebuilt ($PREBUILT) run"
  else row binaries "prebuilt ($PREBUILT) do not run: see the log"; fi
else
  BUILD="${BUILD:-build-cuda}"
  JOBS="${JOBS:-$(nproc)}"
  BIN="$BUILD"
  say "configure + build ($BUILD, -j$JOBS)"
  start=$(date +%s)
  if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTH_CUDA=ON -DTH_WEB_UI=OFF \
       -DCMAKE_CUDA_COMPILER="$NVCC" >> "$ALL" 2>&1 &&
     ninja -C "$BUILD" -j"$JOBS" tokenhive unit_tests conformance_tests >> "$ALL" 2>&1; then
    row build "ok in $(( $(date +%s) - start )) s"
  else
    row build "FAILED after $(( $(date +%s) - start )) s (the log's tail)"
    tail -30 "$ALL"
  fi
fi

gtests() {  # name binary filter
  say "$1: $2 --gtest_filter='$3'"
  timeout 300 "$BIN/$2" --gtest_filter="$3" > "$LOG/$1.txt" 2>&1
  local rc=$?
  local p f s
  p=$(grep -c '^\[       OK \]' "$LOG/$1.txt")
  f=$(grep -c '^\[  FAILED  \].*ms)' "$LOG/$1.txt")
  s=$(grep -c '^\[  SKIPPED \].*ms)' "$LOG/$1.txt")
  row "$1" "rc=$rc passed=$p failed=$f skipped=$s"
  grep '^\[  FAILED  \].*ms)\|^\[  SKIPPED \].*ms)' "$LOG/$1.txt" | head -20 >> "$ALL"
}
if [ -x "$BIN/unit_tests" ]; then
  gtests unit unit_tests 'Cuda*:*/cuda'
  gtests conformance conformance_tests '*/cuda'
  say "generate --device cuda"
  M="${TOKENHIVE_SHARED:-../shared}/models/stories260K.gguf"
  timeout 60 "$BIN/tokenhive" generate -m "$M" -p '' -n 40 --temp 0 --device cuda >> "$ALL" 2>&1
  row generate "rc=$? $(grep -o 'generation: .*' "$ALL" | tail -1)"

  if [ "${QUICK:-0}" != 1 ]; then
  say "serve --device cuda: 4 greedy completions at once against one alone"
  "$BIN/tokenhive" serve -m "$M" --device cuda --port 18080 --kv-cache-mib 256 >> "$ALL" 2>&1 &
  spid=$!
  timeout 60 python3 - >> "$ALL" 2>&1 <<'PY'
import json, time, urllib.request, threading
base = "http://127.0.0.1:18080"
for _ in range(300):
    try:
        if urllib.request.urlopen(base + "/health", timeout=1).status == 200: break
    except Exception: time.sleep(0.1)
def complete(prompt, out, i):
    body = json.dumps({"model": "stories260K", "prompt": prompt, "max_tokens": 40, "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
    out[i] = json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["text"]
prompts = ["Once upon a time", "The cat", "Lily and Tom", "One day"]
alone = [None] * 4
for i, p in enumerate(prompts): complete(p, alone, i)
together = [None] * 4
ts = [threading.Thread(target=complete, args=(p, together, i)) for i, p in enumerate(prompts)]
for t in ts: t.start()
for t in ts: t.join()
for a, b in zip(alone, together): print(repr(a), "| together equal:", a == b)
print("SERVE_RESULT", "equal" if alone == together and all(alone) else "DIFFERENT")
PY
  row serve "$(grep -o 'SERVE_RESULT.*' "$ALL" | tail -1 || echo 'no answer')"
  kill $spid 2>/dev/null; wait $spid 2>/dev/null

  if command -v compute-sanitizer > /dev/null; then
    say "compute-sanitizer memcheck: the CUDA ops"
    timeout 60 compute-sanitizer --tool memcheck --print-limit 5 "$BIN/unit_tests" \
      --gtest_filter='CudaOps.*:-CudaOps.Matmul*' > "$LOG/memcheck.log" 2>&1
    row memcheck "rc=$? $(grep -o 'ERROR SUMMARY: [0-9]* errors' "$LOG/memcheck.log" | tail -1)"
    cat "$LOG/memcheck.log" >> "$ALL"
    rm -f "$LOG/memcheck.log"
  fi
  fi  # QUICK
fi

if [ "${BENCH:-0}" = 1 ] && [ -x "$BIN/tokenhive" ]; then
  MODEL_DIR="${MODEL_DIR:-$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp)}"
  MODEL="$MODEL_DIR/llama3-8b-shape-bf16.gguf"
  say "mkmodel: Llama-3-8B shape, bf16 -> $MODEL"
  start=$(date +%s)
  timeout 240 "$BIN/tokenhive" mkmodel --arch llama3 --shape custom --dim 4096 --layers 32 --heads 32 --kv-heads 8 \
    --ffn 14336 --type bf16 --vocab "$TOKENHIVE_SHARED/testdata/tokenizer/llamacpp/ggml-vocab-deepseek-llm.gguf" \
    -o "$MODEL" >> "$ALL" 2>&1
  row mkmodel "rc=$? in $(( $(date +%s) - start )) s"
  runs="native fp8"
  [ "${BENCH_EAGER:-0}" = 1 ] && runs="$runs native-eager"
  for run in $runs; do
    ct="${run%-eager}"
    graphs=1; [ "$run" != "$ct" ] && graphs=0
    say "bench model --device cuda --compute-type $ct (TOKENHIVE_CUDA_GRAPHS=$graphs)"
    start=$(date +%s)
    TOKENHIVE_CUDA_GRAPHS=$graphs timeout 300 "$BIN/tokenhive" bench model -m "$MODEL" --device cuda --compute-type "$ct" --accuracy-tokens 0 \
      --prompt 128 --gen 64 --context 128 --batch 1,256 --batch-gen 128 --reps 3 --probe-mib 4096 --json \
      > "$LOG/bench_$run.json" 2>> "$ALL"
    rc=$?
    if [ $rc = 0 ]; then
      row "bench $run" "$(python3 -c "
import json,sys; j=json.load(open('$LOG/bench_$run.json')); r=j['runs'][0]
print('%.0f s; probe %.0f GB/s; decode %.1f tok/s = %.1f%% of ceiling; prefill %.0f tok/s; 256 seqs %.0f tok/s' % (
  $(date +%s)-$start, j['bandwidth_gb_per_s'], r['decode_tokens_per_s'], r['decode_pct_of_ceiling'],
  r['prefill_tokens_per_s'], r['batched_decode_tokens_per_s'].get('256', 0)))" 2>&1)"
    else
      row "bench $run" "rc=$rc after $(( $(date +%s) - start )) s (the log's tail)"
    fi
  done
  rm -f "$MODEL"
fi

if [ "${PROFILE:-0}" = 1 ] && [ -x "$BIN/tokenhive" ] && command -v ncu > /dev/null; then
  SMALL="${MODEL_DIR:-/dev/shm}/llama3-8b-shape-2-layers.gguf"
  say "ncu: kernels of a 2-layer Llama-3-8B-shape decode (no graphs)"
  "$BIN/tokenhive" mkmodel --arch llama3 --shape custom --dim 4096 --layers 2 --heads 32 --kv-heads 8 \
    --ffn 14336 --type bf16 --vocab "$TOKENHIVE_SHARED/testdata/tokenizer/llamacpp/ggml-vocab-deepseek-llm.gguf" \
    -o "$SMALL" >> "$ALL" 2>&1
  for ct in ${PROFILE_TYPES:-native fp8}; do
    TOKENHIVE_CUDA_GRAPHS=0 timeout 150 ncu --clock-control none --csv --launch-skip 45 --launch-count 70 \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum \
      "$BIN/tokenhive" generate -m "$SMALL" -p '' -n 8 --temp 0 --device cuda --compute-type $ct \
      > "$LOG/ncu_$ct.csv" 2>> "$ALL"
    row "ncu $ct" "rc=$? $(grep -c gpu__time_duration "$LOG/ncu_$ct.csv") kernels"
  done
  rm -f "$SMALL"
fi

echo
{ echo "== summary (logs in $LOG)"; for r in "${ROWS[@]}"; do echo "$r"; done; } | tee -a "$ALL"
exit 0
