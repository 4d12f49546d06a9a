"""Every golden top-k case through pkserve.Client.topk, bit for bit: slots, and values as bit
patterns, except that any NaN equals any NaN (the rule of kernels/golden/golden.h)."""
import os

import numpy as np
import pytest

import pkserve
from golden import read_golden

GOLDEN = os.environ.get("PK_GOLDEN_FILE", os.path.join(os.path.dirname(__file__), "..", "data",
                                                        "golden_cases.bin"))
CASES = read_golden(GOLDEN)


def test_the_golden_file_holds_its_cases():
    assert len(CASES) >= 120, f"{GOLDEN}: {len(CASES)} cases, expected at least 120"


@pytest.fixture(scope="module")
def client(server):
    with pkserve.Client(server.target) as client:
        yield client


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_golden_case_is_reproduced_bit_for_bit(client, case):
    slots, values = client.topk(case.scores, case.widths, case.k)
    assert slots.dtype == np.uint32 and slots.shape == (case.rows, case.kk)
    assert values.dtype == case.scores.dtype
    bad_rows = np.nonzero((slots.astype(np.int64) != case.slots).any(axis=1))[0]
    assert bad_rows.size == 0, (f"{case.name}: slots differ in {bad_rows.size} rows, first row "
                                f"{bad_rows[:1]}: expected {case.slots[bad_rows[0]][:8]}..., got "
                                f"{slots[bad_rows[0]][:8]}...")
    bits = np.uint16 if case.bfloat16 else np.uint32
    widened = pkserve.bfloat16_bits_to_float32 if case.bfloat16 else np.asarray
    both_nan = np.isnan(widened(values)) & np.isnan(widened(case.values))
    bad = np.nonzero((values.view(bits) != case.values.view(bits)) & ~both_nan)
    assert bad[0].size == 0, (f"{case.name}: {bad[0].size} values differ, first at row "
                              f"{bad[0][0]} column {bad[1][0]}")
