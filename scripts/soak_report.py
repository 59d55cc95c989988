#!/usr/bin/env python3
"""The report of scripts/soak.sh, from the folder it wrote:

  soak.jsonl, replay.jsonl   bench serve --outputs of the soak and of the fault-free replay
  faults.tsv                 unix time, kind, target, detail: the fault schedule as it ran
  router0.log, router1.log   the routers' stderr, each line prefixed with the Unix time it was read
  metrics.router*.*          each router's /metrics before it was killed, and at the end
  bench.log                  the soak's bench serve stderr (the failover counters)

  python3 scripts/soak_report.py DIR
"""
import glob
import json
import math
import os
import re
import sys
from collections import Counter, defaultdict

DEAD = re.compile(r"^(\d+\.\d+) tokenhive router: cell (\S+) is dead \((\d+) ms after its last heartbeat\)")
CELL_FAULTS = ("cell-kill", "cell-hang")
# A fault's effects on requests: from the fault until this long after it ends (a restart, a SIGCONT).
WINDOW_S = 5.0


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return {r["index"]: r for r in map(json.loads, f)}


def pct(xs, q):
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(xs)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def summary(xs, unit="ms", scale=1000.0):
    if not xs:
        return "none"
    return (f"n {len(xs)}, p50 {pct(xs, 50) * scale:.0f} {unit}, p99 {pct(xs, 99) * scale:.0f} {unit}, "
            f"max {max(xs) * scale:.0f} {unit}")


def main(d):
    soak = read_jsonl(os.path.join(d, "soak.jsonl"))
    replay = read_jsonl(os.path.join(d, "replay.jsonl")) if os.path.exists(os.path.join(d, "replay.jsonl")) else {}
    faults = []
    with open(os.path.join(d, "faults.tsv"), encoding="utf-8") as f:
        for line in f:
            t, kind, target, detail = line.rstrip("\n").split("\t")
            faults.append((float(t), kind, target, detail))
    out = []
    p = out.append

    # Requests and availability.
    n = len(soak)
    ok = sum(1 for r in soak.values() if r["ok"])
    failed = [r for r in soak.values() if not r["ok"]]
    t0 = min(r["send_unix_s"] for r in soak.values())
    t1 = max(r["end_unix_s"] for r in soak.values())
    kinds = Counter(k for _, k, _, _ in faults if k in ("cell-kill", "cell-hang", "router-kill", "cell-restart",
                                                          "etcd-restart", "slow-net"))
    p(f"soak: {t1 - t0:.0f} s, {n / (t1 - t0):.1f} requests/s, {sum(kinds.values())} faults: "
      + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    by_priority = Counter(r["priority"] for r in soak.values())
    by_sampling = Counter(r["sampling"] for r in soak.values())
    p(f"requests: sent {n} ({', '.join(f'{k} {v}' for k, v in sorted(by_priority.items()))}; "
      f"{', '.join(f'{k} {v}' for k, v in sorted(by_sampling.items()))}), succeeded {ok}, failed {len(failed)}")
    avail = ok / n if n else 0.0
    nines = f"{-math.log10(1 - avail):.2f} nines" if avail < 1 else f"no failure in {n} (>= {math.log10(n):.1f} nines measurable)"
    p(f"availability: {100 * avail:.4f}% ({nines})")
    causes = Counter(r["error"][:160] for r in failed)
    for cause, count in causes.most_common():
        p(f"  failed x{count}: {cause}")
    for r in sorted(failed, key=lambda r: r["index"])[:20]:
        before = [f for f in faults if f[0] <= r["end_unix_s"]]
        near = f"{before[-1][1]} {before[-1][2]} {r['end_unix_s'] - before[-1][0]:.2f} s before its end" if before else "no fault before"
        p(f"    request {r['index']} ({r['priority']}, {r['sampling']}) failed {r['end_unix_s'] - t0:.1f} s in; "
          f"last fault: {near}")

    # Outputs against the fault-free replay.
    compared = identical = 0
    differing, unreplayed = [], []
    for i, r in soak.items():
        if not r["ok"]:
            continue
        q = replay.get(i)
        if q is None or not q["ok"]:
            unreplayed.append(i)
            continue
        compared += 1
        if r["text"] == q["text"]:
            identical += 1
        else:
            differing.append(i)
    share = 100 * identical / compared if compared else 0.0
    p(f"outputs: {identical} of {compared} completed outputs identical to the fault-free replay ({share:.2f}%)"
      + (f"; {len(unreplayed)} not replayed (the replay failed them)" if unreplayed else ""))
    for i in sorted(differing)[:10]:
        a, b = soak[i]["text"], replay[i]["text"]
        k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        p(f"  request {i} ({soak[i]['sampling']}) differs at byte {k}: soak {a[k:k + 40]!r} replay {b[k:k + 40]!r}")

    # Migrations (routers, summed over each router's lives) and resumes (the client).
    migrations = retries = 0.0
    for path in glob.glob(os.path.join(d, "metrics.router*")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("tokenhive_router_migrations_total"):
                    migrations += float(line.split()[-1])
                elif line.startswith("tokenhive_router_retries_total"):
                    retries += float(line.split()[-1])
    client = ""
    if os.path.exists(os.path.join(d, "bench.log")):
        with open(os.path.join(d, "bench.log"), encoding="utf-8") as f:
            m = re.search(r"failover: (\d+) tries after a first, (\d+) streams resumed", f.read())
            if m:
                client = f"; the client: {m.group(2)} streams resumed on the other router, {m.group(1)} tries after a first"
    p(f"moves: routers migrated {migrations:.0f} streams between cells and retried {retries:.0f} requests before "
      f"their first byte{client}")

    # Detection: from each cell fault to each router's "is dead" line for that cell.
    deaths = defaultdict(list)  # (router, url) -> [(stamp, ms after last heartbeat)]
    routers = sorted(glob.glob(os.path.join(d, "router*.log")))
    for path in routers:
        name = os.path.basename(path)[:-4]
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = DEAD.match(line)
                if m:
                    deaths[(name, m.group(2))].append((float(m.group(1)), int(m.group(3))))
    router_down = []  # (router name, from, to)
    for t, kind, target, _ in faults:
        if kind == "router-kill":
            restart = next((f[0] for f in faults if f[0] > t and f[1] == "router-start" and f[2] == target), t + 30)
            router_down.append((target, t, restart))
    used = set()
    for kind in CELL_FAULTS:
        seen, own, missed = [], [], 0
        for t, k, url, _ in faults:
            if k != kind:
                continue
            for path in routers:
                name = os.path.basename(path)[:-4]
                if any(r == name and a - 1 <= t <= b + 1 for r, a, b in router_down):
                    continue  # that router was down (or just back) at the fault
                hit = next(((s, ms) for s, ms in deaths[(name, url)] if t <= s <= t + WINDOW_S), None)
                if hit is None:
                    missed += 1
                    continue
                used.add((name, url, hit[0]))
                seen.append(hit[0] - t)
                own.append(hit[1] / 1000)
        label = "kills (SIGKILL)" if kind == "cell-kill" else "hangs (SIGSTOP)"
        p(f"detection of {label}, fault to the router's 'is dead' line: {summary(seen)}"
          + (f"; {missed} not detected within {WINDOW_S:.0f} s" if missed else ""))
        p(f"  the routers' own figure (from the last answered heartbeat): {summary(own)}")
    other = [(name, url, s) for (name, url), xs in deaths.items() for s, _ in xs if (name, url, s) not in used]
    if other:
        why = Counter()
        for name, url, s in other:
            before = [f for f in faults if f[0] <= s and (f[2] == url or f[1] in ("router-kill", "etcd-restart"))]
            why[f"{before[-1][1]}" if before and s - before[-1][0] < 10 else "no fault on it"] += 1
        # By the last fault on that cell (or of the whole cluster) within 10 s before: a slow
        # link's heartbeats over the routers' 150 ms timeout, say.
        p(f"other deaths declared: {len(other)} (by the fault before them: "
          + ", ".join(f"{k} {v}" for k, v in why.most_common()) + ")")

    # What a fault added: the longest gap between tokens of requests in flight at a fault.
    hit, calm = [], []
    for r in soak.values():
        if not r["ok"]:
            continue
        near = any(r["send_unix_s"] - WINDOW_S <= t <= r["end_unix_s"] for t, k, _, _ in faults
                   if k in ("cell-kill", "cell-hang", "router-kill"))
        (hit if near else calm).append(r["max_gap_s"])
    p(f"longest gap between tokens, requests in flight at a kill or hang: {summary(hit)}")
    p(f"longest gap between tokens, the other requests: {summary(calm)}")
    print("\n".join(out))
    return 0 if n and compared == identical else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: soak_report.py DIR")
    sys.exit(main(sys.argv[1]))
