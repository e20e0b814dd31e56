"""Tensor-parallel layers (Megatron) whose allreduces hide behind computation (Domino).

Needs torch; ``import worker`` does not import this package. See docs/tp.md.
"""

from worker.tp.block import GPT, GPTBlock, Sublayer, check_layout
from worker.tp.comm import NoComm, TorchComm, TPComm
from worker.tp.layers import ColumnParallelLinear, RowParallelLinear
from worker.tp.mappings import HandleTable
from worker.tp.reference import FullGPT, GPTShape

__all__ = ["GPT", "GPTBlock", "Sublayer", "check_layout", "NoComm", "TorchComm", "TPComm",
           "ColumnParallelLinear", "RowParallelLinear", "HandleTable", "FullGPT", "GPTShape"]
