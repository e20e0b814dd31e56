"""The single-process GPT that a tensor-parallel one is cut from, and the attention both compute.

It is the reference the tests compare with, and the source of every weight: each rank builds it
from the same seed and keeps its shards (``block.GPT.from_full``). It works on hidden states
(no embedding or head: those are not tensor-parallel here).
"""

from __future__ import annotations

from dataclasses import astuple, dataclass

import torch
import torch.nn.functional as F  # noqa: N812 - as PyTorch writes it
from torch import nn


@dataclass(frozen=True)
class GPTShape:
    """A stack of pre-LN blocks: ``layers`` × (attention over ``heads`` heads + MLP of width ``mlp``)."""

    layers: int
    hidden: int
    heads: int
    mlp: int

    def __post_init__(self) -> None:
        for name, value in zip(("layers", "hidden", "heads", "mlp"), astuple(self)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTShape: {name} must be a positive int, not {value!r}")
        if self.hidden % self.heads:
            raise ValueError(f"GPTShape: hidden {self.hidden} is not divisible by heads {self.heads}")


def causal_attention(qkv: torch.Tensor, heads: int) -> torch.Tensor:
    """``[batch, seq, 3·heads·d]`` (Q, K, V side by side) → ``[batch, seq, heads·d]``, causal, per head."""
    batch, seq, _ = qkv.shape
    q, k, v = (t.reshape(batch, seq, heads, -1).transpose(1, 2) for t in qkv.chunk(3, -1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return out.transpose(1, 2).reshape(batch, seq, -1)


class FullBlock(nn.Module):
    """``x + proj(attention(qkv(ln1(x))))``, then ``x + fc2(gelu(fc1(ln2(x))))``."""

    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.heads = shape.heads
        self.ln1, self.ln2 = nn.LayerNorm(shape.hidden), nn.LayerNorm(shape.hidden)
        self.qkv, self.proj = nn.Linear(shape.hidden, 3 * shape.hidden), nn.Linear(shape.hidden, shape.hidden)
        self.fc1, self.fc2 = nn.Linear(shape.hidden, shape.mlp), nn.Linear(shape.mlp, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.proj(causal_attention(self.qkv(self.ln1(x)), self.heads))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class FullGPT(nn.Module):
    """``shape.layers`` blocks and a final LayerNorm, on ``[batch, seq, hidden]``."""

    def __init__(self, shape: GPTShape) -> None:
        super().__init__()
        self.shape = shape
        self.blocks = nn.ModuleList(FullBlock(shape) for _ in range(shape.layers))
        self.ln_f = nn.LayerNorm(shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)
