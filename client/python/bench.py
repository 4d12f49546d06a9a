#!/usr/bin/python3
"""The Python client's throughput and latency against pkserve-bench's, in one run, on one server.

For each measurement pkserve-bench runs first at the same settings (shape, rows per request,
concurrency, unary or stream, warm-up and duration), then the Python client:
  256-row requests, unary:   AsyncClient.topk from `concurrency` asyncio tasks, and Client.topk
                             from `concurrency` threads, in a closed loop
                             (pkserve-bench --mode=unary --concurrency=N, run before each)
  256-row requests, stream:  Client.topk_many over one array, `concurrency` requests in flight
                             on `streams` streams (pkserve-bench --mode=stream --concurrency=N)
  1-row latency:             Client.topk, one call at a time (pkserve-bench --rows=1
                             --concurrency=1)
Both send requests from a pool of random normal rows made before measuring (bfloat16 patterns for
--dtype=bf16, as pkserve-bench's pool). Prints a table and one JSON line per measurement.

  /usr/bin/python3 client/python/bench.py --pkserve-bench=build/client/bench/pkserve-bench \\
      --pkserve=build/server/pkserve          # or --target=HOST:PORT of a running server
"""
import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

# This folder holds the package's sources without the stubs the build generates: import the built
# or installed pkserve (pip install, or PYTHONPATH=build/tests/python/lib) instead.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
import pkserve  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pkserve-bench", required=True, help="the pkserve-bench binary")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", help="a running pkserve")
    where.add_argument("--pkserve", help="a pkserve binary to start on 127.0.0.1 (CPU backend)")
    parser.add_argument("--server-flags", default="", help="more flags for --pkserve")
    parser.add_argument("--widths", default="1024,1024")
    parser.add_argument("--k", type=int, default=64)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    parser.add_argument("--rows", type=int, default=256, help="rows per throughput request")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--streams", type=int, default=2, help="streams of the stream mode")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--pool", type=int, default=16, help="distinct requests in the pool")
    return parser.parse_args()


def start_server(binary, flags):
    log = tempfile.NamedTemporaryFile(prefix="pkserve_bench_", suffix=".log")
    process = subprocess.Popen([binary, "--address=127.0.0.1:0", "--metrics_address=",
                                "--backend=cpu", *flags.split()],
                               stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and process.poll() is None:
        with open(log.name, "rb") as file:
            match = re.search(rb"listening on 127\.0\.0\.1:(\d+)", file.read())
        if match:
            return process, log, f"127.0.0.1:{int(match.group(1))}"
        time.sleep(0.01)
    process.kill()
    process.wait()
    with open(log.name, "rb") as file:
        sys.exit(f"pkserve did not start:\n{file.read().decode(errors='replace')}")


def run_cpp(args, target, rows, concurrency, mode):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([args.pkserve_bench, f"--target={target}", f"--widths={args.widths}",
                        f"--k={args.k}", f"--dtype={args.dtype}", f"--rows={rows}",
                        f"--mode={mode}", f"--concurrency={concurrency}",
                        f"--warmup={args.warmup}", f"--duration={args.duration}",
                        f"--json={out.name}"], check=True, stdout=subprocess.DEVNULL)
        level = json.load(open(out.name))[0]
    errors = sum(level["errors"].values())
    return {"rows_per_s": level["rows_per_s"], "p50_us": level["latency_us"]["p50"],
            "p99_us": level["latency_us"]["p99"], "errors": errors}


def make_pool(args, rows):
    widths = [int(w) for w in args.widths.split(",")]
    rng = np.random.default_rng(1)
    pool = []
    for _ in range(args.pool):
        scores = rng.standard_normal((rows, sum(widths)), dtype=np.float32)
        pool.append(pkserve.float32_to_bfloat16_bits(scores) if args.dtype == "bf16" else scores)
    return widths, pool


def summary(rows_done, seconds, latencies_s):
    latencies = np.array(latencies_s) * 1e6 if latencies_s else np.zeros(1)
    return {"rows_per_s": rows_done / seconds, "p50_us": float(np.percentile(latencies, 50)),
            "p99_us": float(np.percentile(latencies, 99)), "errors": 0}


def run_python_unary(args, target, rows, concurrency):
    widths, pool = make_pool(args, rows)

    async def main():
        async with pkserve.AsyncClient(target, retry_unavailable=False) as client:
            latencies = []
            counts = [0]
            phase = {"measure": False, "stop": False}

            async def worker(index):
                at = index
                while not phase["stop"]:
                    begin = time.perf_counter()
                    await client.topk(pool[at % len(pool)], widths, args.k)
                    if phase["measure"] and not phase["stop"]:
                        latencies.append(time.perf_counter() - begin)
                        counts[0] += rows
                    at += 1

            tasks = [asyncio.ensure_future(worker(i)) for i in range(concurrency)]
            await asyncio.sleep(args.warmup)
            phase["measure"] = True
            start = time.perf_counter()
            await asyncio.sleep(args.duration)
            phase["stop"] = True
            seconds = time.perf_counter() - start
            await asyncio.gather(*tasks)
            return summary(counts[0], seconds, latencies)

    return asyncio.run(main())


def run_python_threads(args, target, rows, concurrency):
    widths, pool = make_pool(args, rows)
    latencies = []
    counts = [0]
    phase = {"measure": False, "stop": False}
    with pkserve.Client(target, retry_unavailable=False) as client:
        def worker(index):
            at = index
            while not phase["stop"]:
                begin = time.perf_counter()
                client.topk(pool[at % len(pool)], widths, args.k)
                if phase["measure"] and not phase["stop"]:
                    latencies.append(time.perf_counter() - begin)  # list.append is atomic
                    counts[0] += rows  # one GIL-held statement per thread at a time
                at += 1

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
        for thread in threads:
            thread.start()
        time.sleep(args.warmup)
        phase["measure"] = True
        start = time.perf_counter()
        time.sleep(args.duration)
        phase["stop"] = True
        seconds = time.perf_counter() - start
        for thread in threads:
            thread.join()
    return summary(counts[0], seconds, latencies)


def run_python_stream(args, target, rows, concurrency):
    widths, pool = make_pool(args, rows)
    with pkserve.Client(target, retry_unavailable=False, chunk_rows=rows,
                        max_in_flight=concurrency, streams=args.streams) as client:
        def inputs(seconds):
            end = time.perf_counter() + seconds
            at = 0
            while time.perf_counter() < end:
                yield pool[at % len(pool)]
                at += 1

        for _ in client.topk_many(inputs(args.warmup), widths, args.k):
            pass
        done = 0
        start = time.perf_counter()
        for slots, _ in client.topk_many(inputs(args.duration), widths, args.k):
            done += slots.shape[0]
        return summary(done, time.perf_counter() - start, [])


def run_python_latency(args, target):
    widths, pool = make_pool(args, 1)
    with pkserve.Client(target, retry_unavailable=False) as client:
        end = time.perf_counter() + args.warmup
        while time.perf_counter() < end:
            client.topk(pool[0], widths, args.k)
        latencies = []
        start = time.perf_counter()
        end = start + args.duration
        at = 0
        while time.perf_counter() < end:
            begin = time.perf_counter()
            client.topk(pool[at % len(pool)], widths, args.k)
            latencies.append(time.perf_counter() - begin)
            at += 1
        return summary(len(latencies), time.perf_counter() - start, latencies)


def main():
    args = parse_args()
    server = None
    target = args.target
    if args.pkserve:
        server, log, target = start_server(args.pkserve, args.server_flags)
    try:
        shape = f"{args.widths.replace(',', 'x')} k={args.k} {args.dtype}"
        runs = [
            (f"{args.rows}-row requests, unary, {args.concurrency} tasks (AsyncClient)",
             lambda: run_cpp(args, target, args.rows, args.concurrency, "unary"),
             lambda: run_python_unary(args, target, args.rows, args.concurrency)),
            (f"{args.rows}-row requests, unary, {args.concurrency} threads (Client)",
             lambda: run_cpp(args, target, args.rows, args.concurrency, "unary"),
             lambda: run_python_threads(args, target, args.rows, args.concurrency)),
            (f"{args.rows}-row requests, stream, {args.concurrency} in flight",
             lambda: run_cpp(args, target, args.rows, args.concurrency, "stream"),
             lambda: run_python_stream(args, target, args.rows, args.concurrency)),
            ("1-row requests, unary, concurrency 1",
             lambda: run_cpp(args, target, 1, 1, "unary"),
             lambda: run_python_latency(args, target)),
        ]
        print(f"{shape}, {args.duration:g} s per measurement after {args.warmup:g} s warm-up, "
              f"target {target}")
        print("| measurement | pkserve-bench rows/s | python rows/s | python / pkserve-bench | "
              "pkserve-bench p50 / p99 us | python p50 / p99 us |")
        print("|---|---|---|---|---|---|")
        lines = []
        for name, cpp_run, python_run in runs:
            cpp = cpp_run()
            python = python_run()
            ratio = python["rows_per_s"] / cpp["rows_per_s"] if cpp["rows_per_s"] else 0.0
            latency = (lambda r: f"{r['p50_us']:.0f} / {r['p99_us']:.0f}" if r["p50_us"] else "-")
            print(f"| {name} | {cpp['rows_per_s']:.0f} | {python['rows_per_s']:.0f} | "
                  f"{ratio:.2f} | {latency(cpp)} | {latency(python)} |", flush=True)
            lines.append(json.dumps({"measurement": name, "shape": shape, "pkserve_bench": cpp,
                                     "python": python, "ratio": round(ratio, 3)}))
        print("\n".join(lines))
    finally:
        if server is not None:
            server.kill()
            server.wait()
            log.close()


if __name__ == "__main__":
    main()
