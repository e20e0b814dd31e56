"""Every random stream of a run, derived from its seed by purpose, in one place.

Two draws from one generator couple what should not be coupled: a campaign that drew its
scenario and then its losses from two ``random.Random(seed)`` replayed one stream twice, and a
change in how many frames one link sends shifted every other link's losses.  Each purpose (the
scenario's draw, the fault schedule, each link direction's losses, each switch's random extern)
gets its own generator, seeded from the run's seed and the purpose's name, so streams are
independent and each is stable when the others change.
"""

from __future__ import annotations

import random


def key(seed: int, purpose: str) -> str:
    """What a purpose's generator is seeded with (a str: ``random`` hashes it with SHA-512, the
    same in every process, whatever PYTHONHASHSEED says)."""
    return f"{seed}:{purpose}"


def stream(seed: int, purpose: str) -> random.Random:
    """The generator of one purpose of a run."""
    return random.Random(key(seed, purpose))


def reseed(rng: random.Random, seed: int, purpose: str) -> None:
    """``rng`` as ``stream(seed, purpose)`` would start it, in place (holders keep their object)."""
    rng.seed(key(seed, purpose))
