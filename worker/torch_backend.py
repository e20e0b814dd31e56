"""``init_process_group("ina")``: a torch.distributed backend whose allreduce the switches do.

    import torch.distributed as dist
    dist.init_process_group("ina")   # torchrun's RANK, WORLD_SIZE, MASTER_*; the job spec from INA_JOB_SPEC
    dist.all_reduce(tensor)          # summed by the switches; DDP, FSDP and libraries need no change

The backend is registered at ``import torch`` (the ``torch.backends`` entry point in
pyproject.toml; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off) and by importing this module.

What the switches sum: ``all_reduce`` with SUM or AVG of one float32, float16, bfloat16 or int32
tensor, on the CPU or a CUDA device, in the default group (the job's members, rank for rank).
int32 is exact (AVG rounds toward zero, as NCCL's); floats are within the worker's stated bound.
Everything else goes to a gloo group of the same ranks that the backend holds: other ops and
dtypes, and every other collective (broadcast, all_gather, reduce_scatter, barrier, ...).
A group made later with ``new_group(ranks, backend="ina", pg_options=InaOptions(spec=...))``
sums through a job of its own, the spec's members being the group's ranks in order (a job is
one session of its members, so a group cannot share another's); without a spec it sums with
gloo, and a warning says so.  Tensor-parallel groups beside a data-parallel one (worker/tp)
are made so.  Calls return ``Work`` objects with futures; async calls run
one after the other on the worker's I/O thread while the caller goes on, as the DDP hook's do.

The job is the spec file INA_JOB_SPEC (or ./ina-job.json); or, with INA_CONTROLLER=host:port (and
INA_TOKEN_FILE) set and no spec file given, the controller service's: every rank posts its addresses
(``service_job.local_addresses``, INA_ADDRESS overrides) in torch's store, rank 0 asks the service
for a job of them, named by torchrun's run id, and posts it back; every rank keeps its lease and
follows its spec, and rank 0 deletes it at ``destroy_process_group``.

Nodes of several ranks (torchrun's ``--nproc-per-node`` above 1): each node is one member of a job
per rail, and each call reduce-scatters inside the node, sums local rank i's shard through rail i's
job, and all-gathers (``worker.torch_node``).  With a spec file, INA_JOB_SPEC names each rail's with
``{rail}``; a spec of one member per rank instead keeps every rank a member of its own.

Set-up is checked on every rank before ``init_process_group`` returns, and a rank that cannot
join (no spec, a world size or rank the spec does not have, an address this host does not own,
a service that refuses the job) fails every rank's ``init_process_group`` with its reason.  A
failed allreduce (a dead rank, a dead path) fails its ``Work`` with the worker's error within the
worker's timeout; every later allreduce fails at once (the job is broken: start a new one).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import grpc
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import PrefixStore, ProcessGroupGloo

from ina_api import jobs_pb2
from ina_api.client import CONTROLLER_ENV, JobsClient, ServiceError
from worker.api import Worker
from worker.jobspec import JobSpec, spec_path
from worker.service_job import ServiceJob, local_addresses
from worker.torch_node import NodeLayout, NodeReducer, flat_layout, local_timeout, nic_window, node_layout
from worker.torch_tensors import WIRE_DTYPES, TensorWorker, divide_

NAME = "ina"
DEFAULT_TIMEOUT = 10.0  # seconds without progress before an allreduce fails (INA_TIMEOUT)
SERVICE_KEYS = "ina-service/"  # torch's store: addr/RANK (JSON list, "" if none), job (a CreateJobReply)


@dataclass(frozen=True)
class InaOptions:
    """``init_process_group("ina", pg_options=InaOptions(...))``, for what the environment gives otherwise."""

    spec: str | Path | None = None  # the job spec (default: INA_JOB_SPEC, else ina-job.json; a new_group's: its own)
    timeout: float | None = None  # the worker's timeout, s (default: INA_TIMEOUT, else 10)
    window: int | None = None  # slots in flight per tree (default: the job's pool size)


class FutureWork(dist.Work):
    """A call's ``Work``: ``wait()`` raises the call's error.  torch's ``_create_work_from_future`` gives a
    ``Work`` whose ``wait()`` returns as if all went well, so a synchronous ``all_reduce`` on a broken job
    would go on with a wrong sum."""

    def __init__(self, future: torch.futures.Future, source: TensorWorker | NodeReducer | None = None) -> None:
        super().__init__()
        self.future, self.source = future, source

    def wait(self, timeout: timedelta | None = None) -> bool:
        try:
            self.future.wait()
        except Exception:  # torch's text wraps the error in its callback's; the job's own error says it plainly
            if self.source is not None and self.source.failure is not None:
                raise self.source.failure from None
            raise
        return True

    def is_completed(self) -> bool:
        return self.future.done()

    def get_future(self) -> torch.futures.Future:
        return self.future


# The collectives torch's Python-subclass trampoline (PyProcessGroup) would run on the registered
# backend while holding the GIL: gloo's worker thread, freeing an earlier call's tensors under its
# queue's lock, then waits for the GIL while this thread waits for that lock (a deadlock, 1 in ~10
# runs of a few all_gathers).  Each is handed to a plain C++ group of the same gloo, whose
# bindings release the GIL; both names torch looks up are given where it has two.
GLOO_OPS = ("allgather", "all_gather_single_coalesced", "allgather_into_tensor_coalesced", "allreduce_coalesced",
            "all_to_all_single", "alltoall_base", "barrier", "broadcast", "reduce_scatter",
            "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced", "send", "recv")


def _on_gloo(name: str) -> Callable[..., dist.Work]:
    def op(self: InaProcessGroup, *args: object, **kwargs: object) -> dist.Work:
        return getattr(self.plain, name)(*args, **kwargs)
    op.__name__ = name
    return op


class InaProcessGroup(dist.ProcessGroup):
    """The default group's allreduce through the switches; everything else through ``gloo``."""

    def __init__(self, rank: int, size: int, gloo: ProcessGroupGloo,
                 tensors: TensorWorker | NodeReducer | None) -> None:
        super().__init__(rank, size)
        self.gloo = gloo
        self.plain = dist.ProcessGroup(rank, size)  # gloo's, called without the GIL (GLOO_OPS)
        self.tensors = tensors  # None: a group that is not the job, all gloo
        self.setup_seconds: float | None = None  # from torch's call to the worker ready on every rank (the job)
        for group in (self, self.plain):  # what we do not override
            for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
                group._register_backend(torch.device(device), dist.ProcessGroup.BackendType.GLOO, gloo)
            group._set_default_backend(dist.ProcessGroup.BackendType.GLOO)

    @property
    def worker(self) -> Worker | None:
        return self.tensors.worker if self.tensors is not None else None

    @property
    def failure(self) -> BaseException | None:
        """The worker's first error (an ``AllreduceError``); C++ callers such as DDP keep only its text."""
        return self.tensors.failure if self.tensors is not None else None

    def getBackendName(self) -> str:  # noqa: N802 - torch's name
        return NAME

    def allreduce(self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions | None = None) -> dist.Work:
        opts = opts if opts is not None else dist.AllreduceOptions()
        op = opts.reduceOp
        average = op == dist.ReduceOp.AVG
        if self._switches_can(tensors, op):
            tensor = tensors[0]
            return FutureWork(self.tensors.allreduce_(tensor, tensors, divide=self.size() if average else 1),
                              self.tensors)
        if average:  # gloo has no AVG: its sum, divided here
            summed = dist.AllreduceOptions()
            summed.reduceOp, summed.timeout = dist.ReduceOp.SUM, opts.timeout
            size = self.size()
            future = self.plain.allreduce(tensors, summed).get_future()
            return FutureWork(future.then(lambda f: [divide_(t, size) for t in f.value()]))
        return self.plain.allreduce(tensors, opts)

    def _switches_can(self, tensors: list[torch.Tensor], op: dist.ReduceOp) -> bool:
        return (self.tensors is not None and len(tensors) == 1 and tensors[0].numel() > 0
                and tensors[0].dtype in WIRE_DTYPES and tensors[0].device.type in ("cpu", "cuda")
                and (op == dist.ReduceOp.SUM or op == dist.ReduceOp.AVG))

    def shutdown(self) -> None:
        if self.tensors is not None:
            self.tensors.close()
            self.tensors = None
        dist.ProcessGroup.shutdown(self)


for _name in GLOO_OPS:
    setattr(InaProcessGroup, _name, _on_gloo(_name))


def _create(options: dist.distributed_c10d._DistributedBackendOptions,
            pg_options: InaOptions | None) -> InaProcessGroup:
    """torch calls this for every group of backend "ina": the default group is the job."""
    started = time.perf_counter()
    store, rank, size = options.store, options.group_rank, options.group_size
    pg_options = pg_options if pg_options is not None else InaOptions()
    if not isinstance(pg_options, InaOptions):
        raise TypeError(f'the "ina" backend takes pg_options=InaOptions(...), not {type(pg_options).__name__}')
    gloo = ProcessGroupGloo(PrefixStore("gloo/", store), rank, size, options.timeout)
    subgroup = bool(options.global_ranks_in_group)  # made by new_group(): [] means the default group
    if subgroup and pg_options.spec is None:  # a later group is a job of its own only when given one
        warnings.warn(f"torch.distributed group {options.group_id} (ranks {list(options.global_ranks_in_group)}) "
                      f"sums with gloo: a later group is the switches' job only with its own spec "
                      f"(pg_options=InaOptions(spec=...))", stacklevel=2)
        return InaProcessGroup(rank, size, gloo, None)
    # INA_RANK names a rank of the default group, not of a later one
    group = InaProcessGroup(rank, size, gloo, join_switches(store, rank, size, pg_options, options.timeout,
                                                            named_rank=not subgroup))
    group.setup_seconds = time.perf_counter() - started
    return group


def join_switches(store: dist.Store, rank: int, size: int, options: InaOptions,
                  wait: timedelta, named_rank: bool = True) -> TensorWorker | NodeReducer:
    """This rank's way to the switches, ready on every rank or failed on all: its worker of the job (a
    node of one rank), or of its rail's job under the node's reduce-scatter (``worker.torch_node``)."""
    timeout = options.timeout if options.timeout is not None else float(os.environ.get("INA_TIMEOUT", DEFAULT_TIMEOUT))
    worker = layout = error = None
    try:
        layout = node_layout(store, rank, size, wait)
        worker, layout = _join(store, layout, options, timeout, wait, named_rank)
    except Exception as e:  # noqa: BLE001 - every rank hears of it, below
        error = f"{type(e).__name__}: {e}"
    try:
        _agree(store, rank, size, error, wait)
    except BaseException:
        if worker is not None:
            worker.close()
        raise
    tensors = TensorWorker(worker)
    if layout.local_size == 1:
        return tensors
    try:
        return NodeReducer(store, layout, tensors, local_timeout(timeout))
    except BaseException:
        tensors.close()
        raise


def _join(store: dist.Store, layout: NodeLayout, options: InaOptions, timeout: float,
          wait: timedelta, named_rank: bool = True) -> tuple[Worker, NodeLayout]:
    """This rank's worker of the job (its rail's, on a node of several ranks): the spec file's, or the
    controller service's.  A spec file of one member per rank, not named per rail, keeps every rank a
    member of its own (ranks of one host on loopback addresses, as before nodes had several)."""
    rail = layout.local_rank
    if options.spec is None and not os.environ.get("INA_JOB_SPEC") and os.environ.get(CONTROLLER_ENV):
        job, rails = _service_job(PrefixStore(SERVICE_KEYS, store), layout, wait)
        try:
            _check(job.spec, f"from controller {job.client.address}", layout, named_rank)
            window = options.window or nic_window(rails, layout)
            return Worker(job.spec, layout.node, timeout=timeout, window=window, service=job), layout
        except BaseException:
            job.close()
            raise
    path = spec_path(options.spec, rail)
    spec = JobSpec.load(path)
    size = sum(map(len, layout.ranks))
    per_rail = "{rail}" in str(options.spec if options.spec is not None else os.environ.get("INA_JOB_SPEC", ""))
    if layout.local_size > 1 and not per_rail:
        if len(spec.members) != size:
            raise ValueError(f"{layout.local_size} ranks per node sum through one job per rail: name each rail's "
                             f"spec with {{rail}} in INA_JOB_SPEC (ina-ctl job create NAME --nodes writes "
                             f"NAME-rail<i>.json), or give a job of one member per rank, not {path} "
                             f"({len(spec.members)} members)")
        layout = flat_layout(layout.rank, size)
    _check(spec, str(path), layout, named_rank)
    window = options.window
    if window is None and layout.local_size > 1:
        window = nic_window([JobSpec.load(spec_path(options.spec, i)) for i in range(layout.local_size)], layout)
    return Worker(spec, layout.node, timeout=timeout, window=window, spec_file=path), layout


def _check(spec: JobSpec, where: str, layout: NodeLayout, named_rank: bool = True) -> None:
    if len(spec.members) != layout.nodes and layout.local_size == 1:
        raise ValueError(f"the process group has {layout.nodes} ranks but job {spec.name} ({where}) has "
                         f"{len(spec.members)} workers: start one rank per job member")
    if len(spec.members) != layout.nodes:
        raise ValueError(f"the process group has {layout.nodes} nodes of {layout.local_size} ranks but job "
                         f"{spec.name} ({where}) has {len(spec.members)} workers: a rail's job has one member "
                         f"per node")
    rail = spec.rail
    if layout.local_size > 1 and rail is not None and (rail.index, rail.count) != (layout.local_rank,
                                                                                   layout.local_size):
        raise ValueError(f"job {spec.name} ({where}) is rail {rail.index} of {rail.count}, but this is local rank "
                         f"{layout.local_rank} of {layout.local_size}")
    named = os.environ.get("INA_RANK") if named_rank else None
    if named is not None and named.strip() != str(layout.rank):
        raise ValueError(f"INA_RANK={named} but torch.distributed made this process rank {layout.rank}")


def _service_job(store: dist.Store, layout: NodeLayout, wait: timedelta) -> tuple[ServiceJob, list[JobSpec]]:
    """Every rank posts its addresses; rank 0 asks the service for a job of them (a job per rail, one
    member per node, when nodes run several ranks) and posts it (an empty reply if it could not: every
    rank posts something, so none waits for a failed one).  Each rank holds the secret and renews its
    job's lease; node 0's ranks own their rails' jobs."""
    rank, size = layout.rank, sum(map(len, layout.ranks))
    if rank != 0:
        try:
            store.set(f"addr/{rank}", json.dumps(local_addresses()))
        except BaseException:
            store.set(f"addr/{rank}", "")  # rank 0 sees there is no job to ask for; our reason goes to _agree
            raise
        store.wait(["job"], wait)
        reply = jobs_pb2.CreateJobReply.FromString(store.get("job"))
        if not reply.secret:
            raise RuntimeError("rank 0 got no job from the controller service")
        job = reply.rails[layout.local_rank] if layout.local_size > 1 else reply.job
        held = ServiceJob(JobsClient.from_env(), job, reply.secret, owner=layout.node == 0, own_client=True)
        return held, _rail_specs(reply, held)
    try:
        addresses = [local_addresses()]
        store.wait([f"addr/{r}" for r in range(1, size)], wait)
        posted = [store.get(f"addr/{r}").decode() for r in range(1, size)]
        missing = [r for r, given in enumerate(posted, 1) if not given]
        if missing:
            raise RuntimeError(f"rank(s) {', '.join(map(str, missing))} gave no address, so no job was asked for")
        addresses += [json.loads(a) for a in posted]
        client = JobsClient.from_env()
        try:
            reply = _create_job(client, layout, addresses)
            job = reply.rails[0] if layout.local_size > 1 else reply.job
            held = ServiceJob(client, job, reply.secret, owner=True, own_client=True)
        except BaseException:
            client.close()
            raise
    except BaseException:
        store.set("job", b"")
        raise
    try:
        store.set("job", reply.SerializeToString())
    except BaseException:
        held.close()
        raise
    return held, _rail_specs(reply, held)


def _rail_specs(reply: jobs_pb2.CreateJobReply, held: ServiceJob) -> list[JobSpec]:
    if not reply.rails:
        return [held.spec]
    return [JobSpec.from_json(job.spec_json, f"job {job.name} from controller {held.client.address}")
            for job in reply.rails]


def _create_job(client: JobsClient, layout: NodeLayout, addresses: list[list[str]]) -> jobs_pb2.CreateJobReply:
    """Named by torchrun's run id (a name taken gets a random suffix), else by the service: a job of every
    rank, or of every node's ranks (a job per rail)."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    name = "" if run in ("", "none") else re.sub(r"[^A-Za-z0-9_-]", "-", run)[:40]
    nodes = [[addresses[r] for r in ranks] for ranks in layout.ranks]
    for attempt in range(4):
        try:
            given = f"{name}-{secrets.token_hex(3)}" if attempt else name
            if layout.local_size == 1:
                job, secret = client.create(given, [node[0] for node in nodes])
                return jobs_pb2.CreateJobReply(job=job, secret=secret)
            rails, secret = client.create_rails(given, nodes)
            return jobs_pb2.CreateJobReply(job=rails[0], secret=secret, rails=rails)
        except ServiceError as e:
            if e.code != grpc.StatusCode.ALREADY_EXISTS or not name or attempt == 3:
                raise
    raise AssertionError("unreachable")


def _agree(store: dist.Store, rank: int, size: int, error: str | None, timeout: timedelta) -> None:
    """Every rank posts how its set-up went and reads everyone's: one rank's failure fails them all."""
    store.set(f"ina-setup/{rank}", error or "")
    keys = [f"ina-setup/{r}" for r in range(size)]
    try:
        store.wait(keys, timeout)
    except RuntimeError as e:  # torch's store timeout (DistStoreError)
        raise RuntimeError(f'init_process_group("ina"): not every rank set up within {timeout}: {e}') from None
    failed = [(r, store.get(key).decode()) for r, key in enumerate(keys)]
    failed = [(r, why) for r, why in failed if why]
    if failed:
        reasons = "; ".join(f"rank {r}: {why}" for r, why in failed)
        raise RuntimeError(f'init_process_group("ina"): {len(failed)} of {size} ranks cannot join the job: {reasons}')


def register() -> None:
    """Make ``"ina"`` a torch.distributed backend name (the ``torch.backends`` entry point calls this)."""
    if NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu", "cuda"])


register()
