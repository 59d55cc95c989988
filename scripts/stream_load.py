#!/usr/bin/env python3
"""Many concurrent streamed completions against one URL (a cell or a router), all
open at once, with the time to first token, the gaps between chunks and each
stream's end; and, given a process id, that process's resident memory sampled
every 100 ms while they run, and the CPU time it used. For the router's concurrent-streams figures
(BENCHMARKS.md, "Router: concurrent streams"): run it once against a cell and
once against a router in front of the same cell; the difference is the
router's added latency.

  scripts/stream_load.py --url http://127.0.0.1:8090 --streams 1000 --max-tokens 64 [--pid PID]

One process, asyncio on raw sockets (no dependency): 5,000 streams need
`ulimit -n` above 5,000 here, in the router and in the cell. Prints one JSON
object. Exit status 1 when any stream failed (no [DONE], a status other than
200, an error event).
"""
import argparse
import asyncio
import json
import os
import sys
import time
from urllib.parse import urlparse


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except OSError:
        return None


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def one_stream(host, port, body, out, start_gate):
    await start_gate.wait()
    t0 = time.monotonic()
    rec = {"ok": False, "ttft": None, "gaps": [], "e2e": None, "tokens": 0, "error": None}
    try:
        reader, writer = await asyncio.open_connection(host, port)
        data = json.dumps(body).encode()
        writer.write(
            b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (host.encode(), port, len(data)) + data)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            try:
                body = await asyncio.wait_for(reader.read(300), 5)
            except asyncio.TimeoutError:
                body = b""
            rec["error"] = f"HTTP {status} " + body.decode(errors="replace").split('"message":"')[-1].split('"')[0][:120]
            out.append(rec)
            writer.close()
            return
        buf = b""
        last = None
        done = False
        # Chunked coding, read as a byte stream: the SSE events are found by their blank lines.
        while not done:
            line = await reader.readline()
            if not line:
                break
            size = int(line.strip() or b"0", 16)
            if size == 0:
                break
            chunk = await reader.readexactly(size + 2)
            buf += chunk[:-2]
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                payload = event[len(b"data: "):] if event.startswith(b"data: ") else event
                now = time.monotonic()
                if payload == b"[DONE]":
                    done = True
                    break
                j = json.loads(payload)
                if "error" in j:
                    rec["error"] = payload.decode()[:200]
                    continue
                if rec["ttft"] is None:
                    rec["ttft"] = now - t0
                elif last is not None:
                    rec["gaps"].append(now - last)
                last = now
                rec["tokens"] += 1
        writer.close()
        rec["e2e"] = time.monotonic() - t0
        rec["ok"] = done and rec["error"] is None
        if not done and rec["error"] is None:
            rec["error"] = "no [DONE]"
    except Exception as e:  # noqa: BLE001 - every failure is counted, by its text
        rec["error"] = f"{type(e).__name__}: {e}"
    out.append(rec)


async def sample_rss(pid, samples, stop):
    while not stop.is_set():
        v = rss_kib(pid)
        if v is not None:
            samples.append(v)
        await asyncio.sleep(0.1)


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt", default="Once upon a time")
    ap.add_argument("--pid", type=int, default=0, help="a process whose VmRSS to sample (the router)")
    args = ap.parse_args()
    u = urlparse(args.url)
    body = {"prompt": args.prompt, "max_tokens": args.max_tokens, "ignore_eos": True, "temperature": 0, "stream": True}
    out, rss = [], []
    gate, stop = asyncio.Event(), asyncio.Event()
    idle_rss = rss_kib(args.pid) if args.pid else None
    cpu0 = cpu_seconds(args.pid) if args.pid else None
    sampler = asyncio.create_task(sample_rss(args.pid, rss, stop)) if args.pid else None
    tasks = [asyncio.create_task(one_stream(u.hostname, u.port, body, out, gate)) for _ in range(args.streams)]
    t0 = time.monotonic()
    gate.set()
    await asyncio.gather(*tasks)
    wall = time.monotonic() - t0
    stop.set()
    if sampler:
        await sampler
    ok = [r for r in out if r["ok"]]
    errors = {}
    for r in out:
        if not r["ok"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    gaps = [g for r in ok for g in r["gaps"]]
    ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
    report = {
        "url": args.url, "streams": args.streams, "max_tokens": args.max_tokens, "ok": len(ok),
        "failed": len(out) - len(ok), "errors": errors, "wall_s": round(wall, 2),
        "ttft_ms": {"p50": ms(percentile([r["ttft"] for r in ok], 50)), "p99": ms(percentile([r["ttft"] for r in ok], 99))},
        "gap_ms": {"p50": ms(percentile(gaps, 50)), "p99": ms(percentile(gaps, 99))},
        "e2e_ms": {"p50": ms(percentile([r["e2e"] for r in ok], 50)), "p99": ms(percentile([r["e2e"] for r in ok], 99))},
        "tokens": sum(r["tokens"] for r in ok),
    }
    if args.pid:
        report["rss_mib"] = {"idle": None if idle_rss is None else round(idle_rss / 1024, 1),
                             "max": round(max(rss) / 1024, 1) if rss else None}
        cpu1 = cpu_seconds(args.pid)
        if cpu0 is not None and cpu1 is not None:
            report["cpu_s"] = round(cpu1 - cpu0, 2)  # the process's CPU time (user + system) during the run
    print(json.dumps(report))
    return 0 if len(ok) == len(out) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
