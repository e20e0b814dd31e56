"""Max-min fair rates of flows over shared links (progressive filling): what TCP-like bulk transfers get
of a network, as the model predicts it and the virtual fabric simulates it.  Pure functions."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

FLOOR = 0.01  # of a link's rate: what packets keep beside flows that fill it (as the virtual fabric's links)
_TIE = 1e-12  # rates within this (relative) of the bottleneck level are fixed with it


def max_min_rates(paths: Sequence[Sequence[Hashable]], caps: Sequence[float | None],
                  capacity: dict[Hashable, float]) -> list[float]:
    """Each flow's rate: every unfixed flow's rate rises together; a link that fills fixes its flows at the
    level reached, a flow that reaches its cap (None: no cap) is fixed there, and the rest go on.
    ``paths[i]`` are the links flow i crosses (keys of ``capacity``)."""
    left = dict(capacity)
    count = dict.fromkeys(capacity, 0)
    for path in paths:
        for link in path:
            count[link] += 1
    rates: list[float | None] = [None] * len(paths)
    unfixed = list(range(len(paths)))
    while unfixed:
        shares = {link: left[link] / n for link, n in count.items() if n > 0}
        level = min(shares.values(), default=math.inf)
        level = min(level, min((caps[i] for i in unfixed if caps[i] is not None), default=math.inf))
        full = {link for link, s in shares.items() if s <= level * (1 + _TIE)}
        fixed = [i for i in unfixed if (caps[i] is not None and caps[i] <= level * (1 + _TIE))
                 or any(link in full for link in paths[i])]
        for i in fixed:
            rate = max(0.0, min(level, caps[i]) if caps[i] is not None else level)
            rates[i] = rate
            for link in paths[i]:
                left[link] = max(0.0, left[link] - rate)
                count[link] -= 1
        unfixed = [i for i in unfixed if rates[i] is None]
    return [float(r) for r in rates]  # every flow is fixed by now
