"""One composition of an allreduce call (worker/calls.py, ``ComposedCall``), which ``Worker`` and the
virtual fabric's workers both use: its parts, and its result or its one overflow message.  The
same overflowing calls through both paths: tests/test_worker.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.test_engine_core import Sink, _spec, _tree
from worker import calls
from worker.errors import SwitchOverflowError
from worker.jobspec import JobSpec, TreeSpec


def _hybrid_spec(alpha: float) -> JobSpec:
    """Two trees of equal shares, and the rest of each call round the ring."""
    base = _spec(4)
    second = TreeSpec(2, "s1", 0.5, 100.0, 16386, (0,))
    return JobSpec("j", 64, base.udp_port, 4, base.members, (replace(base.trees[0], share=0.5), second),
                   mode="hybrid", alpha=alpha)


def test_a_composed_call_numbers_flagged_chunks_in_the_call_and_names_the_ring_parts_elements() -> None:
    """Chunks the switches flagged are numbered in the whole call (the second tree's part starts after
    the first's) and refuse it before an int32 ring sum that leaves int32, which is named by its
    elements."""
    data = np.ones(64 * 8 + 10, np.int32)  # 9 chunks: 4 (round(4.5)) through two trees, the rest round the ring
    padded, exponents = calls.prepare(data, 64)
    composed = calls.ComposedCall(_hybrid_spec(0.5), [_tree(Sink()), _tree(Sink())], padded, exponents, data.shape,
                                  data.dtype, np.zeros_like(padded))
    assert composed.choice.method == "hybrid" and composed.sent == [0, 0]
    assert composed.k == 4 and [first for first, _ in composed.tree_parts] == [0, 2]
    ring = composed.ring_part
    assert ring is not None and ring.first == 256 and ring.data.dtype == ring.narrow == np.int64
    assert np.array_equal(ring.data, data[256:])
    with pytest.raises(ValueError, match="ring's sum is needed"):
        composed.result(None)
    assert np.array_equal(composed.result(ring.data), np.r_[np.zeros(256, np.int32), data[256:]])
    wide = ring.data.copy()
    wide[[5, 9]] = 2**31
    with pytest.raises(SwitchOverflowError, match=r"^the int32 sum of the ring part \(elements 256\.\.521\) leaves "
                                                  r"int32 in 2 element\(s\), first element 261$"):
        composed.result(wide)
    composed.tree_parts[1][1].overflowed.append(1)  # the second tree's second chunk: the call's chunk 3
    with pytest.raises(SwitchOverflowError, match=r"in 1 chunk\(s\), first chunk 3 \(elements 192\.\.255\)"):
        composed.result(wide)


def test_a_call_without_a_ring_part_takes_no_ring_sum_and_fills_an_in_place_target() -> None:
    """float16 is summed as float32; ``into`` receives the sums cast back."""
    data = np.arange(100, dtype=np.float16).reshape(4, 25)
    padded, exponents = calls.prepare(data, 64)
    out = np.arange(len(padded), dtype=np.float32)  # as if the trees had summed
    composed = calls.ComposedCall(_spec(4), [_tree(Sink())], padded, exponents, data.shape, data.dtype, out)
    assert composed.ring_part is None and composed.k == 2
    into = np.zeros_like(data)
    assert composed.result(None, into) is into and np.array_equal(into, data)
    assert composed.result(None).dtype == np.float16 and composed.result(None).shape == (4, 25)
    with pytest.raises(ValueError, match="ring's sum is needed"):
        composed.result(np.zeros(0))
