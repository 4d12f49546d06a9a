"""A product-key memory layer's lookup in plain PyTorch, the oracle of the lookup tests: per
factor torch.topk, the running list combined with each next factor's list by pair sums and
torch.topk, softmax over the selected scores, and torch.nn.functional.embedding_bag(mode="sum",
per_sample_weights=...) over the value rows, the heads of an output in one bag.

It matches the contract (SPEC.md) where no two candidate scores tie and no stage rounds (float32
scores, or bfloat16 scores with two factors, whose sums are exact in float32); the softmax and the
sum are evaluated in float64, so a correct server lies within its output type's rounding plus
float32 accumulation error of it.
"""
import torch


def reference_lookup(scores, widths, k, values, heads=1):
    """scores [rows, sum(widths)] (float32 or bfloat16), values [slots, dim]: (outputs float64
    [rows / heads, dim], slots int64 [rows, kk] ascending, weights float64 [rows, kk])."""
    scores = scores.float()
    rows = scores.shape[0]
    offsets = [sum(widths[:f]) for f in range(len(widths))]
    run_values, run_slots = torch.topk(scores[:, :widths[0]], min(k, widths[0]), dim=1)
    for f in range(1, len(widths)):
        part = scores[:, offsets[f]:offsets[f] + widths[f]]
        factor_values, factor_columns = torch.topk(part, min(k, widths[f]), dim=1)
        sums = run_values[:, :, None] + factor_values[:, None, :]
        slots = run_slots[:, :, None] * widths[f] + factor_columns[:, None, :]
        keep = min(k, sums.shape[1] * sums.shape[2])
        run_values, picked = torch.topk(sums.reshape(rows, -1), keep, dim=1)
        run_slots = slots.reshape(rows, -1).gather(1, picked)
    order = torch.argsort(run_slots, dim=1)
    slots = run_slots.gather(1, order)
    weights = torch.softmax(run_values.gather(1, order).double(), dim=1)
    kk = slots.shape[1]
    outputs = torch.nn.functional.embedding_bag(
        slots.reshape(rows // heads, heads * kk), values.double(),
        per_sample_weights=weights.reshape(rows // heads, heads * kk), mode="sum")
    return outputs, slots, weights


def magnitude_bound(slots, weights, values, heads=1):
    """sum over an output's terms of |weight x value|: the scale of its accumulation error."""
    rows, kk = slots.shape
    return torch.nn.functional.embedding_bag(
        slots.reshape(rows // heads, heads * kk), values.double().abs(),
        per_sample_weights=weights.reshape(rows // heads, heads * kk), mode="sum")


def assert_within_rounding(got, expect, bound, terms, bfloat16_output):
    """got (the server's outputs, as float64) against the float64 reference: within half an
    output ulp (bfloat16: 2^-8 relative, float32: 2^-24) plus the error of a float32 chain of
    `terms` fused multiply-adds (terms x 2^-24 of the bound) and of the float32 weights (2^-18 of
    the bound: the contract's Exp is within 2^-21, the sum and the division add a few ulps)."""
    rounding = expect.abs() * (2.0 ** -8 if bfloat16_output else 2.0 ** -24)
    tolerance = rounding + (terms * 2.0 ** -24 + 2.0 ** -18) * bound + 1e-30
    error = (got - expect).abs()
    worst = torch.argmax(error - tolerance)
    assert bool((error <= tolerance).all()), (
        f"{int((error > tolerance).sum())} outputs off the reference; worst at flat index "
        f"{int(worst)}: expected {float(expect.flatten()[worst])}, got "
        f"{float(got.flatten()[worst])}, tolerance {float(tolerance.flatten()[worst])}")
