"""pkserve: the Python client of the pkserve service (product-key top-k and hosted-memory
lookups), numpy in and numpy out (or torch tensors), and pkserve.torch.RemoteMemory, a PyTorch
module that calls it.

    import numpy as np, pkserve
    client = pkserve.Client("127.0.0.1:50051")
    scores = np.random.default_rng(0).standard_normal((8, 2048), dtype=np.float32)
    slots, values = client.topk(scores, widths=[1024, 1024], k=64)
    outputs = client.lookup("layer0", scores, k=64)   # a memory the server holds
"""
from pkserve._channel import TlsConfig
from pkserve._errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded, Error,
                             FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                             PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                             Unimplemented, Unknown)
from pkserve._tensors import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from pkserve.aio import AsyncClient
from pkserve.client import Client

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AlreadyExists", "AsyncClient", "Cancelled", "Client", "DataLoss",
    "DeadlineExceeded", "Error", "FailedPrecondition", "Internal", "InvalidArgument", "NotFound",
    "OutOfRange", "PermissionDenied", "ResourceExhausted", "TlsConfig", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown", "bfloat16_bits_to_float32",
    "float32_to_bfloat16_bits",
]
