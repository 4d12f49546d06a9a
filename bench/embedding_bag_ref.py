#!/usr/bin/env python3
"""PyTorch's embedding_bag on pk-bench-lookup-cuda's shapes, for comparison (run on the GPU host).

torch.nn.functional.embedding_bag(mode="sum", per_sample_weights=...) computes the weighted sum of
the memory lookup (not its top-k or softmax): a 1024 x 1024-row table of dim 1024 or 4096
(bfloat16 and float32), 4096 bags of heads x k = 4 x 32 = 128 rows, random indices and weights.
Timed by CUDA events (median of --repeats after warm-up) over several index batches rotated, as
value bytes read per second (bags x 128 x dim x element size / time) and against a
device-to-device copy (read + write bytes / time) measured in the same run, as
pk-bench-lookup-cuda reports them. Prints a table line and one JSON line per result.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def median_ms(fn, repeats, batches):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(repeats + 3):
        start.record()
        fn(r % batches)
        stop.record()
        stop.synchronize()
        if r >= 3:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def copy_bandwidth(repeats):
    n = 1 << 30
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda _: dst.copy_(src), repeats, 1)
    return 2.0 * n / (ms * 1e-3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--bags", type=int, default=4096)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("embedding_bag_ref: skipped: no CUDA device")
        return 77
    copy = copy_bandwidth(args.repeats)
    print(f"device: {torch.cuda.get_device_name(0)}; device-to-device copy {copy * 1e-9:.0f} GB/s "
          "(read + write)")
    print(json.dumps({"bench": "d2d_copy_torch", "bytes_per_s": copy}))
    slots, per_bag = 1024 * 1024, 4 * 32
    generator = torch.Generator(device="cuda").manual_seed(16)
    print(f"\n{'config':<34} {'bags':>6} {'median us':>10} {'value GB/s':>10} {'of copy':>8}")
    for dim, dtype in ((1024, torch.bfloat16), (4096, torch.bfloat16), (1024, torch.float32),
                       (4096, torch.float32)):
        table = (torch.rand(slots, dim, device="cuda", generator=generator, dtype=torch.float32)
                 * 4 - 2).to(dtype)
        for bags in (args.bags, 1):
            batches = 4
            indices = [torch.randint(0, slots, (bags * per_bag,), device="cuda",
                                     generator=generator) for _ in range(batches)]
            weights = [torch.softmax(torch.randn(bags, per_bag, device="cuda",
                                                 generator=generator), dim=1).reshape(-1).to(dtype)
                       for _ in range(batches)]
            offsets = torch.arange(0, bags * per_bag, per_bag, device="cuda")
            ms = median_ms(lambda i: F.embedding_bag(indices[i], table, offsets, mode="sum",
                                                      per_sample_weights=weights[i]),
                           args.repeats, batches)
            value_bytes = bags * per_bag * dim * table.element_size()
            bw = value_bytes / (ms * 1e-3)
            name = f"embedding_bag 1024x1024 d{dim} {str(dtype).replace('torch.', '')}"
            print(f"{name:<34} {bags:>6} {ms * 1e3:>10.1f} {bw * 1e-9:>10.0f} {100 * bw / copy:>7.1f}%")
            print(json.dumps({"bench": "embedding_bag", "config": name, "bags": bags,
                              "median_us": ms * 1e3, "value_bytes_per_s": bw,
                              "of_copy": bw / copy}))
        del table
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
