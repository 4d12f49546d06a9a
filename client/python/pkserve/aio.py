"""pkserve.AsyncClient: Client's methods as coroutines on grpc.aio, for asyncio model servers.

The same arguments and results as pkserve.Client (see there); topk_many / lookup_many given one
array return its result when awaited, given an iterator (or async iterator) of arrays return an
async iterator of one result per array. Use one AsyncClient per event loop.
"""
import collections

import grpc
import grpc.aio

from pkserve import _channel
from pkserve import _errors
from pkserve import _ops
from pkserve import _tensors
from pkserve.client import bind_channel, is_many_input
from pkserve.v1 import pkserve_pb2 as pb


async def _as_async_iter(inputs):
    if hasattr(inputs, "__aiter__"):
        async for item in inputs:
            yield item
    else:
        for item in inputs:
            yield item


class _ManyCall:
    """The result of AsyncClient.topk_many/lookup_many: awaitable for one array, async-iterable
    for many."""

    def __init__(self, run, single):
        self._run = run
        self._single = single

    def __await__(self):
        return self._first().__await__()

    async def _first(self):
        if not self._single:
            raise TypeError("an iterator of inputs gives one result per input: use async for")
        results = self._run()
        try:
            return await results.__anext__()
        finally:
            await results.aclose()

    def __aiter__(self):
        if self._single:
            raise TypeError("one array gives one result: await it")
        return self._run()


class AsyncClient:
    """pkserve.Client's settings and methods, on a grpc.aio channel."""

    def __init__(self, target, *, tls=None, deadline=30.0, retry_unavailable=True,
                 lb_policy=None, max_in_flight=8, streams=2, chunk_rows=1024,
                 stream_deadline=None):
        if not target:
            raise ValueError("target must not be empty")
        credentials, options = _channel.credentials_and_options(
            grpc, tls, lb_policy, retry_unavailable)
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        bind_channel(self, self._channel, target, deadline, stream_deadline, max_in_flight,
                     streams, chunk_rows)

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def info(self):
        try:
            return await self._stub.GetServerInfo(pb.ServerInfoRequest(), timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None

    async def health(self, service=""):
        try:
            return await self._health(service, timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None

    async def topk(self, scores, widths, k, *, dtype=None, request_id=""):
        return await self._call(_ops.TopK(widths, k), scores, dtype, request_id)

    async def lookup(self, memory, scores, k, heads=1, *, return_slots=False, output_dtype=None,
                     dtype=None, request_id=""):
        op = _ops.Lookup(memory, k, heads, return_slots, output_dtype)
        return await self._call(op, scores, dtype, request_id)

    def topk_many(self, scores, widths, k, *, dtype=None):
        return self._many(_ops.TopK(widths, k), scores, dtype)

    def lookup_many(self, memory, scores, k, heads=1, *, return_slots=False, output_dtype=None,
                    dtype=None):
        return self._many(_ops.Lookup(memory, k, heads, return_slots, output_dtype), scores, dtype)

    async def limits(self):
        if self._limits is None:
            self._limits = (await self.info()).limits
        return self._limits

    async def _call(self, op, scores, dtype, request_id):
        scores = _tensors.as_scores(scores, dtype)
        op.check(scores)
        try:
            response = await self._unary[op.method](
                op.encode(scores, 0, scores.rows, request_id), timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None
        assembly = _ops.Assembly(op, scores)
        assembly.add(response, 0, scores.rows)
        return assembly.result()

    def _many(self, op, scores, dtype):
        single = not is_many_input(scores)
        inputs = [scores] if single else scores
        return _ManyCall(lambda: self._run(op, inputs, dtype), single)

    async def _run(self, op, inputs, dtype):
        limits = await self.limits()
        streams = []
        pending = collections.deque()  # (call, assembly, first_row, end_row), in send order
        sent = 0

        async def receive_oldest():
            call, assembly, first, end = pending.popleft()
            try:
                message = await call.read()
            except grpc.RpcError as error:
                raise _errors.from_rpc_error(error) from None
            if message is grpc.aio.EOF:
                raise _errors.Internal("the stream ended before answering every request")
            assembly.add(_ops.stream_answer(op, message), first, end)
            return assembly

        def step_for(scores):
            return _ops.rows_per_request(limits, scores, op, self.chunk_rows)

        try:
            async for raw in _as_async_iter(inputs):
                for assembly, first, end in _ops.iter_chunks(op, [raw], dtype, step_for):
                    if len(pending) >= self.max_in_flight:
                        done = await receive_oldest()
                        if done.complete:
                            yield done.result()
                    if len(streams) < self.streams and sent % self.streams == len(streams):
                        streams.append(self._stream[op.method](timeout=self.stream_deadline))
                    call = streams[sent % len(streams)]
                    try:
                        await call.write(op.encode(assembly.scores, first, end))
                    except grpc.RpcError as error:
                        raise _errors.from_rpc_error(error) from None
                    pending.append((call, assembly, first, end))
                    sent += 1
            for call in streams:
                await call.done_writing()
            while pending:
                done = await receive_oldest()
                if done.complete:
                    yield done.result()
        finally:
            for call in streams:
                call.cancel()
