#!/usr/bin/env bash
# Two tokenhive binaries' one-token decode, alternated on the same files, so that a change is
# measured against the minute-to-minute drift of a shared machine's memory (BENCHMARKS
# "Session 25"). Each round runs `bench model` with each binary in turn (the order swapped
# every round), optionally llama.cpp's llama-bench after them, and keeps every run's JSON.
# At the end: per type, the paired tokens/s ratio B/A (median and range), and each binary's
# share of the bandwidth probed before each rep (median of the runs; with SPLIT_GBPS, the
# median over single reps, each sorted by its own probe below or above SPLIT_GBPS: some VMs'
# memory has two levels and switches between them within a run, BENCHMARKS "Session 26").
#
# Usage: scripts/decode-ab.sh BIN_A BIN_B ROUNDS TYPE... (a TYPE names MODELS/tinyllama-1.1b-TYPE.gguf)
#   MODELS      folder of the models (default models; make them with
#               `tokenhive mkmodel --shape 1.1b --type TYPE -o MODELS/tinyllama-1.1b-TYPE.gguf`)
#   OUT         where the JSON goes (default out/decode-ab/YYYYmmdd-HHMMSS)
#   SPLIT_GBPS  a probe level to sort the reps by (e.g. 50)
#   ENV_A, ENV_B  NAME=VALUE words set for A's (B's) runs only: one binary against itself
#               with a knob turned, e.g. ENV_B=TOKENHIVE_PREFETCH_NEXT=0
#   LLAMA_BIN   a llama.cpp build's bin/ folder: llama-bench -t 2 -p 0 -n 32 -r 3 after each pair
#   BATCHES     batched decodes too, e.g. 2,4,8 (each rep against its own probe as well; 16 steps)
# Example: SPLIT_GBPS=50 scripts/decode-ab.sh /tmp/old/tokenhive build/tokenhive 5 q2_k iq4_nl
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,20p' "$0"; exit 2; }
A="$1" B="$2" ROUNDS="$3"
shift 3
MODELS="${MODELS:-models}"
OUT="${OUT:-out/decode-ab/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
for bin in "$A" "$B"; do [ -x "$bin" ] || { echo "decode-ab: $bin is not an executable" >&2; exit 2; }; done
for t in "$@"; do
  [ -f "$MODELS/tinyllama-1.1b-$t.gguf" ] || { echo "decode-ab: no $MODELS/tinyllama-1.1b-$t.gguf" >&2; exit 2; }
done

for r in $(seq 1 "$ROUNDS"); do
  for t in "$@"; do
    if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
    for side in $order; do
      bin="$A" vars="${ENV_A:-}"
      [ "$side" = B ] && bin="$B" vars="${ENV_B:-}"
      # shellcheck disable=SC2086  # vars: NAME=VALUE words
      env $vars "$bin" bench model -m "$MODELS/tinyllama-1.1b-$t.gguf" --threads 2 --batch "1${BATCHES:+,$BATCHES}" --batch-gen 16 --prompt 8 --ubatch 8 \
        --gen 32 --reps 5 --probe-mib 512 --probe-each-rep --json > "$OUT/$t.$r.$side.json" 2> "$OUT/$t.$r.$side.log"
    done
    if [ -n "${LLAMA_BIN:-}" ]; then
      "$LLAMA_BIN/llama-bench" -m "$MODELS/tinyllama-1.1b-$t.gguf" -t 2 -p 0 -n 32 -r 3 -o json \
        > "$OUT/$t.$r.llama.json" 2> /dev/null
    fi
    echo "decode-ab: round $r $t done" >&2
  done
done

python3 - "$OUT" "$ROUNDS" "${SPLIT_GBPS:-0}" "${BATCHES:-}" "$@" <<'PY'
import json, statistics as st, sys
out, rounds, split, batches, types = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5:]
def run(t, r, side, b="1"):  # tokens/s, the run's median %, and each rep's (probe GB/s, %)
    x = json.load(open(f"{out}/{t}.{r}.{side}.json"))["runs"][0]
    if b != "1":
        reps = list(zip(x["batched_rep_probe_gb_per_s"][b], x["batched_rep_pct_of_ceiling"][b]))
        return (x["batched_decode_tokens_per_s"][b], st.median(p for _, p in reps), reps)
    return (x["decode_tokens_per_s"], x["decode_pct_of_rep_ceilings"],
            list(zip(x["decode_rep_probe_gb_per_s"], x["decode_rep_pct_of_ceiling"])))
def pcts(runs, keep):  # no split: each run's median; split: every rep at its own probe's level
    return [x[1] for x in runs] if split <= 0 else [pct for x in runs for probe, pct in x[2] if keep(probe)]
def fmt(v): return f"{st.median(v):.1f} ({len(v)} {'runs' if split <= 0 else 'reps'})" if v else "-"
levels = [("", lambda p: True)] if split <= 0 else [(f" <{split:g} GB/s", lambda p: p < split), (f" >={split:g} GB/s", lambda p: p >= split)]
head = "| type (batch) | B/A tokens/s, paired: median (range) |" + "".join(f" A %{n} | B %{n} |" for n, _ in levels) + " llama.cpp tokens/s |"
print(head); print("|" + " --- |" * (head.count("|") - 1))
for t, bt in [(t, bt) for t in types for bt in ["1"] + [x for x in batches.split(",") if x]]:
    a = [run(t, r, "A", bt) for r in range(1, rounds + 1)]
    b = [run(t, r, "B", bt) for r in range(1, rounds + 1)]
    ratios = [y[0] / x[0] for x, y in zip(a, b)]
    row = f"| {t} ({bt}) | {st.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |"
    for _, keep in levels:
        row += f" {fmt(pcts(a, keep))} | {fmt(pcts(b, keep))} |"
    try:  # llama-bench ran batch 1 only
        ll = [json.load(open(f"{out}/{t}.{r}.llama.json"))[0]["avg_ts"] for r in range(1, rounds + 1)] if bt == "1" else []
        row += f" {min(ll):.1f}-{max(ll):.1f} |" if ll else " |"
    except (OSError, ValueError, KeyError, IndexError):
        row += " |"
    print(row)
print(f"(runs' JSON in {out})")
PY
