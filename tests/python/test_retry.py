"""retry_unavailable: calls answered UNAVAILABLE are tried again (gRPC's retry policy), the others
not; and an executor failure (pkserve's test flag --inject_batch_failures) is pkserve.Internal.

A forwarding server on loopback stands between the client and pkserve: it answers the first
`failures` TopK calls UNAVAILABLE itself and forwards the rest to pkserve as raw bytes,
passing pkserve's status on."""
import threading
from concurrent import futures

import grpc
import numpy as np
import pytest

import pkserve

TOPK = "/pkserve.v1.SparseMemory/TopK"


class FlakyForwarder(grpc.GenericRpcHandler):
    def __init__(self, upstream_target, failures):
        self.failures = failures
        self.calls = 0
        self._lock = threading.Lock()
        self._channel = grpc.insecure_channel(upstream_target)
        self._upstream = self._channel.unary_unary(TOPK)

    def close(self):
        self._channel.close()

    def service(self, handler_call_details):
        if handler_call_details.method != TOPK:
            return None
        return grpc.unary_unary_rpc_method_handler(self._topk)

    def _topk(self, request_bytes, context):
        with self._lock:
            self.calls += 1
            fail = self.calls <= self.failures
        if fail:
            context.abort(grpc.StatusCode.UNAVAILABLE, "draining (stand-in)")
        try:
            return self._upstream(request_bytes, timeout=30)
        except grpc.RpcError as error:  # pkserve's own status, passed on
            context.abort(error.code(), error.details())


@pytest.fixture
def flaky(server):
    def start(failures):
        handler = FlakyForwarder(server.target, failures)
        forwarder = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        port = forwarder.add_insecure_port("127.0.0.1:0")
        forwarder.start()
        started.append((forwarder, handler))
        return handler, f"127.0.0.1:{port}"

    started = []
    yield start
    # Stopped and closed before the next test: a gRPC server or channel left to the interpreter's
    # exit can hold the exit up.
    for forwarder, handler in started:
        forwarder.stop(None).wait()
        handler.close()


def rows():
    return np.random.default_rng(3).standard_normal((4, 64), dtype=np.float32)


def test_unavailable_answers_are_retried_until_one_succeeds(flaky, server):
    handler, target = flaky(failures=2)
    with pkserve.Client(target, retry_unavailable=True) as client:
        slots, _ = client.topk(rows(), [32, 32], 4)
    assert handler.calls == 3
    with pkserve.Client(server.target) as direct:
        np.testing.assert_array_equal(slots, direct.topk(rows(), [32, 32], 4)[0])


def test_without_retries_unavailable_reaches_the_caller(flaky):
    handler, target = flaky(failures=1)
    with pkserve.Client(target, retry_unavailable=False) as client:
        with pytest.raises(pkserve.Unavailable, match="stand-in"):
            client.topk(rows(), [32, 32], 4)
    assert handler.calls == 1


def test_retries_stop_after_five_attempts(flaky):
    handler, target = flaky(failures=10)
    with pkserve.Client(target, retry_unavailable=True) as client:
        with pytest.raises(pkserve.Unavailable):
            client.topk(rows(), [32, 32], 4)
    assert handler.calls == 5


def test_other_errors_are_not_retried(flaky):
    handler, target = flaky(failures=0)
    with pkserve.Client(target, retry_unavailable=True) as client:
        with pytest.raises(pkserve.InvalidArgument):
            client.topk(rows(), [32, 32], 300)
    assert handler.calls == 1


def test_a_failed_batch_is_internal():
    from conftest import Server
    failing = Server(["--inject_batch_failures=1"])
    try:
        with pkserve.Client(failing.target) as client:
            with pytest.raises(pkserve.Internal):
                client.topk(rows(), [32, 32], 4)
    finally:
        failing.close()


def test_a_stream_whose_server_went_away_raises_unavailable_with_retries_on():
    """The *_many streams are not in gRPC's retry policy: python3-grpcio 1.51 retrying a stream
    whose server had gone away waited forever (here, the server is killed after the client has
    connected and before the stream starts)."""
    from conftest import Server
    doomed = Server([])

    def chunks():
        doomed.stop()
        for seed in range(20):
            yield np.random.default_rng(seed).standard_normal((100, 64), dtype=np.float32)

    outcome = []

    def run(client):
        try:
            outcome.append(list(client.topk_many(chunks(), [32, 32], 4)))
        except pkserve.Error as error:
            outcome.append(error)

    try:
        with pkserve.Client(doomed.target, retry_unavailable=True, chunk_rows=100,
                            max_in_flight=4) as client:
            client.limits()  # connected
            caller = threading.Thread(target=run, args=(client,), daemon=True)
            caller.start()
            caller.join(timeout=30)
            assert not caller.is_alive(), "the stream still waits 30 s after its server died"
        assert len(outcome) == 1 and isinstance(outcome[0], pkserve.Unavailable), outcome
    finally:
        doomed.close()
