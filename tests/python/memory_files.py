"""Memory files for pkserve --memory, written here: safetensors (an 8-byte little-endian header
length, the header JSON, the raw tensor bytes) with one tensor `values` [slots, dim] and the
factor widths in __metadata__, and .npy ('<f4', or bfloat16 patterns as '<u2')."""
import json
import struct

import numpy as np


def write_safetensors(path, values, widths):
    """values: float32, or uint16 bfloat16 patterns, [slots, dim]."""
    values = np.ascontiguousarray(values)
    dtype = {np.dtype(np.float32): "F32", np.dtype(np.uint16): "BF16"}[values.dtype]
    header = {
        "__metadata__": {"factor_widths": ",".join(str(w) for w in widths)},
        "values": {"dtype": dtype, "shape": list(values.shape),
                   "data_offsets": [0, values.nbytes]},
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)))
        file.write(text)
        file.write(values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes())


def write_npy(path, values):
    np.save(path, np.ascontiguousarray(values))
