#!/usr/bin/env bash
# Tensor parallelism over a real (shaped) network link, on one machine: two network
# namespaces joined by a link with a one-way delay and a rate, one MPI rank in each (Open MPI
# over TCP on that link only; mpirun starts the second rank's daemon in the other namespace
# through an ssh stand-in that runs `ip netns exec`). The link is scripts/tp_delay_line.py
# (TUN devices and a user-space delay line) because this machine's kernel has no netem
# (`tc qdisc add ... netem` says "Specified qdisc kind is unknown"); with netem, a veth pair
# and `tc qdisc add dev tp0 root netem delay D rate R` on each end would do the same. For each
# setting it measures the all-reduce (`tokenhive bench comm`: MPI_Allreduce, our ring and
# recursive doubling, at n_embd floats and 32 x n_embd) and decode (`generate
# --tensor-parallel 2`: tokens/s and the all-reduce share), and prints the cost model's
# prediction beside them (BENCHMARKS.md, "Tensor parallelism over MPI"). Needs root, mpirun,
# python3, build/tokenhive.
#
#   scripts/tp_shaped_link.sh -m MODEL [-s N_EMBD,N_LAYER] [-n TOKENS] [-i ITERS] [SETTING...]
#   MODEL: one whose KV heads split in 2 (BENCHMARKS.md used TinyLlama 1.1B q8_0); -s its
#   shape (default 2048,22: the 1.1B); SETTING: DELAY_US/RATE_MBIT one way (0 rate:
#   unlimited), default: 0/0 100/10000 500/1000 2000/1000
#
# Not a ctest test: it takes minutes and adds network namespaces to the machine (removed
# again at exit). Run it on a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/build/tokenhive
MODEL=
SHAPE=2048,22
TOKENS=32
ITERS=200
while getopts "m:s:n:i:" o; do
  case $o in
    m) MODEL=$OPTARG ;;
    s) SHAPE=$OPTARG ;;
    n) TOKENS=$OPTARG ;;
    i) ITERS=$OPTARG ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
SETTINGS=("$@")
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=(0/0 100/10000 500/1000 2000/1000)

[ "$(id -u)" = 0 ] || { echo "tp_shaped_link: needs root (ip netns, TUN devices)" >&2; exit 1; }
for t in ip mpirun python3; do command -v $t >/dev/null || { echo "tp_shaped_link: no $t on PATH" >&2; exit 1; }; done
[ -x "$BIN" ] || { echo "tp_shaped_link: no $BIN (build it first)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "tp_shaped_link: no model '$MODEL' (-m)" >&2; exit 1; }
N_EMBD=${SHAPE%,*} N_LAYER=${SHAPE#*,}

NS_A=th-tp-a NS_B=th-tp-b IP_A=10.99.0.1 IP_B=10.99.0.2
LINK=
remove_namespaces() {
  ip netns del $NS_A 2>/dev/null || true
  ip netns del $NS_B 2>/dev/null || true
}
stop_link() {
  if [ -n "$LINK" ]; then kill "$LINK" 2>/dev/null || true; wait "$LINK" 2>/dev/null || true; fi
  LINK=
}
remove_namespaces  # a run killed before its trap
WORK=$(mktemp -d)
trap 'stop_link; remove_namespaces; rm -rf "$WORK"' EXIT
ip netns add $NS_A
ip netns add $NS_B
ip -n $NS_A link set lo up
ip -n $NS_B link set lo up

# mpirun's ssh: "AGENT HOST COMMAND..." -> the command in the namespace that has HOST's address.
cat > "$WORK/agent.sh" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in $IP_A) ns=$NS_A ;; $IP_B) ns=$NS_B ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
exec ip netns exec \$ns sh -c "\$*"
EOF
chmod +x "$WORK/agent.sh"

# mpirun runs in A (rank 0 there, local); B's daemon comes through the agent. Both the
# runtime (oob) and the data (btl) go over the shaped link only; TCP, no shared memory (vader).
mpi() {
  ip netns exec $NS_A mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "$WORK/agent.sh" --mca btl tcp,self --mca btl_tcp_if_include 10.99.0.0/24 \
    --mca oob_tcp_if_include 10.99.0.0/24 --host $IP_A:1,$IP_B:1 -np 2 "$@"
}

echo "model $MODEL: n_embd $N_EMBD, $N_LAYER layers; $TOKENS tokens per decode run; $ITERS all-reduces per size"

for setting in "${SETTINGS[@]}"; do
  stop_link
  python3 "$ROOT/scripts/tp_delay_line.py" $NS_A $IP_A $NS_B $IP_B "${setting%/*}" "${setting#*/}" &
  LINK=$!
  for _ in $(seq 50); do ip -n $NS_B addr show tp0 2>/dev/null | grep -q "$IP_B" && break; sleep 0.1; done
  echo
  echo "=== link: ${setting%/*} us one way, ${setting#*/} Mbit/s (0: unlimited) ==="
  mpi "$BIN" bench comm --sizes "$N_EMBD,$((32 * N_EMBD))" --iters "$ITERS" | tee "$WORK/comm.txt"
  mpi "$BIN" generate --tensor-parallel 2 -m "$MODEL" -p Hello -n "$TOKENS" --temp 0 --ignore-eos -t 1 \
    >/dev/null 2>"$WORK/gen.txt" || { cat "$WORK/gen.txt" >&2; exit 1; }
  python3 - "$setting" "$N_EMBD" "$N_LAYER" "$TOKENS" "$WORK/comm.txt" "$WORK/gen.txt" <<'EOF'
import re, sys
setting, n_embd, n_layer, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
comm, gen = open(sys.argv[5]).read(), open(sys.argv[6]).read()
d = float(setting.split("/")[0]) * 1e-6
beta = float(setting.split("/")[1]) * 1e6 / 8 or None  # bytes/s; None: unlimited
# The cost model (BENCHMARKS.md): an all-reduce of S bytes at N = 2 costs k messages one
# after another, each the link's one-way delay d plus a software overhead o = 30 us, and
# S/beta on the wire (each rank sends S in all, both directions at once). k: 1 for recursive
# doubling and for Open MPI 4.1's MPI_Allreduce at N = 2 (one exchange), 2 for the ring.
o = 30e-6
K = {"MPI_Allreduce": 1, "ring": 2, "doubling": 1}
S = 4 * n_embd
def ar(s, kind):
    return K[kind] * (d + o) + (0 if beta is None else s / beta)
gen_tps = float(re.search(r"generation: \d+ tokens, ([0-9.]+) tokens/s", gen)[1])
m = re.search(r"rank 0: ([0-9.]+) s in all-reduces of ([0-9.]+) s", gen)
ar_s, total_s = float(m[1]), float(m[2])
print(f"decode: {1000 / gen_tps:.2f} ms/token ({gen_tps:.2f} tokens/s); all-reduce {ar_s:.3f} of {total_s:.3f} s "
      f"({100 * ar_s / total_s:.0f}%), {1000 * ar_s / (tokens + 1):.2f} ms a step")
step = 2 * n_layer * ar(S, "MPI_Allreduce") + 2 * (d + o)
print(f"predicted per step: {1000 * step:.2f} ms (2 x {n_layer} MPI_Allreduce of {S} B, 2 broadcasts of the plan)")
for line in comm.splitlines():
    f = line.split()
    if len(f) == 6 and f[1].isdigit():
        print(f"  {f[0]:14s} {int(f[2]):8d} B: measured median {float(f[3]):8.1f} us, mean {float(f[4]):8.1f} us; "
              f"predicted {1e6 * ar(int(f[2]), f[0]):8.1f} us")
EOF
done
