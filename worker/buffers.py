"""Memory reused from call to call.

A fresh array of 64 MB is 16,000 page faults, each zeroing a page (and, in a VM whose host
reclaims freed memory, fetching it back): measured here as a fifth of a 64 MB call's CPU.  A
call's private copy of its input, and the sums ``allreduce_`` copies into the caller's array (when
it cannot sum into the array itself: ``calls.summed_in_place``), live in buffers that go back to
this pool when the call is done.
"""

from __future__ import annotations

import threading

import numpy as np


class BufferPool:
    """Byte buffers lent out as typed arrays; at most ``keep`` wait to be reused (the largest)."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._free: list[np.ndarray] = []
        self._lent: dict[int, np.ndarray] = {}  # id of a lent array -> its buffer
        self._lock = threading.Lock()

    def take(self, count: int, dtype: np.dtype | type) -> np.ndarray:
        """An uninitialised array of ``count`` elements of ``dtype``."""
        size = count * np.dtype(dtype).itemsize
        with self._lock:
            fits = [i for i, b in enumerate(self._free) if b.nbytes >= size]  # sorted by size: the first fits best
            buffer = self._free.pop(fits[0]) if fits else np.empty(max(size, 1), np.uint8)
            array = buffer[:size].view(dtype)
            self._lent[id(array)] = buffer
        return array

    def give(self, array: np.ndarray) -> None:
        """Take back an array ``take`` lent (its contents may be overwritten from now on)."""
        with self._lock:
            buffer = self._lent.pop(id(array))
            self._free.append(buffer)
            self._free.sort(key=lambda b: b.nbytes)
            del self._free[:-self.keep]
