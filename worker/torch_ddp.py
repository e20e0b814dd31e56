"""A PyTorch DDP communication hook that sums every gradient bucket in the switches.

    from worker.torch_ddp import InaHookState, ina_hook
    model = DistributedDataParallel(model)                  # gloo (or any backend) for DDP's own bookkeeping
    model.register_comm_hook(InaHookState(), ina_hook)      # INA_JOB_SPEC and INA_RANK (or torchrun's RANK)

DDP hands the hook each bucket as soon as its gradients are ready, in bucket order on every
rank, while backward goes on computing the rest; the hook starts ``Worker.allreduce_async``
and returns a ``torch.futures.Future`` that DDP waits for at the end of backward, so the
switches' work overlaps the backward pass (DDP's buckets exist for that).  The future's value
is the average (the sum over the job's workers divided by their number), written into the
bucket's own buffer, so ``gradient_as_bucket_view=True`` works as well.

Dtypes: a bucket goes to the worker as float32 and comes back to its own dtype.  float32
buckets pay nothing for it; float16 and bfloat16 buckets pay a conversion each way on the
host (numpy has no bfloat16, and a float32 sum cannot overflow where a float16 average
would not), but no wire bytes: the switches add int32 lanes whatever the dtype, 4 bytes per
value (plus headers), so a half-precision bucket does not halve the traffic as it does with
gloo.  The result is within the worker's quantization bound (worker/README.md), divided by
the number of workers, plus half an ulp of the bucket's dtype.  A CUDA bucket is staged
through pinned host memory on a side stream, and DDP's stream waits for the copy back
(``worker.torch_tensors``).

A failed allreduce (a dead worker, a dead path) fails the future with the worker's error;
DDP raises it from ``backward()`` on every surviving rank within the worker's timeout, as a
RuntimeError carrying the worker's message (DDP keeps only the text; ``state.failure`` is the
worker's own exception, an ``AllreduceError``), and every later bucket fails the same way
(the job's packet sequence is broken: start a new job).

Scripts that pick their backend by name can have the same without a hook:
``init_process_group("ina")`` (``worker.torch_backend``).  This module imports torch;
``import worker`` does not.
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations as real types.

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore
from torch.distributed.constants import default_pg_timeout

from worker.api import Worker
from worker.torch_backend import InaOptions, InaProcessGroup, join_switches
from worker.torch_node import NodeReducer
from worker.torch_tensors import TensorWorker


@dataclass
class BucketTimes:
    """One bucket's allreduce in one step, in ``time.perf_counter()`` seconds."""

    step: int
    index: int
    values: int
    ready: float  # DDP called the hook: the bucket's gradients were all computed
    started: float = float("nan")  # the worker's I/O thread began the allreduce
    finished: float = float("nan")  # the average was in the bucket


@dataclass
class Timeline:
    """Per step: when backward started, and each bucket's times (the hook fills these)."""

    backward_started: dict[int, float] = field(default_factory=dict)
    buckets: list[BucketTimes] = field(default_factory=list)
    step: int = 0

    def start_backward(self) -> None:
        """Call just before ``loss.backward()``: a new step begins."""
        self.step += 1
        self.backward_started[self.step] = time.perf_counter()


class InaHookState:
    """What ``ina_hook`` needs: the way to the switches and, if asked, a timeline.

    Given no worker, under an initialised process group: the ``"ina"`` group's own (one way per rank), or
    else the backend's set-up over the group's store (``torch_backend.join_switches``: the spec file or the
    controller service, and nodes of several ranks through their rails); with no process group, the
    worker from the environment (``Worker.from_env``)."""

    def __init__(self, worker: Worker | None = None, *, timeline: Timeline | None = None,
                 timeout: float | None = None) -> None:
        initialised = dist.is_available() and dist.is_initialized()
        if worker is None and initialised:
            self.tensors = _switches_of_group(timeout)
            self.world = dist.get_world_size()
        else:
            worker = worker if worker is not None else Worker.from_env(**({"timeout": timeout} if timeout else {}))
            self.world = len(worker.spec.members)
            if initialised and dist.get_world_size() != self.world:
                raise ValueError(f"the process group has {dist.get_world_size()} ranks but job {worker.spec.name} "
                                 f"has {self.world} workers: start one rank per job member")
            self.tensors = TensorWorker(worker)
        self.worker = self.tensors.worker
        self.timeline = timeline
        self._lock = threading.Lock()

    def close(self) -> None:
        """Stop the calls' thread and the worker (before the process group goes: torch aborts at exit
        when a rank's threads outlive it)."""
        self.tensors.close()

    @property
    def failure(self) -> BaseException | None:
        """The worker's first error (an ``AllreduceError``): DDP raises only its text."""
        return self.tensors.failure


def _switches_of_group(timeout: float | None) -> TensorWorker | NodeReducer:
    group = dist.group.WORLD
    if isinstance(group, InaProcessGroup) and group.tensors is not None:
        return group.tensors
    store = PrefixStore("ina-hook/", dist.distributed_c10d._get_default_store())
    return join_switches(store, dist.get_rank(), dist.get_world_size(), InaOptions(timeout=timeout),
                         default_pg_timeout)


def ina_hook(state: InaHookState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's average over the job's workers, summed by the switches."""
    buffer = bucket.buffer()
    record = None
    if state.timeline is not None:
        record = BucketTimes(state.timeline.step, bucket.index(), buffer.numel(), time.perf_counter())
        with state._lock:
            state.timeline.buckets.append(record)

    def finished(handle: Future | None) -> None:
        if record is not None:
            record.started = handle.timing.get("started", float("nan")) if handle is not None else float("nan")
            record.finished = time.perf_counter()

    return state.tensors.allreduce_(buffer, buffer, divide=state.world, finished=finished)


def hidden_share(timeline: Timeline, step: int) -> tuple[float, float]:
    """(seconds of communication, share of it hidden behind backward's computation) in one step.

    Communication is the union of the buckets' [started, finished]; computation runs from the
    start of backward to the last bucket's ready time (its last gradient was the last computed)."""
    mine = [b for b in timeline.buckets if b.step == step]
    if not mine or step not in timeline.backward_started:
        raise ValueError(f"step {step} has no recorded buckets")
    compute = (timeline.backward_started[step], max(b.ready for b in mine))
    spans = sorted((b.started, b.finished) for b in mine)
    total = hidden = 0.0
    end = -np.inf
    for start, finish in spans:  # union of the intervals, clipped to what is new
        start = max(start, end)
        if finish <= start:
            continue
        total += finish - start
        hidden += max(0.0, min(finish, compute[1]) - max(start, compute[0]))
        end = finish
    return total, (hidden / total if total else 0.0)
