"""The two operations, TopK and Lookup, as the clients send them: a request's wire bytes for a
range of score rows, the response's arrays checked against what was asked, and the assembly of
the answers to an input's chunks into one result in the caller's kind and shape.

Requests are serialized here, not through the generated message class: the small fields go
through pkserve_pb2, and the scores are appended as their field (tag, length, raw bytes) straight
from the caller's memory, so a request's scores are copied once, into the message. Protobuf
accepts fields in any order.
"""
import numpy as np

from pkserve import _errors
from pkserve import _tensors
from pkserve.v1 import pkserve_pb2 as pb

# Field numbers of `scores` (proto/pkserve/v1/pkserve.proto), as length-delimited tags.
_TOPK_SCORES_TAG = bytes([(5 << 3) | 2])
_LOOKUP_SCORES_TAG = bytes([(6 << 3) | 2])
# Room left in a message for its fields other than the scores.
_MESSAGE_OVERHEAD_BYTES = 4096


def _varint(value):
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _with_scores(header, tag, scores, first_row, end_row):
    payload = scores.wire_bytes(first_row, end_row)
    return b"".join((header, tag, _varint(payload.nbytes), payload))


def _array(data, dtype, count, what):
    array = np.frombuffer(data, dtype=dtype)
    if array.size != count:
        raise _errors.Internal(f"the response's {what} hold {array.size} elements, expected {count}")
    return array


def _element_type(dtype):
    if dtype not in _tensors.ELEMENT_BYTES:
        raise _errors.Internal(f"the response's dtype is {dtype}, neither float32 nor bfloat16")
    return np.uint16 if dtype == _tensors.BFLOAT16 else np.float32


def _positive(value, name):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


class TopK:
    method = "TopK"
    stream_method = "TopKStream"
    response_type = pb.TopKResponse
    stream_response_type = pb.TopKStreamResponse
    row_group = 1  # rows per unit a request may be split at

    def __init__(self, widths, k):
        self.widths = [int(w) for w in widths]
        self.k = _positive(k, "k")

    def check(self, scores):
        if scores.width != sum(self.widths):
            raise ValueError(f"scores rows hold {scores.width} scores, but factor_widths "
                             f"{self.widths} sum to {sum(self.widths)}")

    def encode(self, scores, first_row, end_row, request_id=""):
        header = pb.TopKRequest(factor_widths=self.widths, k=self.k, dtype=scores.wire_dtype,
                                rows=end_row - first_row, request_id=request_id)
        return _with_scores(header.SerializeToString(), _TOPK_SCORES_TAG, scores, first_row,
                            end_row)

    def parts(self, response, rows):
        if response.rows != rows:
            raise _errors.Internal(f"the response has {response.rows} rows, expected {rows}")
        kk = response.kk
        values = _array(response.values, _element_type(response.dtype), rows * kk, "values")
        slots = _array(response.slots, "<u4", rows * kk, "slots")
        return {"slots": slots.reshape(rows, kk), "values": values.reshape(rows, kk)}, response.dtype

    def result(self, parts, wire_dtype, scores):
        lead = scores.shape[:-1]
        kk = parts["slots"].shape[1]
        kind = scores.kind
        return (kind.slots(parts["slots"].reshape(lead + (kk,))),
                kind.values(parts["values"].reshape(lead + (kk,)), wire_dtype))


class Lookup:
    method = "Lookup"
    stream_method = "LookupStream"
    response_type = pb.LookupResponse
    stream_response_type = pb.LookupStreamResponse

    def __init__(self, memory, k, heads=1, return_slots=False, output_dtype=None):
        if not isinstance(memory, str) or not memory:
            raise ValueError(f"memory must be a non-empty name, got {memory!r}")
        self.memory = memory
        self.k = _positive(k, "k")
        self.heads = _positive(heads, "heads")
        self.row_group = self.heads
        self.return_slots = bool(return_slots)
        self.output_dtype = _tensors.parse_dtype(output_dtype, "output_dtype")

    def check(self, scores):
        if scores.rows % self.heads:
            raise ValueError(f"scores hold {scores.rows} rows, not a multiple of heads "
                             f"{self.heads}")
        if len(scores.shape) >= 3 and scores.shape[-2] != self.heads:
            raise ValueError(f"scores of shape {scores.shape}: axis -2 must be heads "
                             f"({self.heads})")
        if len(scores.shape) == 1 and self.heads != 1:
            raise ValueError(f"one score row cannot make an output of {self.heads} heads")

    def encode(self, scores, first_row, end_row, request_id=""):
        header = pb.LookupRequest(
            memory=self.memory, k=self.k, dtype=scores.wire_dtype, rows=end_row - first_row,
            heads=self.heads, output_dtype=self.output_dtype or pb.DTYPE_UNSPECIFIED,
            return_slots=self.return_slots, request_id=request_id)
        return _with_scores(header.SerializeToString(), _LOOKUP_SCORES_TAG, scores, first_row,
                            end_row)

    def parts(self, response, rows):
        outputs = rows // self.heads
        if response.outputs != outputs:
            raise _errors.Internal(
                f"the response has {response.outputs} outputs, expected {outputs}")
        dim = response.dim
        values = _array(response.values, _element_type(response.dtype), outputs * dim, "values")
        parts = {"outputs": values.reshape(outputs, dim)}
        if self.return_slots:
            kk = response.kk
            parts["slots"] = _array(response.slots, "<u4", rows * kk, "slots").reshape(rows, kk)
            parts["weights"] = _array(response.weights, "<f4", rows * kk,
                                      "weights").reshape(rows, kk)
        return parts, response.dtype

    def result(self, parts, wire_dtype, scores):
        kind = scores.kind
        shape = scores.shape
        dim = parts["outputs"].shape[1]
        if len(shape) == 1:
            out_shape = (dim,)
        elif len(shape) == 2:
            out_shape = (shape[0] // self.heads, dim)
        else:
            out_shape = shape[:-2] + (dim,)
        outputs = kind.values(parts["outputs"].reshape(out_shape), wire_dtype)
        if not self.return_slots:
            return outputs
        kk = parts["slots"].shape[1]
        lead = shape[:-1]
        return (outputs, kind.slots(parts["slots"].reshape(lead + (kk,))),
                kind.floats(parts["weights"].reshape(lead + (kk,))))


class Assembly:
    """The answers to one input's requests, put together in row order. Rows [first, end) of a
    request map to output units [first / group, end / group), group the op's rows per output for
    outputs and 1 for per-row parts."""

    def __init__(self, op, scores):
        self.op = op
        self.scores = scores
        self.rows_done = 0
        self.parts = None
        self.wire_dtype = None

    def add(self, response, first_row, end_row):
        parts, wire_dtype = self.op.parts(response, end_row - first_row)
        if self.parts is None:
            self.wire_dtype = wire_dtype
            if first_row == 0 and end_row == self.scores.rows:
                self.parts = {name: part.copy() for name, part in parts.items()}
                self.rows_done = end_row
                return
            self.parts = {}
            for name, part in parts.items():
                units = self._units(name, self.scores.rows)
                self.parts[name] = np.empty((units,) + part.shape[1:], dtype=part.dtype)
        for name, part in parts.items():
            begin = self._units(name, first_row)
            self.parts[name][begin:begin + part.shape[0]] = part
        self.rows_done += end_row - first_row

    def _units(self, name, rows):
        return rows // self.op.row_group if name == "outputs" else rows

    @property
    def complete(self):
        return self.parts is not None and self.rows_done == self.scores.rows

    def result(self):
        return self.op.result(self.parts, self.wire_dtype, self.scores)


def rows_per_request(limits, scores, op, chunk_rows):
    """The most rows of `scores` one request of `op` may carry within the server's limits
    (max_rows_per_request, max_message_bytes), at most chunk_rows, a multiple of the op's rows
    per output (at least one such group)."""
    row_bytes = scores.width * _tensors.ELEMENT_BYTES[scores.wire_dtype]
    most = min(chunk_rows, limits.max_rows_per_request or chunk_rows)
    if limits.max_message_bytes:
        most = min(most, max(1, (limits.max_message_bytes - _MESSAGE_OVERHEAD_BYTES) // row_bytes))
    group = op.row_group
    return max(group, most // group * group)


def iter_chunks(op, inputs, dtype, step_for):
    """(assembly, first_row, end_row) of every request for `inputs` (an iterable of caller
    arrays), in input order; step_for(scores) gives a request's most rows. An input without rows
    still makes one request, which the server refuses as it refuses such a unary call."""
    for raw in inputs:
        scores = _tensors.as_scores(raw, dtype)
        op.check(scores)
        assembly = Assembly(op, scores)
        if scores.rows == 0:
            yield assembly, 0, 0
            continue
        step = step_for(scores)
        for first in range(0, scores.rows, step):
            yield assembly, first, min(first + step, scores.rows)


def stream_answer(op, message):
    """The result inside a TopKStreamResponse / LookupStreamResponse, or its error raised."""
    if message.WhichOneof("outcome") == "error":
        raise _errors.error_for(message.error.code, message.error.message)
    if message.WhichOneof("outcome") != "result":
        raise _errors.Internal("a stream answer holds neither a result nor an error")
    return message.result
