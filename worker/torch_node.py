"""Ranks that share a node: reduce inside the node, sum across nodes through the switches, spread back.

Under ``torchrun --nproc-per-node L`` a node's L ranks must not each join the switches' job: each
node link would carry L gradients, and every tree L times the members.  As NCCL's CollNet does,
the node's ranks first reduce-scatter the tensor among themselves (over NVLink; here the node's
own group: gloo for CPU tensors, NCCL for CUDA ones), so local rank i holds shard i of the node's
sum; local rank i then sums its shard across nodes in *rail i's job* (one member per node, through
NIC i where the node has one per rank), and an all-gather inside the node puts the sums back
together.  Each node sends one gradient to the switches and receives one, whatever L is.

Shards are ceil(n / L) values, the last ones shorter (or empty: a rail with nothing to sum skips
its call on every node alike), so a tensor of any size splits without padding on the wire.  Floats
are summed in float32 inside the node (so float16 and bfloat16 keep the switches' bound), int32
in int32 (wrapping as the switches do: exact when the sum fits).

A node's calls pass three stages in call order: the reduce-scatter is issued by the caller, a
thread starts each shard's call through the switches once its reduce-scatter is done, and a second
thread all-gathers each shard once its sum is back.  Each stage has a group of its own, so every
local rank issues each group's collectives in the same order, and a node's next reduce-scatter
overlaps its last shard's trip through the switches (DDP's buckets in flight).  The all-gather also
carries a word per rank saying whether its rail's call succeeded: a failed rail fails the call on
every rank of the node, and every later call at once (the job's sequence is broken).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

from worker.jobspec import JobSpec, shard_bounds
from worker.torch_tensors import WIRE_DTYPES, TensorWorker, divide_

LAYOUT_KEYS = "ina-node/"  # torch's store: <rank> -> {"node": key, "local": i, "of": L}


def local_timeout(worker_timeout: float) -> timedelta:
    """How long a collective inside the node waits for a local rank: past the rails' own timeout, so that
    a rank whose rail failed still reaches the all-gather and tells the others (a dead local rank fails
    it at once: gloo and NCCL see the connection close)."""
    return timedelta(seconds=2 * worker_timeout + 5)


@dataclass(frozen=True)
class NodeLayout:
    """Where this rank is: node ``node`` of ``nodes`` (numbered by their lowest global rank), local rank
    ``local_rank`` of ``local_size``; ``ranks``: every node's global ranks in local-rank order."""

    rank: int
    node: int
    local_rank: int
    local_size: int
    ranks: tuple[tuple[int, ...], ...]

    @property
    def nodes(self) -> int:
        return len(self.ranks)


def node_layout(store: dist.Store, rank: int, size: int, timeout: timedelta) -> NodeLayout:
    """Every rank posts its node and local rank (torchrun's GROUP_RANK, or the host name, and LOCAL_RANK,
    LOCAL_WORLD_SIZE) and reads everyone's.  Without LOCAL_WORLD_SIZE > 1 each rank is a node of its own,
    as before nodes had several ranks."""
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    if local_size > 1:
        mine = {"node": os.environ.get("GROUP_RANK") or socket.gethostname(),
                "local": int(os.environ.get("LOCAL_RANK", "-1")), "of": local_size}
    else:
        mine = {"node": f"rank{rank}", "local": 0, "of": 1}
    keys = PrefixStore(LAYOUT_KEYS, store)
    keys.set(str(rank), json.dumps(mine))
    keys.wait([str(r) for r in range(size)], timeout)
    posted = [json.loads(keys.get(str(r))) for r in range(size)]
    return layout_of(posted, rank)


def flat_layout(rank: int, size: int) -> NodeLayout:
    """Every rank a node of its own."""
    return NodeLayout(rank, rank, 0, 1, tuple((r,) for r in range(size)))


def layout_of(posted: list[dict], rank: int) -> NodeLayout:
    """The layout from every rank's post; every rank gets the same one, or the same error."""
    nodes: dict[str, dict[int, int]] = {}
    for r, post in enumerate(posted):
        locals_ = nodes.setdefault(str(post["node"]), {})
        if post["local"] in locals_:
            raise ValueError(f"ranks {locals_[post['local']]} and {r} both say they are local rank {post['local']} "
                             f"of node {post['node']}")
        locals_[post["local"]] = r
    sizes = {post["of"] for post in posted}
    if len(sizes) != 1:
        raise ValueError(f"nodes run different numbers of ranks ({sorted(sizes)}): every node must run the same "
                         f"--nproc-per-node")
    local_size = sizes.pop()
    for node, locals_ in nodes.items():
        if sorted(locals_) != list(range(local_size)):
            raise ValueError(f"node {node} has local ranks {sorted(locals_)}, not 0..{local_size - 1}")
    ranks = sorted((tuple(locals_[i] for i in range(local_size)) for locals_ in nodes.values()), key=min)
    node = next(k for k, members in enumerate(ranks) if rank in members)
    return NodeLayout(rank, node, ranks[node].index(rank), local_size, tuple(ranks))


def nic_window(rails: list[JobSpec], layout: NodeLayout) -> int | None:
    """This rank's window in its rail's job: a node whose rails share a NIC (fewer NICs than ranks) splits
    the job's pool over them, so the NIC has one job's window in flight, not one per rail, and each call's
    first window of exponent-only frames shrinks with it.  None: the job's whole pool (a NIC of its own)."""
    if len(rails) < 2:
        return None
    mine = rails[layout.local_rank]
    nic = mine.members[layout.node].ip
    sharing = sum(spec.members[layout.node].ip == nic for spec in rails)
    return max(1, mine.pool_size // sharing) if sharing > 1 else None


class _Group:
    """One stage's collectives inside the node: a gloo group, and an NCCL one for CUDA tensors."""

    def __init__(self, store: dist.Store, layout: NodeLayout, stage: str, timeout: timedelta) -> None:
        prefix = PrefixStore(f"{LAYOUT_KEYS}{layout.node}/{stage}/", store)
        self.gloo = ProcessGroupGloo(PrefixStore("gloo/", prefix), layout.local_rank, layout.local_size, timeout)
        self.nccl = None
        if torch.cuda.is_available() and dist.is_nccl_available():
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self.nccl = dist.ProcessGroupNCCL(PrefixStore("nccl/", prefix), layout.local_rank,
                                              layout.local_size, options)

    def on(self, device: torch.device) -> dist.ProcessGroup:
        if device.type == "cuda":
            if self.nccl is None:
                raise RuntimeError("a CUDA tensor, but NCCL is not available for the node's ranks")
            return self.nccl
        return self.gloo


@dataclass
class _Call:
    tensor: torch.Tensor
    value: object
    divide: int
    finished: Callable[[object], None] | None
    out: torch.futures.Future
    result: torch.futures.Future
    buffer: torch.Tensor  # L shards, then this rank's shard and its status word (the all-gather's input)
    shard: torch.Tensor
    reduced: dist.Work | None
    timing: dict[str, float]
    rail: torch.futures.Future | None = None
    error: BaseException | None = None


class NodeReducer:
    """This rank's side of the node: ``allreduce_`` as ``TensorWorker``'s, over every rank of every node."""

    def __init__(self, store: dist.Store, layout: NodeLayout, rail: TensorWorker, timeout: timedelta) -> None:
        self.layout, self.rail = layout, rail
        self.world = layout.nodes * layout.local_size
        self.failure: BaseException | None = None
        self.timings: list[dict[str, float]] | None = None  # as TensorWorker's: every finished call's times
        self._scatter = _Group(store, layout, "scatter", timeout)
        self._gather = _Group(store, layout, "gather", timeout)
        self._started: queue.Queue[_Call | None] = queue.Queue()
        self._summed: queue.Queue[_Call | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._start_rails, daemon=True, name=f"ina-node-{layout.rank}-rail"),
                         threading.Thread(target=self._gather_shards, daemon=True,
                                          name=f"ina-node-{layout.rank}-gather")]
        for t in self._threads:
            t.start()

    @property
    def worker(self):  # noqa: ANN201 - the rail's Worker (status, counters)
        return self.rail.worker

    def allreduce_(self, tensor: torch.Tensor, value: object, *, divide: int = 1,
                   finished: Callable[[object], None] | None = None) -> torch.futures.Future:
        """Sum ``tensor`` over every rank of every node, divided by ``divide``, into ``tensor``; the future's
        value is ``value``.  ``finished(timing)`` as ``TensorWorker``'s (an object with a ``timing`` dict)."""
        if tensor.dtype not in WIRE_DTYPES:
            raise TypeError(f"the switches sum {', '.join(map(str, WIRE_DTYPES))}, not {tensor.dtype}")
        timing = {"submitted": time.perf_counter()}
        L = self.layout.local_size
        wide = torch.int32 if tensor.dtype == torch.int32 else torch.float32
        n = tensor.numel()
        s = shard_bounds(n, L)[0][1]  # every shard's room in the padded buffer
        buffer = torch.zeros(L * s + s + 1, dtype=wide, device=tensor.device)
        buffer[:n].copy_(tensor.detach().reshape(-1))
        shard = buffer[L * s:L * s + s]
        result = torch.futures.Future(devices=[tensor.device]) if tensor.device.type == "cuda" \
            else torch.futures.Future()
        out = result.then(lambda f: f.value())  # fails in a way C++ readers (DDP, Work.wait) see
        call = _Call(tensor, value, divide, finished, out, result, buffer, shard, None, timing)
        if self.failure is not None:
            self._fail(call, self.failure)
            return out
        try:
            group = self._scatter.on(tensor.device)
            call.reduced = group._reduce_scatter_base(shard, buffer[:L * s])
        except Exception as e:  # noqa: BLE001 - the call's future carries it
            call.error = e
        self._started.put(call)
        return out

    def _start_rails(self) -> None:
        """Each call's shard into its rail's job, once the node's reduce-scatter is done, in call order."""
        while (call := self._started.get()) is not None:
            if call.error is None and self.failure is None:
                try:
                    call.reduced.wait()
                    call.timing["started"] = time.perf_counter()
                    lo, hi = shard_bounds(call.tensor.numel(), self.layout.local_size)[self.layout.local_rank]
                    if hi > lo:  # every node's rank skips the same empty shard
                        call.rail = self.rail.allreduce_(call.shard[:hi - lo], None)
                except Exception as e:  # noqa: BLE001 - a dead or stuck local rank
                    call.error = self._local_failure("reduce-scatter", e)
            self._summed.put(call)
        self._summed.put(None)

    def _gather_shards(self) -> None:
        """Each call's shards back together inside the node, in call order; every rank says how its rail went."""
        L = self.layout.local_size
        while (call := self._summed.get()) is not None:
            error = call.error or self.failure
            if call.rail is not None and error is None:
                try:
                    call.rail.wait()
                except Exception as e:  # noqa: BLE001 - the rail's worker error (torch's text wraps it)
                    error = self.rail.failure or e
            s = call.shard.numel()
            mine = call.buffer[L * s:]
            mine[s] = 0 if error is None else 1
            if call.error is not None:  # the node's group itself failed: no all-gather can be trusted
                self._fail(call, call.error)
                continue
            try:
                gathered = torch.empty(L * (s + 1), dtype=mine.dtype, device=mine.device)
                self._gather.on(mine.device)._allgather_base(gathered, mine).wait()
            except Exception as e:  # noqa: BLE001
                self._fail(call, self._local_failure("all-gather", e))
                continue
            rows = gathered.view(L, s + 1)
            failed = rows[:, s].nonzero().reshape(-1).tolist()
            if failed:
                own = f": {type(error).__name__}: {error}" if error is not None else "; the rail's own rank says why"
                rails = ", ".join(map(str, failed))
                self._fail(call, RuntimeError(f"the allreduce failed on rail(s) {rails} of node {self.layout.node} "
                                              f"(here local rank {self.layout.local_rank}{own})"))
                continue
            self._finish(call, rows[:, :s].reshape(-1)[:call.tensor.numel()])

    def _local_failure(self, stage: str, error: Exception) -> RuntimeError:
        return RuntimeError(f"the {stage} among node {self.layout.node}'s {self.layout.local_size} ranks failed "
                            f"(here local rank {self.layout.local_rank}; a local rank died or is stuck): {error}")

    def _finish(self, call: _Call, summed: torch.Tensor) -> None:
        try:
            if call.divide != 1:
                divide_(summed, call.divide)
            call.tensor.copy_(summed.view(call.tensor.shape))
        except Exception as e:  # noqa: BLE001
            self._fail(call, e)
            return
        call.timing["finished"] = time.perf_counter()
        if self.timings is not None:
            self.timings.append({"values": call.tensor.numel(), "ready": call.timing["submitted"],
                                 "started": call.timing.get("started", float("nan")),
                                 "finished": call.timing["finished"]})
        if call.finished is not None:
            call.finished(_Timed(call.timing))
        call.result.set_result(call.value)

    def _fail(self, call: _Call, error: BaseException) -> None:
        self.failure = self.failure or error
        if call.finished is not None:
            call.finished(_Timed(call.timing))
        call.result.set_exception(error)

    def close(self) -> None:
        self._started.put(None)  # the rail thread passes it on to the gather thread
        for t in self._threads:
            t.join()
        self.rail.close()


@dataclass
class _Timed:
    """What ``finished`` callbacks read (the worker's futures carry the same ``timing`` dict)."""

    timing: dict[str, float]
