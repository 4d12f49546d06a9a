"""topk_many: 100 000 rows in input order, iterator inputs, splitting within the server's limits."""
import numpy as np
import pytest

import pkserve

WIDTHS = [32, 32]


def identifiable_rows(rows, seed):
    """Random rows in which row i's best pair is (i % 32, (i // 32) % 32) with the sum
    i + 12 (exact in float32; every other score is in [-1, 1]), so that a row answered out of place shows."""
    rng = np.random.default_rng(seed)
    scores = rng.uniform(-1.0, 1.0, size=(rows, sum(WIDTHS))).astype(np.float32)
    index = np.arange(rows)
    scores[index, index % 32] = index + 10.0
    scores[index, 32 + (index // 32) % 32] = 2.0
    return scores


def test_100000_rows_come_back_in_input_order(server):
    scores = identifiable_rows(100_000, seed=1)
    with pkserve.Client(server.target, chunk_rows=1000, max_in_flight=6, streams=3) as client:
        slots, values = client.topk_many(scores, WIDTHS, 8)
        assert slots.shape == (100_000, 8) and values.shape == (100_000, 8)
        index = np.arange(100_000)
        best = (index % 32) * 32 + (index // 32) % 32
        assert (values.max(axis=1) == index + 12.0).all()
        assert (slots == best[:, None]).any(axis=1).all()
        # The same rows through unary calls, in pieces of the server's largest request.
        for first in range(0, 100_000, 4096):
            unary_slots, unary_values = client.topk(scores[first:first + 4096], WIDTHS, 8)
            np.testing.assert_array_equal(slots[first:first + 4096], unary_slots)
            np.testing.assert_array_equal(values[first:first + 4096], unary_values)


def test_an_iterator_of_arrays_yields_one_result_per_array_in_order(server):
    scores = identifiable_rows(9000, seed=2)
    sizes = [1, 5000, 7, 0, 3000, 992]
    cuts = np.cumsum([0] + sizes)
    pieces = [scores[a:b] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    with pkserve.Client(server.target, chunk_rows=700, max_in_flight=3) as client:
        whole_slots, whole_values = client.topk_many(scores, WIDTHS, 4)
        results = list(client.topk_many(iter(pieces), WIDTHS, 4))
    assert len(results) == len(pieces)
    first = 0
    for piece, (slots, values) in zip(pieces, results):
        end = first + len(piece)
        np.testing.assert_array_equal(slots, whole_slots[first:end])
        np.testing.assert_array_equal(values, whole_values[first:end])
        first = end


def test_the_iterator_is_read_only_as_far_as_the_window_needs(server):
    pulled = []

    def inputs():
        for i in range(50):
            pulled.append(i)
            yield identifiable_rows(10, seed=i)

    with pkserve.Client(server.target, max_in_flight=4) as client:
        results = client.topk_many(inputs(), WIDTHS, 2)
        next(results)
        assert len(pulled) <= 6, f"{len(pulled)} inputs read to answer the first"
        results.close()


def test_inputs_larger_than_the_servers_limits_are_split_to_fit(limited_server):
    # 300 rows and 64 KiB a request; a row of 64 float32 scores is 256 bytes.
    scores = identifiable_rows(2000, seed=3)
    with pkserve.Client(limited_server.target) as client:
        slots, values = client.topk_many(scores, WIDTHS, 4)
        for first in range(0, 2000, 200):
            expect_slots, expect_values = client.topk(scores[first:first + 200], WIDTHS, 4)
            np.testing.assert_array_equal(slots[first:first + 200], expect_slots)
            np.testing.assert_array_equal(values[first:first + 200], expect_values)
        with pytest.raises(pkserve.InvalidArgument, match="300"):
            client.topk(scores[:301], WIDTHS, 4, dtype="bfloat16")  # 301 x 128 bytes
        with pytest.raises(pkserve.ResourceExhausted, match="larger than max"):
            client.topk(scores[:300], WIDTHS, 4)  # 300 x 256 bytes


def test_a_request_the_server_refuses_in_a_stream_raises_its_error(server):
    with pkserve.Client(server.target) as client:
        with pytest.raises(pkserve.InvalidArgument, match="k"):
            client.topk_many(identifiable_rows(100, seed=4), WIDTHS, 257)
        # The client stays usable.
        slots, _ = client.topk_many(identifiable_rows(10, seed=4), WIDTHS, 1)
        assert slots.shape == (10, 1)
