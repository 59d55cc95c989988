#!/usr/bin/env bash
# The availability soak (issue #22; BENCHMARKS.md, "Soak"): a steady Poisson load through
# two routers under a fault every few seconds, then a fault-free replay of the same requests.
#
#   sudo scripts/soak.sh [DURATION_S]        # 600 (10 minutes) by default; 60 for a quick look
#
# What runs (all on this machine; the only network is loopback and one veth pair into a
# private network namespace, torn down on exit):
#   etcd (one member, its own data dir), 4 cells (`tokenhive serve` on a tiny mkmodel model,
#   one compute thread each, registered on etcd), cell 4 inside a network namespace behind a
#   veth pair (so tc netem can slow its network alone), 2 routers finding the cells on etcd,
#   and `bench serve --base-url ROUTER_A,ROUTER_B` (client::FailoverClient: a router's death
#   moves its streams to the other router by continuation) sending requests at SOAK_RATE/s
#   (Poisson), priorities high/normal/low 0.1/0.8/0.1, even requests greedy, odd seeded.
# Faults, one at a time, one every SOAK_FAULT_EVERY seconds, in turn:
#   cell-kill     SIGKILL of a random cell, started again 2 s later
#   cell-hang     SIGSTOP of a random cell, SIGCONT 2 s later
#   router-kill   SIGKILL of a router (A and B in turn), started again 2 s later
#   cell-restart  SIGTERM of a random cell (it leaves etcd and drains), started again once gone
#   etcd-restart  SIGKILL of etcd, started again 1 s later on the same data
#   slow-net      tc netem delay 40 ms +- 10 ms on cell 4's link for 4 s (without netem in
#                 the kernel: tbf, 512 kbit/s each way)
# Then every process is healthy again and the same requests (same seed, same count) go
# straight to the 4 cells with no fault: the reference. scripts/soak_report.py prints the
# report: requests sent, succeeded, failed by cause, availability and its nines, outputs
# identical to the replay, streams migrated (routers) and resumed (client), failure
# detection times from each fault to each router's "is dead" line, and the longest gap
# between tokens of requests that lived through a fault against those that did not.
#
# Environment: SOAK_RATE (requests/s, 20), SOAK_OUTPUT_LEN (tokens, 32), SOAK_FAULT_EVERY (s, 5), SOAK_SEED (1),
# SOAK_DIR (logs and results; default a new folder under /tmp, kept), SOAK_BASE_PORT (18300).
# Needs root (ip netns, tc), etcd, python3. Not a ctest test: it runs for DURATION_S.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bin=$root/build/tokenhive
duration=${1:-600}
rate=${SOAK_RATE:-20}
output_len=${SOAK_OUTPUT_LEN:-32}  # tokens per request, 0.5x to 1.5x of it
fault_every=${SOAK_FAULT_EVERY:-5}
seed=${SOAK_SEED:-1}
base=${SOAK_BASE_PORT:-18300}
dir=${SOAK_DIR:-$(mktemp -d /tmp/tokenhive-soak.XXXXXX)}
mkdir -p "$dir"
[[ "$duration" =~ ^[0-9]+$ ]] && ((duration >= 10)) || { echo "soak: DURATION_S must be a whole number >= 10" >&2; exit 2; }
[ -x "$bin" ] || { echo "soak: $bin missing: build the tokenhive target first" >&2; exit 2; }
for tool in etcd ip tc python3 curl; do
  command -v $tool >/dev/null || { echo "soak: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "soak: needs root (ip netns and tc netem for the slow-network fault)" >&2; exit 2; }

model=$dir/model.gguf
etcd_port=$((base + 90)) etcd_peer=$((base + 91))
cell_ports=($((base + 1)) $((base + 2)) $((base + 3)) $((base + 4)))
router_ports=($((base + 10)) $((base + 11)))
ns=thsoak$$ veth_host=thsk$$h veth_ns=thsk$$n
host_ip=10.251.77.1 ns_ip=10.251.77.2   # the veth pair's private /30, reachable from this machine only
cell_hosts=(127.0.0.1 127.0.0.1 127.0.0.1 $ns_ip)
discovery=etcd://127.0.0.1:$etcd_port
rm -rf "$dir/pid" "$dir/stop" "$dir/etcd.data" "$dir"/metrics.router* "$dir"/*.log "$dir"/*.jsonl "$dir/faults.tsv"
mkdir -p "$dir/pid"   # one file per process (etcd, cell0..3, router0..1): its pid now
faults=$dir/faults.tsv
: >"$faults"

now() { echo "$EPOCHREALTIME"; }
pid_of() { cat "$dir/pid/$1" 2>/dev/null || true; }
gone() {  # pid: exited (or a zombie nobody reaped yet)
  [ ! -e "/proc/$1" ] || [ "$(sed 's/^.*) \(.\).*$/\1/' "/proc/$1/stat" 2>/dev/null)" = Z ]
}
stop_process() {  # name signal: sends it and waits (at most 20 s) for the process to be gone
  local p; p=$(pid_of "$1")
  [ -n "$p" ] || return 0
  kill "-$2" "$p" 2>/dev/null || true
  local until=$((SECONDS + 20))
  until gone "$p" || ((SECONDS >= until)); do sleep 0.02; done
}
log() { echo "soak: $*" >&2; }
# Every line a process writes, with the Unix time it was read (the routers' "is dead"
# lines give the detection times). $EPOCHREALTIME: no fork per line.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done; }

cleanup() {
  trap - EXIT INT TERM
  # The fault loop first: it could start a process after the others were killed.
  [ -n "${fault_pid:-}" ] && kill -KILL "$fault_pid" 2>/dev/null || true
  [ -n "${bench_pid:-}" ] && kill -KILL "$bench_pid" 2>/dev/null || true
  local f p
  for f in "$dir"/pid/*; do
    [ -e "$f" ] || continue
    p=$(cat "$f"); kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true        # removes the veth pair with it
  ip link del "$veth_host" 2>/dev/null || true
  log "stopped; logs and results in $dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_http() {  # url timeout_s: true once it answers 2xx
  local until=$((SECONDS + $2))
  while ((SECONDS < until)); do curl -sf -m 1 "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}

start_etcd() {
  etcd --name soak --data-dir "$dir/etcd.data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port,http://$host_ip:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "soak=http://127.0.0.1:$etcd_peer" --logger zap --log-level warn \
    </dev/null >>"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/pid/etcd"; disown  # no "Killed" line from bash at a fault
  local until=$((SECONDS + 20))
  while ((SECONDS < until)); do
    curl -sf -m 1 -X POST -d '{"key":"AA=="}' "http://127.0.0.1:$etcd_port/v3/kv/range" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  log "etcd did not come up (see $dir/etcd.log)"; return 1
}

start_cell() {  # index; a cell whose first etcd registration fails exits: started again, 5 tries
  local i=$1 host=${cell_hosts[$1]} port=${cell_ports[$1]} etcd_at=$discovery wrap=() try p
  if ((i == 3)); then wrap=(ip netns exec "$ns"); etcd_at=etcd://$host_ip:$etcd_port; fi
  for try in 1 2 3 4 5; do
    "${wrap[@]}" "$bin" serve -m "$model" -t 1 --host "$host" --port "$port" --discovery "$etcd_at" \
      --access-log '' --shutdown-timeout 10 </dev/null > >(stamp >>"$dir/cell$i.log") 2>&1 &
    p=$!
    echo "$p" >"$dir/pid/cell$i"; disown
    local until=$((SECONDS + 30))
    while ((SECONDS < until)) && ! gone "$p"; do
      curl -sf -m 1 "http://$host:$port/ready" >/dev/null 2>&1 && return 0
      sleep 0.1
    done
    gone "$p" || kill -KILL "$p" 2>/dev/null || true
    log "cell $i did not come up (try $try; see $dir/cell$i.log)"
    sleep 1
  done
  return 1
}

start_router() {  # index
  local i=$1
  "$bin" router --port "${router_ports[$i]}" --discovery "$discovery" --policy load \
    </dev/null > >(stamp >>"$dir/router$i.log") 2>&1 &
  echo $! >"$dir/pid/router$i"; disown
  wait_http "http://127.0.0.1:${router_ports[$i]}/health" 20 || { log "router $i did not come up"; return 1; }
}

# A router's counters before it dies and at the end: migrations summed over its lives.
scrape_router() {  # index
  curl -sf -m 1 "http://127.0.0.1:${router_ports[$1]}/metrics" >"$dir/metrics.router$1.$(now)" 2>/dev/null || true
}

fault() {  # kind target detail: a line of the schedule, at the time it happens
  printf '%s\t%s\t%s\t%s\n' "$(now)" "$1" "$2" "$3" >>"$faults"
}

# The slow network: tc netem's delay where the kernel has it; else (a kernel without
# sch_netem, as this project's VMs: "Specified qdisc kind is unknown") a token bucket
# of 512 kbit/s each way, whose queue delays what the link carries by up to 100 ms.
slow_net() {  # on | off
  if [ "$1" = off ]; then
    tc qdisc del dev "$veth_host" root 2>/dev/null; ip netns exec "$ns" tc qdisc del dev "$veth_ns" root 2>/dev/null
    return 0
  fi
  if tc qdisc add dev "$veth_host" root netem delay 40ms 10ms 2>/dev/null; then
    ip netns exec "$ns" tc qdisc add dev "$veth_ns" root netem delay 40ms 10ms
    echo "netem delay 40ms 10ms both ways"
  else
    tc qdisc add dev "$veth_host" root tbf rate 512kbit burst 16kb latency 100ms
    ip netns exec "$ns" tc qdisc add dev "$veth_ns" root tbf rate 512kbit burst 16kb latency 100ms
    echo "tbf 512kbit latency 100ms both ways (no netem in this kernel)"
  fi
}

run_faults() {  # one fault every $fault_every s, the kinds in turn, until $dir/stop exists
  set +e  # a fault that fails (a restart that does not come up) is logged; the schedule goes on
  local kinds=(cell-kill cell-hang router-kill cell-restart etcd-restart slow-net) k=0 r=0
  sleep "$fault_every"
  while [ ! -e "$dir/stop" ]; do
    # Each kind goes round the 4 cells: the n-th round of kinds hits cell (3n + position) mod 4.
    local kind=${kinds[k % ${#kinds[@]}]} t0=$SECONDS c=$(((k / ${#kinds[@]} * 3 + k) % 4))
    local url=http://${cell_hosts[c]}:${cell_ports[c]}
    case $kind in
      cell-kill)
        fault cell-kill "$url" SIGKILL; stop_process "cell$c" KILL
        sleep 2; start_cell "$c" && fault cell-start "$url" "after kill" ;;
      cell-hang)
        fault cell-hang "$url" SIGSTOP; kill -STOP "$(pid_of "cell$c")"
        sleep 2; kill -CONT "$(pid_of "cell$c")"; fault cell-resume "$url" SIGCONT ;;
      router-kill)
        scrape_router "$r"
        fault router-kill "router$r" "SIGKILL of http://127.0.0.1:${router_ports[r]}"
        stop_process "router$r" KILL
        sleep 2; start_router "$r" && fault router-start "router$r" "after kill"
        r=$((1 - r)) ;;
      cell-restart)
        fault cell-restart "$url" SIGTERM; stop_process "cell$c" TERM
        start_cell "$c" && fault cell-start "$url" "after SIGTERM" ;;
      etcd-restart)
        fault etcd-restart "$discovery" SIGKILL; stop_process etcd KILL
        sleep 1; start_etcd && fault etcd-start "$discovery" "same data" ;;
      slow-net)
        fault slow-net "http://$ns_ip:${cell_ports[3]}" "$(slow_net on)"
        sleep 4
        slow_net off; fault slow-net-end "http://$ns_ip:${cell_ports[3]}" "removed" ;;
    esac
    k=$((k + 1))
    local rest=$((fault_every - (SECONDS - t0)))
    ((rest > 0)) && sleep "$rest"
  done
}

# --- set up ---
[ -f "$model" ] || "$bin" mkmodel --shape tiny -o "$model" >/dev/null
ip netns add "$ns"
ip link add "$veth_host" type veth peer name "$veth_ns"
ip link set "$veth_ns" netns "$ns"
ip addr add "$host_ip/30" dev "$veth_host" && ip link set "$veth_host" up
ip netns exec "$ns" ip addr add "$ns_ip/30" dev "$veth_ns"
ip netns exec "$ns" ip link set "$veth_ns" up
ip netns exec "$ns" ip link set lo up
start_etcd
for i in 0 1 2 3; do start_cell "$i"; done
for i in 0 1; do start_router "$i"; done
for i in 0 1; do  # both routers see the 4 cells before the load starts
  until curl -sf "http://127.0.0.1:${router_ports[i]}/ready" | grep -q '"cells":4'; do sleep 0.2; done
done
log "4 cells, 2 routers, etcd up; $duration s at $rate requests/s, a fault every $fault_every s; logs in $dir"

workload=(--endpoint /v1/completions --random-input-len 32 --random-output-len "$output_len" --random-range-ratio 0.5
          --priority-mix high=0.1,normal=0.8,low=0.1 --sampling mixed --seed "$seed" --no-progress)
urls=http://127.0.0.1:${router_ports[0]},http://127.0.0.1:${router_ports[1]}

# --- the soak ---
"$bin" bench serve --base-url "$urls" "${workload[@]}" --request-rate "$rate" --duration "$duration" \
  --max-concurrency 512 --outputs "$dir/soak.jsonl" --json "$dir/soak.json" >"$dir/bench.txt" 2>"$dir/bench.log" &
bench_pid=$!
run_faults &
fault_pid=$!
set +e
wait "$bench_pid"; bench_rc=$?
set -e
bench_pid=
touch "$dir/stop"  # the fault in progress ends (its restart or SIGCONT included), then the loop
wait "$fault_pid" 2>/dev/null || true
fault_pid=
log "load done (bench exit $bench_rc)"

# --- everything healthy (it should be already), then the fault-free replay straight to the cells ---
set +e
slow_net off
curl -sf -m 2 -X POST -d '{"key":"AA=="}' "http://127.0.0.1:$etcd_port/v3/kv/range" >/dev/null ||
  { stop_process etcd KILL; start_etcd; }
for i in 0 1 2 3; do
  kill -CONT "$(pid_of "cell$i")" 2>/dev/null
  wait_http "http://${cell_hosts[i]}:${cell_ports[i]}/ready" 3 || { stop_process "cell$i" KILL; start_cell "$i"; }
done
for i in 0 1; do scrape_router "$i"; done
sent=$(python3 -c 'import sys; print(sum(1 for _ in open(sys.argv[1])))' "$dir/soak.jsonl")
cells=$(for i in 0 1 2 3; do printf 'http://%s:%s,' "${cell_hosts[i]}" "${cell_ports[i]}"; done)
log "replaying the $sent requests on the cells, no fault"
"$bin" bench serve --base-url "${cells%,}" "${workload[@]}" --num-prompts "$sent" --request-rate inf \
  --max-concurrency 32 --outputs "$dir/replay.jsonl" >"$dir/replay.txt" 2>"$dir/replay.log" || true

python3 "$root/scripts/soak_report.py" "$dir" | tee "$dir/report.txt"
exit "${PIPESTATUS[0]}"  # 1 when an output differs from the replay's
