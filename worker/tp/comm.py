"""The one thing tensor-parallel layers need from a network: an asynchronous in-place sum.

Layers take a ``TPComm`` rather than a process group, so the same model runs over any torch
process group (gloo, NCCL, ``ina`` on the default group), or with no communication at all
(``NoComm``: the "optimal" step Domino compares against, in which each rank keeps its partial sums).
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.distributed as dist


class Handle(Protocol):
    """An allreduce in flight: ``wait()`` returns once the tensor holds the sum."""

    def wait(self) -> object: ...


class TPComm(Protocol):
    """A tensor-parallel group: its size, this rank's place in it, and its two collectives."""

    size: int
    rank: int

    def allreduce_async(self, tensor: torch.Tensor) -> Handle:
        """Start summing ``tensor`` in place over the group; nobody may touch it until ``wait()``."""
        ...

    def allgather_ints(self, values: list[int]) -> list[list[int]]:
        """Every rank's ``values`` (same length everywhere), by rank: for set-up checks only."""
        ...


class TorchComm:
    """A torch process group (``None``: the default group); allreduces with ``async_op=True``."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)

    def allreduce_async(self, tensor: torch.Tensor) -> Handle:
        return dist.all_reduce(tensor, group=self.group, async_op=True)

    def allgather_ints(self, values: list[int]) -> list[list[int]]:
        mine = torch.tensor(values, dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in range(self.size)]
        dist.all_gather(everyone, mine, group=self.group)
        return [t.tolist() for t in everyone]


class Done:
    """A handle that is already complete."""

    def wait(self) -> None:
        return None


class NoComm:
    """No communication: every allreduce is done at once and leaves this rank's partial sum.

    For timing a step without its collectives; the model's results are then not the model's.
    """

    def __init__(self, size: int = 1, rank: int = 0) -> None:
        self.size, self.rank = size, rank

    def allreduce_async(self, tensor: torch.Tensor) -> Handle:
        return Done()

    def allgather_ints(self, values: list[int]) -> list[list[int]]:
        return [list(values)] * self.size
