"""pkserve.torch.RemoteMemory: a PyTorch module that stands where a product-key memory layer's
lookup stood, and asks pkserve for it.

forward(scores) takes the layer's score rows [..., heads, sum(factor_widths)] (float32 or
bfloat16, any device) and returns the memory output [..., dim] on the scores' device in their
dtype: per head the top-k slots of its row, softmax over their scores, the weighted sum of those
slots' value rows, the heads summed (SPEC.md, the memory lookup contract). Inference only: the
values live on the server, so there is no gradient; scores that require one raise RuntimeError
while gradients are enabled. Large batches are split within the server's limits (lookup_many).
"""
import torch

from pkserve.client import Client


class RemoteMemory(torch.nn.Module):
    """RemoteMemory(client_or_target, memory, k, heads): `memory` a name the server holds, `k`
    slots per head, `heads` score rows per output. client_or_target: a pkserve.Client, or a
    target for a new one."""

    def __init__(self, client_or_target, memory, k, heads=1):
        super().__init__()
        if isinstance(client_or_target, Client):
            self.client = client_or_target
        else:
            self.client = Client(client_or_target)
        self.memory = memory
        self.k = int(k)
        self.heads = int(heads)
        self._memory_info = None

    @property
    def memory_info(self):
        """The server's MemoryInfo of `memory` (read once); ValueError when
        the server does not hold it."""
        if self._memory_info is None:
            for memory in self.client.info().memories:
                if memory.name == self.memory:
                    self._memory_info = memory
                    break
            else:
                raise ValueError(f"the server at {self.client.target} holds no memory "
                                 f"'{self.memory}'")
        return self._memory_info

    def extra_repr(self):
        return f"memory={self.memory!r}, k={self.k}, heads={self.heads}"

    def forward(self, scores):
        if scores.requires_grad and torch.is_grad_enabled():
            raise RuntimeError(
                "pkserve.torch.RemoteMemory is inference only (the values live on the server, "
                "no gradient flows through them): call it under torch.no_grad() or "
                "torch.inference_mode(), or pass scores.detach()")
        if scores.dim() < 2 or scores.shape[-2] != self.heads:
            raise ValueError(f"scores of shape {tuple(scores.shape)}: expected "
                             f"[..., heads={self.heads}, sum(factor_widths)]")
        if scores.dtype not in (torch.float32, torch.bfloat16):
            raise TypeError(f"scores must be torch.float32 or torch.bfloat16, got {scores.dtype}")
        with torch.no_grad():
            lead = tuple(scores.shape[:-2])
            rows = scores.reshape(-1, scores.shape[-1])
            outputs = self.client.lookup_many(self.memory, rows, self.k, self.heads,
                                              output_dtype=scores.dtype)
            return outputs.reshape(lead + (outputs.shape[-1],))
