"""Torch tensors through a ``Worker``: the sum written back into the tensor, CPU or CUDA.

What the DDP hook (``worker.torch_ddp``) and the process-group backend (``worker.torch_backend``)
share.  The switches add int32 lanes, so a tensor goes to the worker as float32 (float16 and
bfloat16 are converted on the host each way) or, for int32, as itself (exact).

A CUDA tensor is staged through pinned host memory, as gloo's CUDA allreduce does: a side
stream first waits for the caller's stream (the copy must see what the caller's kernels are
writing), copies the tensor to host and records an event; the worker reads the values once
that event has passed, on a thread of its own, so the caller's thread never waits for the GPU.
The sum comes back through the same pinned buffer on the side stream, and the call's future is
a CUDA-aware ``torch.futures.Future``: completing it on the side stream records an event that
every waiter (``Work.wait()``, DDP, a ``then()``) makes its own current stream wait for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from worker.api import Worker

WIRE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32)  # what the switches can sum


class Staged:
    """One tensor's values on the host for the worker, and the way back into the tensor."""

    def __init__(self, tensor: torch.Tensor, streams: dict[torch.device, torch.cuda.Stream]) -> None:
        if tensor.dtype not in WIRE_DTYPES:
            raise TypeError(f"the switches sum {', '.join(map(str, WIRE_DTYPES))}, not {tensor.dtype}")
        self.tensor = tensor
        wire = torch.int32 if tensor.dtype == torch.int32 else torch.float32
        self.stream: torch.cuda.Stream | None = None
        self._copied: torch.cuda.Event | None = None
        if tensor.device.type == "cuda":
            self.stream = streams.get(tensor.device)
            if self.stream is None:
                self.stream = streams[tensor.device] = torch.cuda.Stream(tensor.device)
            self.stream.wait_stream(torch.cuda.current_stream(tensor.device))
            with torch.cuda.stream(self.stream):
                self.host = torch.empty(tensor.shape, dtype=wire, pin_memory=True)
                self.host.copy_(tensor.detach(), non_blocking=True)
                self._copied = torch.cuda.Event()
                self._copied.record(self.stream)
            tensor.record_stream(self.stream)  # the caching allocator must not reuse it before the copies end
        elif tensor.device.type == "cpu":
            self.host = tensor.detach().to(wire).contiguous()  # the tensor itself when it is contiguous float32
        else:
            raise ValueError(f"the INA worker sums CPU and CUDA tensors, not {tensor.device}")

    @property
    def on_gpu(self) -> bool:
        return self.stream is not None

    def values(self) -> np.ndarray:
        """The host buffer, flat (the worker reads it, then writes the sum into it): for a CUDA tensor,
        once its copy to host has finished."""
        if self._copied is not None:
            self._copied.synchronize()
        return self.host.reshape(-1).numpy()

    def future(self) -> torch.futures.Future:
        """A future for this tensor's result: CUDA-aware for a CUDA tensor."""
        return torch.futures.Future(devices=[self.tensor.device]) if self.on_gpu else torch.futures.Future()

    def write_back(self, divide: int) -> None:
        """The worker wrote the sum into ``host``: ``sum / divide`` into the tensor (no copy when the
        host buffer is the tensor itself: a contiguous float32 or int32 CPU tensor)."""
        if divide != 1:
            divide_(self.host, divide)
        if self.stream is None:
            if self.host.data_ptr() != self.tensor.data_ptr():
                self.tensor.copy_(self.host)
            return
        with torch.cuda.stream(self.stream):  # from pinned memory: the copy to the GPU is asynchronous
            self.tensor.copy_(self.host, non_blocking=True)

    def complete(self, future: torch.futures.Future, value: object) -> None:
        """Complete the future after the copy back: on the side stream, whose work waiters then wait for."""
        if self.stream is None:
            future.set_result(value)
            return
        with torch.cuda.stream(self.stream):
            future.set_result(value)


def divide_(tensor: torch.Tensor, n: int) -> torch.Tensor:
    """An average in place: floats divided, integers divided rounding toward zero (as NCCL's average)."""
    if tensor.is_floating_point() or tensor.is_complex():
        return tensor.div_(n)
    return tensor.copy_(torch.div(tensor, n, rounding_mode="trunc"))


class Sequencer:
    """Starts calls in the order they were made.  A CPU call starts at once on the caller's thread; a
    CUDA call starts on a thread of its own once its copy to host has finished, and every call made
    after it waits its turn (every rank must start the same calls in the same order)."""

    def __init__(self, name: str) -> None:
        self._lock = threading.Lock()
        self._pending = 0
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def run(self, start: Callable[[], None], later: bool) -> None:
        with self._lock:
            if not later and not self._pending:
                start()
                return
            self._pending += 1
            self._thread.submit(self._later, start)

    def _later(self, start: Callable[[], None]) -> None:
        try:
            start()
        finally:
            with self._lock:
                self._pending -= 1

    def close(self) -> None:
        self._thread.shutdown(wait=True)


class TensorWorker:
    """A ``Worker`` for torch tensors; ``failure`` keeps the worker's first error (the job is broken after it)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.failure: BaseException | None = None
        self.timings: list[dict[str, float]] | None = None  # a list: every finished call's times are appended
        self._sequencer = Sequencer(f"ina-stage-{worker.rank}")
        self._streams: dict[torch.device, torch.cuda.Stream] = {}

    def allreduce_(self, tensor: torch.Tensor, value: object, *, divide: int = 1,
                   finished: Callable[[Future | None], None] | None = None) -> torch.futures.Future:
        """Sum ``tensor`` over the job's workers, divided by ``divide``, into ``tensor`` itself.

        The returned future's value is ``value`` once the sum is in the tensor; it fails with the
        worker's error in a way that C++ readers (DDP, ``Work.wait()``) see as a failure.
        ``finished(handle)`` is called with the worker's future (None if the call never started)
        just before the returned future completes."""
        ready = time.perf_counter()
        staged = Staged(tensor, self._streams)
        fut = staged.future()
        # A Python set_exception() is a value with an unwrap function, which C++ readers do not
        # see; a then() whose callback raises fails the future it returns, as they expect.
        out = fut.then(lambda f: f.value())

        def fail(error: BaseException, handle: Future | None) -> None:
            self.failure = self.failure or error
            fut.set_exception(error)
            if finished is not None:
                finished(handle)

        def done(handle: Future) -> None:
            try:
                handle.result()  # the sum is in staged.host (or raises the worker's error)
                staged.write_back(divide)
            except Exception as e:  # noqa: BLE001 - the future carries it to the caller
                fail(e, handle)
                return
            if finished is not None:
                finished(handle)
            if self.timings is not None:
                self.timings.append({"values": tensor.numel(), "ready": ready, "finished": time.perf_counter(),
                                     "started": handle.timing.get("started", float("nan"))})
            staged.complete(fut, value)

        def start() -> None:
            try:
                handle = self.worker.allreduce_async_(staged.values())
            except Exception as e:  # noqa: BLE001 - a closed or broken worker fails this call's future
                fail(e, None)
                return
            handle.add_done_callback(done)

        self._sequencer.run(start, later=staged.on_gpu)
        return out

    def close(self) -> None:
        self._sequencer.close()
        self.worker.close()
