"""Score tensors in, result tensors out: the caller's numpy arrays or torch tensors as wire bytes,
and the wire's bytes back as arrays of the caller's kind.

Accepted scores (the last axis is a row of sum(factor_widths) scores, the others count rows):
  numpy float32   sent as float32, or as bfloat16 with dtype="bfloat16" (round to nearest even)
  numpy uint16    bfloat16 bit patterns, sent as they are
  torch.float32 / torch.bfloat16 tensors on any device; a contiguous CPU tensor is sent from its
                  own memory (no copy before the message is built), another is copied to the CPU
Results follow the caller: float32 callers get float32 (bfloat16 results widened, exactly);
bfloat16 callers get bfloat16 results as uint16 bit patterns (numpy) or torch.bfloat16, and
float32 results as float32; torch callers get tensors on the scores' device, slots as int64
(torch has no uint32), numpy callers slots as uint32.
"""
import sys

import numpy as np

from pkserve.v1 import pkserve_pb2 as pb

FLOAT32 = pb.DTYPE_FLOAT32
BFLOAT16 = pb.DTYPE_BFLOAT16
ELEMENT_BYTES = {FLOAT32: 4, BFLOAT16: 2}


def float32_to_bfloat16_bits(values):
    """kernels/numeric.h FloatToBf16 on every element: round to nearest even, overflow to
    infinity, NaN stays NaN (its high half with the quiet bit set)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) >> np.uint32(16)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(is_nan, quiet_nan, rounded).astype(np.uint16)


def bfloat16_bits_to_float32(bits):
    """The float32 value of each bfloat16 pattern (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _torch():
    return sys.modules.get("torch")


def is_torch_tensor(value):
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def parse_dtype(dtype, what="dtype"):
    """None, or the wire DType named by "float32"/"f32"/"bfloat16"/"bf16", np.float32 or a torch
    dtype."""
    if dtype is None:
        return None
    torch = _torch()
    if torch is not None and isinstance(dtype, torch.dtype):
        if dtype == torch.float32:
            return FLOAT32
        if dtype == torch.bfloat16:
            return BFLOAT16
    elif isinstance(dtype, str):
        name = dtype.lower()
        if name in ("float32", "f32"):
            return FLOAT32
        if name in ("bfloat16", "bf16"):
            return BFLOAT16
    elif np.dtype(dtype) == np.float32:
        return FLOAT32
    raise ValueError(f"{what} must be float32 or bfloat16, got {dtype!r}")


class Kind:
    """What the caller gave: numpy or torch (with its device), float32 or bfloat16."""

    def __init__(self, torch_device=None, bfloat16=False):
        self.torch_device = torch_device
        self.bfloat16 = bfloat16

    def values(self, raw, wire_dtype):
        """raw: a numpy array of the wire's elements (uint16 bfloat16 patterns, or float32)."""
        as_bits = wire_dtype == BFLOAT16 and self.bfloat16
        if wire_dtype == BFLOAT16 and not as_bits:
            raw = bfloat16_bits_to_float32(raw)
        if self.torch_device is None:
            return raw
        torch = _torch()
        if as_bits:
            return torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16).to(self.torch_device)
        return torch.from_numpy(raw).to(self.torch_device)

    def slots(self, slots):
        if self.torch_device is None:
            return slots
        return _torch().from_numpy(slots.astype(np.int64)).to(self.torch_device)

    def floats(self, values):
        if self.torch_device is None:
            return values
        return _torch().from_numpy(values).to(self.torch_device)


class Scores:
    """Score rows ready for the wire: `data` a C-contiguous [rows, width] numpy array of the wire
    dtype's elements (float32, or uint16 bfloat16 patterns), `shape` the caller's shape."""

    def __init__(self, data, wire_dtype, shape, kind):
        self.data = data
        self.wire_dtype = wire_dtype
        self.shape = shape
        self.kind = kind

    @property
    def rows(self):
        return self.data.shape[0]

    @property
    def width(self):
        return self.data.shape[1]

    def wire_bytes(self, first_row, end_row):
        return memoryview(self.data[first_row:end_row]).cast("B")


def as_scores(scores, dtype=None):
    """Scores from a numpy array (float32 or uint16 bfloat16 patterns) or a torch tensor
    (float32 or bfloat16); `dtype` the wire type (None: the input's own)."""
    wire = parse_dtype(dtype)
    if is_torch_tensor(scores):
        torch = _torch()
        if scores.dtype not in (torch.float32, torch.bfloat16):
            raise TypeError(f"scores must be torch.float32 or torch.bfloat16, got {scores.dtype}")
        kind = Kind(torch_device=scores.device, bfloat16=scores.dtype == torch.bfloat16)
        tensor = scores.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        tensor = tensor.contiguous()
        if tensor.dtype == torch.bfloat16:
            array = tensor.view(torch.int16).numpy().view(np.uint16)
        else:
            array = tensor.numpy()
    else:
        array = np.asarray(scores)
        if array.dtype == np.float32:
            kind = Kind(bfloat16=False)
        elif array.dtype == np.uint16:
            kind = Kind(bfloat16=True)
        else:
            raise TypeError("scores must be float32, or uint16 bfloat16 bit patterns, got "
                            f"{array.dtype} (convert with .astype(np.float32))")
    if array.ndim < 1:
        raise ValueError("scores must have at least one axis (a row of scores)")
    own = BFLOAT16 if array.dtype == np.uint16 else FLOAT32
    wire = own if wire is None else wire
    if wire == BFLOAT16 and own == FLOAT32:
        array = float32_to_bfloat16_bits(array)
    elif wire == FLOAT32 and own == BFLOAT16:
        array = bfloat16_bits_to_float32(array)
    shape = tuple(array.shape)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    data = np.ascontiguousarray(array).reshape(rows, shape[-1])
    return Scores(data, wire, shape, kind)
