"""The autograd pieces of tensor parallelism: Megatron's f and g, and Domino's split of them.

Megatron (Shoeybi et al. 2019, section 3) puts two conjugate operators around each pair of
parallel linears: **f** before a column-parallel linear (identity forward, allreduce of the input
gradient backward) and **g** after a row-parallel one (allreduce forward, identity backward).
Both block on their allreduce.

Domino (Wang et al. 2024; DeepSpeed PR #7178) cuts each into a *start* and a *wait* so that the
allreduce runs while other micro-batches compute:

- forward, g: ``RowLinearStart`` computes the row linear's partial output and starts its
  allreduce; ``WaitReduce``, placed just before the output's first use, waits for it.
- backward, f: ``ColumnLinearAsyncDgrad``'s backward computes the input gradient, starts its
  allreduce, and only then computes the weight gradient; ``WaitGrad``, an identity placed on the
  column linear's input in forward, waits in backward, when autograd reaches it. Autograd runs
  the ready node created last in forward first, so the forward order of the micro-batches
  decides what runs in between (``block.GPT``).

A tensor in flight has exactly one reader: its wait. The handles live in a ``HandleTable`` that
the model owns, keyed by what they reduce, so two models never share them.
"""

from __future__ import annotations

from collections.abc import Hashable

import torch
import torch.nn.functional as F  # noqa: N812 - as PyTorch writes it
from torch.autograd import Function

from worker.tp.comm import Handle, TPComm


class HandleTable:
    """The allreduces a model has in flight, by key; ``trace`` (a list) records every event in order.

    Events: ("start", key), ("wait", key) once complete, and what the pieces note between them
    ("column" in forward, "wgrad" and "row-backward" in backward).
    """

    def __init__(self, comm: TPComm, trace: list[tuple[str, Hashable]] | None = None) -> None:
        self.comm = comm
        self.trace = trace
        self._handles: dict[Hashable, Handle] = {}

    def start(self, key: Hashable, tensor: torch.Tensor) -> None:
        if key in self._handles:
            raise RuntimeError(f"tensor parallel: an allreduce {key!r} is already in flight")
        self.note("start", key)
        self._handles[key] = self.comm.allreduce_async(tensor)

    def wait(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is None:
            raise RuntimeError(f"tensor parallel: no allreduce {key!r} in flight to wait for")
        handle.wait()
        self.note("wait", key)

    def note(self, event: str, key: Hashable) -> None:
        if self.trace is not None:
            self.trace.append((event, key))

    @property
    def in_flight(self) -> list[Hashable]:
        return list(self._handles)


def _allreduce(tensor: torch.Tensor, comm: TPComm) -> torch.Tensor:
    comm.allreduce_async(tensor).wait()
    return tensor


class CopyToTP(Function):
    """f: identity forward; backward, the input gradient summed over the group (blocking)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, comm: TPComm) -> torch.Tensor:
        ctx.comm = comm
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        # The incoming gradient is the column GEMM's fresh dX: summed in place, as Megatron does.
        return _allreduce(grad.contiguous(), ctx.comm), None


class ReduceFromTP(Function):
    """g: forward, the partial outputs summed over the group (blocking); identity backward."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor, comm: TPComm) -> torch.Tensor:
        ctx.mark_dirty(partial)
        return _allreduce(partial, comm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def _weight_grads(grad: torch.Tensor, x: torch.Tensor, with_bias: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """dW = gradᵀ·x over every leading dimension, and db."""
    flat_grad, flat_x = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
    return flat_grad.t() @ flat_x, flat_grad.sum(0) if with_bias else None


class ColumnLinearAsyncDgrad(Function):
    """A column-parallel linear whose backward leaves its input gradient's allreduce in flight.

    Backward: dX = grad·W, start its allreduce (key), then the weight gradient (which overlaps it),
    and dX goes to autograd unsummed: its only reader is the ``WaitGrad`` of the same key.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, table: HandleTable, key: Hashable):
        ctx.save_for_backward(x, weight)
        ctx.table, ctx.key, ctx.with_bias = table, key, bias is not None
        table.note("column", key)
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad_input = grad @ weight
        ctx.table.start(ctx.key, grad_input)
        grad_weight, grad_bias = _weight_grads(grad, x, ctx.with_bias)
        ctx.table.note("wgrad", ctx.key)
        return grad_input, grad_weight, grad_bias, None, None


class WaitGrad(Function):
    """Identity forward; backward, waits for the input-gradient allreduce of its key first."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        ctx.table, ctx.key = table, key
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        ctx.table.wait(ctx.key)
        return grad, None, None


class RowLinearStart(Function):
    """A row-parallel linear without bias whose partial output's allreduce is started, not waited.

    The output is in flight: its only reader is the ``WaitReduce`` of the same key. Backward is
    the plain linear's (g's backward is the identity); it notes "row-backward" for the trace.
    """

    @staticmethod
    def forward(ctx, x, weight, table: HandleTable, key: Hashable):
        ctx.save_for_backward(x, weight)
        ctx.table, ctx.key = table, key
        partial = F.linear(x, weight)
        table.start(key, partial)
        return partial

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        ctx.table.note("row-backward", ctx.key)
        grad_weight, _ = _weight_grads(grad, x, False)
        return grad @ weight, grad_weight, None, None


class WaitReduce(Function):
    """Forward, waits for the allreduce of its key, then passes the summed tensor on; identity backward."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor, table: HandleTable, key: Hashable) -> torch.Tensor:
        table.wait(key)
        return partial.view_as(partial)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None, None


def copy_to_tp(x: torch.Tensor, comm: TPComm) -> torch.Tensor:
    return CopyToTP.apply(x, comm)


def reduce_from_tp(partial: torch.Tensor, comm: TPComm) -> torch.Tensor:
    return ReduceFromTP.apply(partial, comm)
