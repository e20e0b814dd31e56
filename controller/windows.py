"""The window (slots per tree and switch) of a job that asks for none: what its trees' bandwidth-delay product
needs, as the one model figures it, shared max-min between the auto-sized jobs that meet on a switch.

A tree keeps its bottleneck busy with round trip / pace frames in flight (``worker.tuner.TreePipe``: a frame
every ``pace`` seconds, each slot back after ``round_trip``); fewer slots leave the link idle part of each
round trip, more only queue (and, for float calls, add exponent packets: the first min(W, n) go without
mantissas).  The job's window is its slowest-filling tree's need times ``MARGIN``, and never below
``MIN_AUTO_WINDOW``.  A switch's slot pool is shared: where the auto jobs' needs do not fit what the
fixed-size jobs leave, each gets a max-min fair share (``fair_windows``).  Pure functions; the controller
applies them when it creates a job (``Controller.create_job``: the newcomer's window is its fair share within what
is free; running jobs keep theirs, as their workers' slot streams are built on it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from worker.tuner import InaCost

# the window over the bandwidth-delay product (rounded up, so at least a frame over it).  At 128 workers of
# fat_tree(8), 100 Gbit/s, 1 MB (bench/bench_window.py, virtual time) 1.0x (313 slots) took 262 / 144 us for the
# first / second call, 1.25x (391) 268 / 149: the link is full at 1.0x, and each slot more adds an exponent-only
# frame to a float call (its first min(W, n)).  Worth measuring again once those frames are gone.
MARGIN = 1.0
# the least window an auto job gets where its links ask for less: a lost packet's slot waits a timeout, and 64
# keep 50 Mbit/s links full at 1-5% loss (bench_loss; job_plan.DEFAULT_POOL_SIZE's reason)
MIN_AUTO_WINDOW = 64


def bdp_frames(ina: InaCost) -> float:
    """Frames in flight that keep the job's slowest-filling tree busy: max over trees of round trip / pace."""
    return max((t.round_trip / t.pace for t in ina.trees), default=0.0)


def bdp_window(ina: InaCost | None, margin: float = MARGIN, least: int = MIN_AUTO_WINDOW) -> int:
    """Slots per tree that the job's trees need (``ina``: its model's trees; None, a ring alone: ``least``)."""
    if ina is None:
        return least
    return max(least, math.ceil(margin * bdp_frames(ina) - 1e-9))


def fair_windows(demands: Mapping[str, int], uses: Mapping[str, Mapping[str, int]],
                 room: Mapping[str, int]) -> dict[str, int]:
    """Each auto job's window: ``demands[job]`` where there is room, else a max-min fair share (progressive
    filling: every window grows together; a switch that fills fixes the jobs on it, a job that reaches its
    demand stops there).  ``uses[job][switch]``: the job's trees on that switch (each holds a window there);
    ``room[switch]``: the slots the auto jobs may share there (the pool less what fixed-size jobs hold).
    Windows are whole slots, at least 1."""
    level: dict[str, float] = {}
    left = {s: float(max(0, r)) for s, r in room.items()}
    unfixed = set(demands)
    while unfixed:
        weight: dict[str, int] = {}
        for job in unfixed:
            for switch, trees in uses.get(job, {}).items():
                weight[switch] = weight.get(switch, 0) + trees
        share = min((left[s] / w for s, w in weight.items() if w), default=math.inf)
        step = min(share, min(demands[j] for j in unfixed))
        full = {s for s, w in weight.items() if w and left[s] / w <= step * (1 + 1e-12)}
        fixed = {j for j in unfixed if demands[j] <= step * (1 + 1e-12) or full & set(uses.get(j, {}))}
        for job in fixed:
            level[job] = min(step, demands[job])
            for switch, trees in uses.get(job, {}).items():
                left[switch] -= level[job] * trees
        unfixed -= fixed
    return {job: max(1, math.floor(w + 1e-9)) for job, w in level.items()}
