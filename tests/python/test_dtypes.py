"""Scores of every accepted kind: bfloat16 from float32 exactly as kernels/numeric.h FloatToBf16,
uint16 patterns, torch tensors (sent from their own memory), and results in the caller's kind."""
import struct

import numpy as np
import pytest

import pkserve
from pkserve import _tensors

WIDTHS = [32, 32]


def float_to_bf16_reference(bits):
    """kernels/numeric.h FloatToBf16, one float32 bit pattern at a time."""
    if (bits & 0x7FFFFFFF) > 0x7F800000:
        return ((bits >> 16) | 0x0040) & 0xFFFF
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


SPECIAL_BITS = [
    0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F817FFF,
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000,
    0xFFC00000, 0x7FFFFFFF, 0xFF800001, 0x7F810000, 0x00000001, 0x00008000, 0x00018000,
    0x807FFFFF, 0x3F7FFFFF,
]


def test_bfloat16_conversion_matches_float_to_bf16_bit_for_bit():
    rng = np.random.default_rng(5)
    bits = np.concatenate([np.array(SPECIAL_BITS, np.uint32),
                           rng.integers(0, 2**32, size=200_000, dtype=np.uint32)])
    got = pkserve.float32_to_bfloat16_bits(bits.view(np.float32))
    expect = np.array([float_to_bf16_reference(int(b)) for b in bits], np.uint16)
    bad = np.nonzero(got != expect)[0]
    assert bad.size == 0, (f"{bad.size} conversions differ, first 0x{bits[bad[0]]:08x}: expected "
                           f"0x{expect[bad[0]]:04x}, got 0x{got[bad[0]]:04x}")


def test_bfloat16_widening_is_exact():
    bits = np.arange(0, 2**16, dtype=np.uint32).astype(np.uint16)
    widened = pkserve.bfloat16_bits_to_float32(bits)
    assert (widened.view(np.uint32) == bits.astype(np.uint32) << 16).all()


@pytest.fixture(scope="module")
def client(server):
    with pkserve.Client(server.target) as client:
        yield client


@pytest.fixture(scope="module")
def scores():
    return np.random.default_rng(6).standard_normal((64, sum(WIDTHS)), dtype=np.float32)


def test_float32_sent_as_bfloat16_equals_its_rounded_patterns(client, scores):
    bits = pkserve.float32_to_bfloat16_bits(scores)
    slots, values = client.topk(scores, WIDTHS, 16, dtype="bfloat16")
    bit_slots, bit_values = client.topk(bits, WIDTHS, 16)
    np.testing.assert_array_equal(slots, bit_slots)
    assert values.dtype == np.float32 and bit_values.dtype == np.uint16
    np.testing.assert_array_equal(values, pkserve.bfloat16_bits_to_float32(bit_values))
    # uint16 patterns sent as float32: the float32 answer for the widened scores.
    wide_slots, wide_values = client.topk(bits, WIDTHS, 16, dtype="float32")
    assert wide_values.dtype == np.float32
    expect_slots, expect_values = client.topk(pkserve.bfloat16_bits_to_float32(bits), WIDTHS, 16)
    np.testing.assert_array_equal(wide_slots, expect_slots)
    np.testing.assert_array_equal(wide_values, expect_values)


def test_leading_axes_shape_the_results(client, scores):
    slots, values = client.topk(scores.reshape(4, 16, -1), WIDTHS, 8)
    flat_slots, _ = client.topk(scores, WIDTHS, 8)
    assert slots.shape == (4, 16, 8) and values.shape == (4, 16, 8)
    np.testing.assert_array_equal(slots.reshape(64, 8), flat_slots)
    one_slots, _ = client.topk(scores[3], WIDTHS, 8)
    np.testing.assert_array_equal(one_slots, flat_slots[3])


def test_kk_is_the_product_of_widths_when_k_exceeds_it(client):
    slots, values = client.topk(np.ones((2, 4), np.float32), [2, 2], 10)
    assert slots.shape == (2, 4)
    np.testing.assert_array_equal(slots[0], [0, 1, 2, 3])


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch", reason="python3-torch is not installed")


def test_torch_tensors_come_back_as_tensors_of_their_dtype(client, scores, torch):
    expect_slots, expect_values = client.topk(scores, WIDTHS, 8)
    slots, values = client.topk(torch.from_numpy(scores), WIDTHS, 8)
    assert slots.dtype == torch.int64 and values.dtype == torch.float32
    np.testing.assert_array_equal(slots.numpy(), expect_slots)
    np.testing.assert_array_equal(values.numpy(), expect_values)
    bf16 = torch.from_numpy(pkserve.float32_to_bfloat16_bits(scores).view(np.int16)).view(
        torch.bfloat16)
    slots, values = client.topk(bf16, WIDTHS, 8)
    bit_slots, bit_values = client.topk(pkserve.float32_to_bfloat16_bits(scores), WIDTHS, 8)
    assert values.dtype == torch.bfloat16
    np.testing.assert_array_equal(slots.numpy(), bit_slots)
    np.testing.assert_array_equal(values.view(torch.int16).numpy().view(np.uint16), bit_values)


def test_contiguous_cpu_tensors_are_sent_from_their_own_memory(scores, torch):
    tensor = torch.from_numpy(scores.copy())
    assert np.shares_memory(_tensors.as_scores(tensor).data, tensor.numpy())
    bf16 = tensor.to(torch.bfloat16)
    assert np.shares_memory(_tensors.as_scores(bf16).data,
                            bf16.view(torch.int16).numpy())
    transposed = torch.from_numpy(scores.copy()).t()
    assert _tensors.as_scores(transposed).data.flags.c_contiguous


def test_other_dtypes_are_refused_with_the_accepted_ones_named(client, torch):
    with pytest.raises(TypeError, match="torch.float32 or torch.bfloat16"):
        client.topk(torch.zeros(1, 64, dtype=torch.float64), WIDTHS, 4)
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        client.topk(np.zeros((1, 64), np.float32), WIDTHS, 4, dtype="float16")
