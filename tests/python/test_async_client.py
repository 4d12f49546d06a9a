"""pkserve.AsyncClient: the same answers as Client, on grpc.aio."""
import asyncio

import numpy as np
import pytest

import pkserve

WIDTHS = [64, 64]


def scores(rows, seed):
    return np.random.default_rng(seed).standard_normal((rows, sum(WIDTHS)), dtype=np.float32)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_async_methods_answer_as_the_sync_ones(server):
    rows = scores(3000, seed=1)
    with pkserve.Client(server.target) as sync:
        expect_slots, expect_values = sync.topk_many(rows, WIDTHS, 16)
        expect_info = sync.info()

    async def main():
        async with pkserve.AsyncClient(server.target, chunk_rows=500, max_in_flight=4) as client:
            assert await client.health() == "SERVING"
            assert (await client.info()).limits == expect_info.limits
            one = await client.topk(rows[:100], WIDTHS, 16)
            many = await client.topk_many(rows, WIDTHS, 16)
            pieces = []

            async def inputs():
                for first in range(0, 3000, 1000):
                    yield rows[first:first + 1000]

            async for result in client.topk_many(inputs(), WIDTHS, 16):
                pieces.append(result)
            concurrent = await asyncio.gather(
                *(client.topk(rows[i * 10:(i + 1) * 10], WIDTHS, 16) for i in range(32)))
            return one, many, pieces, concurrent

    one, many, pieces, concurrent = run(main())
    np.testing.assert_array_equal(one[0], expect_slots[:100])
    np.testing.assert_array_equal(many[0], expect_slots)
    np.testing.assert_array_equal(many[1], expect_values)
    np.testing.assert_array_equal(np.concatenate([p[0] for p in pieces]), expect_slots)
    np.testing.assert_array_equal(np.concatenate([c[0] for c in concurrent]), expect_slots[:320])


def test_async_errors_are_pkserve_errors(server):
    async def main():
        async with pkserve.AsyncClient(server.target) as client:
            with pytest.raises(pkserve.InvalidArgument, match="k must be"):
                await client.topk(scores(2, seed=2), WIDTHS, 300)
            with pytest.raises(pkserve.InvalidArgument, match="k must be"):
                await client.topk_many(scores(2, seed=2), WIDTHS, 300)
            with pytest.raises(pkserve.NotFound):
                await client.health("no.such.Service")

    run(main())
