"""pkserve.Client: the synchronous client, over one gRPC channel, safe to share between threads.

topk / lookup send one request. topk_many / lookup_many take any number of rows: they split each
input into requests within the server's limits (from info(), read once), send them over up to
`streams` streams with at most `max_in_flight` requests unanswered at a time, and put the answers
together in input order. Given one array they return one result; given an iterator of arrays they
yield one result per array, reading the iterator only as far as the window needs.
"""
import collections
import queue
import threading

import grpc

from pkserve import _channel
from pkserve import _errors
from pkserve import _ops
from pkserve import _tensors
from pkserve.v1 import pkserve_pb2 as pb
from pkserve.v1 import pkserve_pb2_grpc as pb_grpc

_SERVICE = f"/{_channel.SERVICE}/"  # the prefix of its methods' paths


def bind_channel(client, channel, target, deadline, stream_deadline, max_in_flight, streams,
                 chunk_rows):
    """Sets what Client and AsyncClient share on `client`: the channel, the settings, and the
    stubs of the health check and of each operation's unary and stream calls."""
    client._channel = channel
    client.target = target
    client.deadline = deadline
    client.stream_deadline = stream_deadline
    client.max_in_flight = max(1, int(max_in_flight))
    client.streams = max(1, int(streams))
    client.chunk_rows = max(1, int(chunk_rows))
    client._stub = pb_grpc.SparseMemoryStub(channel)
    client._health = channel.unary_unary(
        _channel.HEALTH_CHECK_METHOD,
        request_serializer=_channel.encode_health_request,
        response_deserializer=_channel.decode_health_response)
    client._unary = {}
    client._stream = {}
    for op in (_ops.TopK, _ops.Lookup):
        # Requests arrive serialized (_ops); answers are parsed by the generated classes.
        client._unary[op.method] = channel.unary_unary(
            _SERVICE + op.method, response_deserializer=op.response_type.FromString)
        client._stream[op.method] = channel.stream_stream(
            _SERVICE + op.stream_method,
            response_deserializer=op.stream_response_type.FromString)
    client._limits = None
_END = object()  # closes a stream's send side


def is_many_input(scores):
    """An array or tensor (or a list, taken as an array) is one input; any other iterable or
    async iterable is a sequence of inputs."""
    if _tensors.is_torch_tensor(scores) or hasattr(scores, "__array_interface__"):
        return False
    if isinstance(scores, (list, tuple)):
        return False
    return hasattr(scores, "__iter__") or hasattr(scores, "__aiter__")


class _Stream:
    """One TopKStream/LookupStream: requests go in through a queue that gRPC's sending thread
    drains; answers are read in order by the caller's thread."""

    def __init__(self, multicallable, timeout):
        self.requests = queue.SimpleQueue()
        self.call = multicallable(iter(self.requests.get, _END), timeout=timeout)

    def send(self, wire):
        self.requests.put(wire)

    def close_send(self):
        self.requests.put(_END)

    def receive(self):
        try:
            return next(self.call)
        except StopIteration:
            raise _errors.Internal("the stream ended before answering every request") from None
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None


class Client:
    """A client of one pkserve target ("host:port", "dns:///name:port", "ipv4:a:p,b:p", ...).

    tls: None (plaintext), True (TLS, the system's roots) or a pkserve.TlsConfig.
    deadline: seconds each unary call may take (None: no deadline); *_many streams take
      `stream_deadline` (None by default: the stream lasts as long as its input).
    retry_unavailable: gRPC retries topk, lookup and limits calls answered UNAVAILABLE (a
      replica draining or gone), at most 5 attempts, backoff from 50 ms doubling to 1 s, within
      the deadline. Not the *_many streams: a stream that python3-grpcio 1.51 retried after its
      server went away could wait forever; they raise pkserve.Unavailable instead.
    lb_policy: None, "pick_first" or "round_robin" (every address of the target in turn).
    """

    def __init__(self, target, *, tls=None, deadline=30.0, retry_unavailable=True,
                 lb_policy=None, max_in_flight=8, streams=2, chunk_rows=1024,
                 stream_deadline=None):
        if not target:
            raise ValueError("target must not be empty")
        credentials, options = _channel.credentials_and_options(
            grpc, tls, lb_policy, retry_unavailable)
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        bind_channel(self, self._channel, target, deadline, stream_deadline, max_in_flight,
                     streams, chunk_rows)
        self._limits_lock = threading.Lock()

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def info(self):
        """The server's ServerInfo (pkserve_pb2.ServerInfo): version, backend, limits, batching,
        memories."""
        try:
            return self._stub.GetServerInfo(pb.ServerInfoRequest(), timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None

    def health(self, service=""):
        """The standard health check of `service` ("" the server as a whole, or
        "pkserve.v1.SparseMemory"): "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN"."""
        try:
            return self._health(service, timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None

    def topk(self, scores, widths, k, *, dtype=None, request_id=""):
        """The top-k slots of every score row: (slots [..., kk], values [..., kk]), each row in
        slot order; scores [..., sum(widths)] (see pkserve._tensors for the accepted kinds)."""
        return self._call(_ops.TopK(widths, k), scores, dtype, request_id)

    def lookup(self, memory, scores, k, heads=1, *, return_slots=False, output_dtype=None,
               dtype=None, request_id=""):
        """The memory layer's outputs for score rows over `memory`: [rows / heads, dim] for
        scores [rows, W], [..., dim] for scores [..., heads, W]; with return_slots also each row's
        slots and float32 weights [..., kk]. output_dtype None: the memory's dtype."""
        op = _ops.Lookup(memory, k, heads, return_slots, output_dtype)
        return self._call(op, scores, dtype, request_id)

    def topk_many(self, scores, widths, k, *, dtype=None):
        """topk over any number of rows, or over an iterator of arrays (yielding one result per
        array, in order)."""
        return self._many(_ops.TopK(widths, k), scores, dtype)

    def lookup_many(self, memory, scores, k, heads=1, *, return_slots=False, output_dtype=None,
                    dtype=None):
        """lookup over any number of rows, or over an iterator of arrays (yielding one result per
        array, in order)."""
        op = _ops.Lookup(memory, k, heads, return_slots, output_dtype)
        return self._many(op, scores, dtype)

    def limits(self):
        """The server's Limits, read once per client."""
        with self._limits_lock:
            if self._limits is None:
                self._limits = self.info().limits
            return self._limits

    def _call(self, op, scores, dtype, request_id):
        scores = _tensors.as_scores(scores, dtype)
        op.check(scores)
        try:
            response = self._unary[op.method](op.encode(scores, 0, scores.rows, request_id),
                                              timeout=self.deadline)
        except grpc.RpcError as error:
            raise _errors.from_rpc_error(error) from None
        assembly = _ops.Assembly(op, scores)
        assembly.add(response, 0, scores.rows)
        return assembly.result()

    def _many(self, op, scores, dtype):
        if is_many_input(scores):
            return self._run(op, scores, dtype)
        results = self._run(op, [scores], dtype)
        try:
            return next(results)
        finally:
            results.close()

    def _run(self, op, inputs, dtype):
        limits = self.limits()
        chunks = _ops.iter_chunks(
            op, inputs, dtype,
            lambda s: _ops.rows_per_request(limits, s, op, self.chunk_rows))
        streams = []
        pending = collections.deque()  # (stream, assembly, first_row, end_row), in send order
        sent = 0

        def receive_oldest():
            stream, assembly, first, end = pending.popleft()
            assembly.add(_ops.stream_answer(op, stream.receive()), first, end)
            return assembly

        try:
            for assembly, first, end in chunks:
                if len(pending) >= self.max_in_flight:
                    done = receive_oldest()
                    if done.complete:
                        yield done.result()
                if len(streams) < self.streams and sent % self.streams == len(streams):
                    streams.append(_Stream(self._stream[op.method], self.stream_deadline))
                stream = streams[sent % len(streams)]
                stream.send(op.encode(assembly.scores, first, end))
                pending.append((stream, assembly, first, end))
                sent += 1
            for stream in streams:
                stream.close_send()
            while pending:
                done = receive_oldest()
                if done.complete:
                    yield done.result()
        finally:
            for stream in streams:
                stream.close_send()  # lets gRPC's sending thread end if it still waits
                stream.call.cancel()
