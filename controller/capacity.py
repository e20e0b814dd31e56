"""What a switch has room for: its slot pool and its job cells, and where a new tree's share goes.

Pure functions of what is taken, so the controller's admission and the service's status read the
same accounting.  A switch's room comes from its own program (``Pipeline.pool_slots``,
``max_jobs``): a TNA switch and a v1model switch of one network differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

MIN_POOL = 4  # admission halves a job's pool down to this: fewer slots leave too small a window to be worth it


class CapacityError(ValueError):
    """The switches have no room for what was asked (admission may still give the job less)."""


@dataclass(frozen=True)
class Room:
    """One switch's capacity and what of it is free."""

    name: str  # the switch
    program: str  # v1model or tna
    pool_slots: int
    free_slots: int
    cells: int  # trees it can carry at once (INA_MAX_JOBS)
    free_cells: int


def room(switch: str, program: str, pool_slots: int, cells: int, taken: list[tuple[int, int]],
         used_cells: set[int]) -> Room:
    """``taken``: (first slot, size) of every tree on the switch; ``used_cells`` their cells."""
    return Room(switch, program, pool_slots, pool_slots - sum(n for _, n in taken), cells, cells - len(used_cells))


def free_cell(switch: str, max_jobs: int, used: set[int]) -> int:
    cell = next((c for c in range(max_jobs) if c not in used), None)
    if cell is None:
        raise CapacityError(f"switch {switch} carries {max_jobs} trees already (INA_MAX_JOBS)")
    return cell


def free_pool(switch: str, size: int, slots: int, taken: list[tuple[int, int]], wanted: int | None = None) -> int:
    """The first ``size`` consecutive free slots of the switch's ``slots`` (first fit); ``wanted``: exactly
    from there, or CapacityError naming what is in the way."""
    spans = sorted((a, a + n) for a, n in taken)
    if wanted is not None:
        if not (0 <= wanted and wanted + size <= slots):
            raise CapacityError(f"pool {wanted}..{wanted + size - 1} does not fit switch {switch}'s {slots} slots")
        clash = [(a, b) for a, b in spans if a < wanted + size and wanted < b]
        if clash:
            raise CapacityError(f"pool {wanted}..{wanted + size - 1} overlaps slots {clash[0][0]}..{clash[0][1] - 1} "
                                f"of another tree on switch {switch}")
        return wanted
    start = 0
    for a, b in spans + [(slots, slots)]:
        if a - start >= size:
            return start
        start = max(start, b)
    raise CapacityError(f"switch {switch} has no {size} free consecutive slots (of {slots}; "
                        f"in use: {', '.join(f'{a}..{b - 1}' for a, b in spans)})")


def fallbacks(trees: int, pool_size: int) -> Iterator[tuple[int, int]]:
    """(trees, pool size) to try, most aggregation first, when a job does not fit as asked: fewer trees at
    its pool (each tree needs room on every switch it crosses), then one tree on a pool halved down to
    MIN_POOL (a smaller window, a slower tree); what none of these fits runs round the host ring."""
    for k in range(trees - 1, 0, -1):
        yield k, pool_size
    size = pool_size // 2
    while size >= MIN_POOL:
        yield 1, size
        size //= 2
