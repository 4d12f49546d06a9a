"""The server's statuses as pkserve exceptions, the health check, TLS and mutual TLS."""
import socket
import time

import numpy as np
import pytest

import pkserve

WIDTHS = [16, 16]


def rows(count=4):
    return np.random.default_rng(7).standard_normal((count, sum(WIDTHS)), dtype=np.float32)


def unused_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_every_exception_is_a_pkserve_error_with_its_status_code():
    for cls in (pkserve.InvalidArgument, pkserve.NotFound, pkserve.ResourceExhausted,
                pkserve.DeadlineExceeded, pkserve.Cancelled, pkserve.Unavailable,
                pkserve.Internal, pkserve.Unimplemented):
        assert issubclass(cls, pkserve.Error)
        assert cls("m").code.name == "".join(
            "_" + c if c.isupper() else c.upper() for c in cls.__name__).lstrip("_")


def test_invalid_argument_carries_the_servers_message(server):
    with pkserve.Client(server.target) as client:
        with pytest.raises(pkserve.InvalidArgument) as raised:
            client.topk(rows(), WIDTHS, 300)
    assert raised.value.message == "k must be in [1, 256], got 300"
    assert str(raised.value) == "INVALID_ARGUMENT: k must be in [1, 256], got 300"


def test_bad_factor_widths_are_invalid_argument(server):
    with pkserve.Client(server.target) as client:
        with pytest.raises(pkserve.InvalidArgument, match="factor_widths"):
            client.topk(np.zeros((1, 32), np.float32), [0, 32], 4)


def test_a_message_over_the_servers_limit_is_resource_exhausted(limited_server):
    with pkserve.Client(limited_server.target) as client:
        with pytest.raises(pkserve.ResourceExhausted):
            client.topk(np.ones((290, 64), np.float32), [32, 32], 4)


def test_an_expired_deadline_is_deadline_exceeded(server):
    with pkserve.Client(server.target, deadline=1e-6) as client:
        with pytest.raises(pkserve.DeadlineExceeded):
            client.topk(rows(2048), WIDTHS, 8)


def test_no_server_is_unavailable_with_and_without_retries():
    target = f"127.0.0.1:{unused_port()}"
    for retry in (False, True):
        with pkserve.Client(target, retry_unavailable=retry, deadline=10) as client:
            with pytest.raises(pkserve.Unavailable):
                client.topk(rows(), WIDTHS, 4)


def test_lookup_of_an_unknown_memory_is_not_found(server):
    with pkserve.Client(server.target) as client:
        try:
            client.lookup("no_such_memory", rows(), 4)
        except pkserve.Unimplemented as error:
            pytest.skip(f"the server answers Lookup UNIMPLEMENTED ({error.message!r})")
        except pkserve.NotFound as error:
            assert "no_such_memory" in error.message
        else:
            pytest.fail("a lookup of an unknown memory succeeded")


def test_arguments_the_client_can_check_raise_before_sending(server):
    with pkserve.Client(server.target) as client:
        with pytest.raises(ValueError, match="sum to 32"):
            client.topk(np.zeros((1, 31), np.float32), WIDTHS, 4)
        with pytest.raises(TypeError, match="float64"):
            client.topk(np.zeros((1, 32)), WIDTHS, 4)
        with pytest.raises(ValueError, match="lb_policy"):
            pkserve.Client(server.target, lb_policy="random")


def test_health_reports_serving_for_the_server_and_the_service(server):
    with pkserve.Client(server.target) as client:
        assert client.health() == "SERVING"
        assert client.health("pkserve.v1.SparseMemory") == "SERVING"
        with pytest.raises(pkserve.NotFound):
            client.health("no.such.Service")


def test_round_robin_over_two_servers_answers_from_both(server, limited_server):
    target = f"ipv4:{server.target},{limited_server.target}"
    # round_robin picks among the subchannels that are READY: the first calls may all reach the
    # server that connected first, so ask until both have answered (bounded in count and time).
    seen = set()
    deadline = time.monotonic() + 10
    with pkserve.Client(target, lb_policy="round_robin") as client:
        for _ in range(400):
            seen.add(client.info().limits.max_rows_per_request)
            if len(seen) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        # Both connected: the next calls reach both.
        later = [client.info().limits.max_rows_per_request for _ in range(4)]
    assert seen == {4096, 300}
    assert set(later) == {4096, 300}


@pytest.fixture(scope="module")
def tls_server(certs):
    from conftest import Server
    running = Server([f"--tls_cert={certs / 'server.pem'}", f"--tls_key={certs / 'server.key'}"])
    yield running
    running.close()


@pytest.fixture(scope="module")
def mtls_server(certs):
    from conftest import Server
    running = Server([f"--tls_cert={certs / 'server.pem'}", f"--tls_key={certs / 'server.key'}",
                      f"--tls_client_ca={certs / 'ca.pem'}"])
    yield running
    running.close()


def test_tls_with_the_servers_ca_answers(tls_server, certs):
    tls = pkserve.TlsConfig(ca_file=str(certs / "ca.pem"))
    with pkserve.Client(tls_server.target, tls=tls) as client:
        slots, _ = client.topk(rows(), WIDTHS, 4)
        assert slots.shape == (4, 4)
    tls = pkserve.TlsConfig(ca_file=str(certs / "ca.pem"), server_name="localhost")
    with pkserve.Client(tls_server.target.replace("127.0.0.1", "localhost"), tls=tls) as client:
        assert client.health() == "SERVING"


def test_tls_refuses_plaintext_and_an_unrelated_ca(tls_server, certs):
    with pkserve.Client(tls_server.target, retry_unavailable=False, deadline=10) as client:
        with pytest.raises(pkserve.Unavailable):
            client.topk(rows(), WIDTHS, 4)
    tls = pkserve.TlsConfig(ca_file=str(certs / "other_ca.pem"))
    with pkserve.Client(tls_server.target, tls=tls, retry_unavailable=False, deadline=10) as client:
        with pytest.raises(pkserve.Unavailable):
            client.topk(rows(), WIDTHS, 4)


def test_mutual_tls_needs_a_client_certificate_from_the_servers_ca(mtls_server, certs):
    good = pkserve.TlsConfig(ca_file=str(certs / "ca.pem"), cert_file=str(certs / "client.pem"),
                             key_file=str(certs / "client.key"))
    with pkserve.Client(mtls_server.target, tls=good) as client:
        slots, _ = client.topk(rows(), WIDTHS, 4)
        assert slots.shape == (4, 4)
    for tls in (pkserve.TlsConfig(ca_file=str(certs / "ca.pem")),
                pkserve.TlsConfig(ca_file=str(certs / "ca.pem"),
                                  cert_file=str(certs / "other_client.pem"),
                                  key_file=str(certs / "other_client.key"))):
        with pkserve.Client(mtls_server.target, tls=tls, retry_unavailable=False,
                            deadline=10) as client:
            with pytest.raises(pkserve.Unavailable):
                client.topk(rows(), WIDTHS, 4)


def test_tls_files_are_checked_when_the_client_is_made(certs, tmp_path):
    with pytest.raises(ValueError, match="TLS CA .*cannot read"):
        pkserve.Client("127.0.0.1:1", tls=pkserve.TlsConfig(ca_file=str(tmp_path / "none.pem")))
    (tmp_path / "not.pem").write_text("hello")
    with pytest.raises(ValueError, match="not a PEM file"):
        pkserve.Client("127.0.0.1:1", tls=pkserve.TlsConfig(ca_file=str(tmp_path / "not.pem")))
    with pytest.raises(ValueError, match="both"):
        pkserve.Client("127.0.0.1:1", tls=pkserve.TlsConfig(cert_file=str(certs / "client.pem")))
