"""The server's gRPC status as Python exceptions: one class per status code, all under Error.

Every exception carries the status code (`code`, a grpc.StatusCode) and the server's message
(`message`, which names the field, the value and the limit). Failures of one request inside a stream
(StreamError) raise the same classes as unary calls do. Arguments the client rejects before
sending anything raise ValueError or TypeError instead.
"""
import grpc


class Error(Exception):
    """A call to pkserve failed with a gRPC status other than OK."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return f"{self.code.name}: {self.message}"


class Cancelled(Error):
    code = grpc.StatusCode.CANCELLED


class Unknown(Error):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(Error):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(Error):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(Error):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(Error):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(Error):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(Error):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(Error):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(Error):
    code = grpc.StatusCode.ABORTED


class OutOfRange(Error):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(Error):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(Error):
    code = grpc.StatusCode.INTERNAL


class Unavailable(Error):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(Error):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(Error):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}
_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def error_for(code, message):
    """The exception for a grpc.StatusCode (or its number, as a StreamError carries it)."""
    if isinstance(code, int):
        code = _BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(code, Error)(message, code)


def from_rpc_error(error):
    """The exception for a grpc.RpcError raised by a call (sync or grpc.aio)."""
    return error_for(error.code(), error.details() or "")
