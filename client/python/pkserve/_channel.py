"""What a client's channel is made of, shared by Client and AsyncClient: transport security
(TlsConfig, as the C++ client's TlsOptions), the channel arguments (no message size limit, the
load-balancing policy, gRPC's retry of UNAVAILABLE in the service config, as client/client.cc
sets them), and the standard health check's two messages.
"""
import dataclasses
import json

# The most attempts (the first included) of a call with retry_unavailable, as the C++ client.
RETRY_MAX_ATTEMPTS = 5
# gRPC retries only calls whose request fits its retry buffer: pkserve's default message limit.
RETRY_BUFFER_BYTES = 64 << 20
LB_POLICIES = ("pick_first", "round_robin")
SERVICE = "pkserve.v1.SparseMemory"
# gRPC retries these calls (answered UNAVAILABLE) with retry_unavailable; not the streams: a stream
# retried by python3-grpcio 1.51 after its server went away can wait forever instead of failing
# (the C++ client, on the system gRPC, fails such a stream with UNAVAILABLE).
RETRIED_METHODS = ("TopK", "Lookup", "GetServerInfo")


@dataclasses.dataclass(frozen=True)
class TlsConfig:
    """TLS to the server. ca_file: the PEM CA bundle its certificate must chain to (None: the
    system's roots). cert_file and key_file: a PEM certificate chain and key to present (mutual
    TLS), both or neither. server_name: the name to check the certificate against when it is not
    the target's host."""

    ca_file: str = None
    cert_file: str = None
    key_file: str = None
    server_name: str = None


def _read_pem(path, what):
    try:
        with open(path, "rb") as file:
            pem = file.read()
    except OSError as error:
        raise ValueError(f"{what} {path}: cannot read the file ({error.strerror})") from None
    if b"-----BEGIN " not in pem:
        raise ValueError(f"{what} {path}: not a PEM file (no -----BEGIN line)")
    return pem


def credentials_and_options(grpc_module, tls, lb_policy, retry_unavailable):
    """(channel credentials or None for plaintext, channel options) of a client's settings."""
    if lb_policy is not None and lb_policy not in LB_POLICIES:
        raise ValueError(f"lb_policy must be None, pick_first or round_robin, got {lb_policy!r}")
    options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
    if lb_policy is not None:
        options.append(("grpc.lb_policy_name", lb_policy))
    if retry_unavailable:
        config = {
            "loadBalancingConfig": [{lb_policy or "pick_first": {}}],
            "methodConfig": [{
                "name": [{"service": SERVICE, "method": method} for method in RETRIED_METHODS],
                "retryPolicy": {
                    "maxAttempts": RETRY_MAX_ATTEMPTS, "initialBackoff": "0.05s",
                    "maxBackoff": "1s", "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }],
        }
        options += [("grpc.service_config", json.dumps(config)), ("grpc.enable_retries", 1),
                    ("grpc.per_rpc_retry_buffer_size", RETRY_BUFFER_BYTES)]
    if tls is None or tls is False:
        return None, options
    if tls is True:
        tls = TlsConfig()
    if not isinstance(tls, TlsConfig):
        raise TypeError(f"tls must be None, True or a pkserve.TlsConfig, got {type(tls).__name__}")
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ValueError("the TLS client certificate and key go together: give both (mutual "
                         "TLS) or neither")
    root = _read_pem(tls.ca_file, "TLS CA") if tls.ca_file else None
    cert = _read_pem(tls.cert_file, "TLS client certificate") if tls.cert_file else None
    key = _read_pem(tls.key_file, "TLS client key") if tls.key_file else None
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    credentials = grpc_module.ssl_channel_credentials(
        root_certificates=root, private_key=key, certificate_chain=cert)
    return credentials, options


# grpc.health.v1: HealthCheckRequest {string service = 1}, HealthCheckResponse {ServingStatus
# status = 1}. Encoded here so that the package needs no stubs beyond its own proto.
HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"
SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def encode_health_request(service):
    name = service.encode()
    if not name:
        return b""
    if len(name) > 127:
        raise ValueError(f"health service name of {len(name)} bytes: at most 127")
    return bytes([0x0A, len(name)]) + name


def decode_health_response(data):
    """The status field's name; "UNKNOWN" when it is absent (proto3's default)."""
    status, at = 0, 0
    while at < len(data):
        tag = data[at]
        at += 1
        value, shift = 0, 0
        while True:  # every field of HealthCheckResponse is a varint
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if tag == 0x08:
            status = value
    return SERVING_STATUS.get(status, f"STATUS_{status}")
