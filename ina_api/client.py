"""``JobsClient``: one connection to the controller service (``ina-ctl serve``), with the cluster's token.

    client = JobsClient.from_env()             # INA_CONTROLLER=host:port, INA_TOKEN_FILE=path
    job, secret = client.create("", [["10.0.1.1"], ["10.0.1.2"]])
    client.keep_alive(job.name, secret)        # every lease_seconds / 3 (LeaseKeeper does it)
    client.delete(job.name, secret)

    # two nodes of two local ranks (a NIC each): a job per rail, train-rail0 of both nodes' rank 0, ...
    rails, secret = client.create_rails("train", [[["10.0.1.1"], ["10.1.1.1"]], [["10.0.1.2"], ["10.1.1.2"]]])
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import grpc

from ina_api import jobs_pb2, jobs_pb2_grpc

CONTROLLER_ENV = "INA_CONTROLLER"
TOKEN_ENV = "INA_TOKEN_FILE"
AUTH_HEADER = "authorization"  # gRPC metadata keys are lower case
AUTH_SCHEME = "Bearer "
STALL_FOLLOW_UP = 0.25  # s after a beat while trees are stalled, the next (doubling while they stay so): just
#                         past the service's probe deadline (controller.failover.PROBE_DEADLINE), so a moved
#                         tree's spec comes with it, not an interval (2 s) later


class ServiceError(RuntimeError):
    """A call the service refused or could not be reached for; ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def read_token(path: str | Path) -> str:
    """The cluster's token: the file's first line, which must not be empty."""
    try:
        token = Path(path).read_text().strip().splitlines()
    except OSError as e:
        raise ServiceError(f"cannot read the cluster's token from {path}: {e}") from None
    if not token or not token[0].strip():
        raise ServiceError(f"{path} holds no token (its first line is empty)")
    return token[0].strip()


class JobsClient:
    def __init__(self, address: str, token: str, timeout: float = 10.0) -> None:
        """``timeout``: seconds each call may take before it fails with DEADLINE_EXCEEDED."""
        if not address or ":" not in address:
            raise ServiceError(f"the controller's address must be host:port, not {address!r}")
        self.address, self.timeout = address, timeout
        self._metadata = ((AUTH_HEADER, AUTH_SCHEME + token),)
        self._channel = grpc.insecure_channel(address)
        self._stub = jobs_pb2_grpc.JobsStub(self._channel)

    @classmethod
    def from_env(cls, **options) -> JobsClient:
        address = os.environ.get(CONTROLLER_ENV)
        if not address:
            raise ServiceError(f"set {CONTROLLER_ENV}=host:port to the controller service (ina-ctl serve)")
        token_file = os.environ.get(TOKEN_ENV)
        if not token_file:
            raise ServiceError(f"set {TOKEN_ENV} to the file that holds the cluster's token")
        return cls(address, read_token(token_file), **options)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> JobsClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(self, method: str, request):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            code = e.code()
            raise ServiceError(f"controller {self.address}: {method}: {code.name}: {e.details()}", code) from None

    def create(self, name: str, members: Sequence[Sequence[str] | str], *, values: int = 0, mode: str = "",
               trees: int = 0, pool_size: int = 0, lease_seconds: float = 0.0,
               ring_sum: str = "", ring_layout: str = "", lanes: int | str = "") -> tuple[jobs_pb2.Job, str]:
        """A job of these members in rank order (each a host name or address, or a list of a rank's
        addresses); returns the job and its secret.  ``lanes``: each planned tree as N trees, or "auto"."""
        request = jobs_pb2.CreateJobRequest(
            name=name, members=[_member(m) for m in members], values=values, mode=mode, trees=trees,
            pool_size=pool_size, lease_seconds=lease_seconds, ring_sum=ring_sum, ring_layout=ring_layout,
            lanes=str(lanes))
        reply = self._call("CreateJob", request)
        return reply.job, reply.secret

    def create_rails(self, name: str, nodes: Sequence[Sequence[Sequence[str] | str]], *, values: int = 0,
                     mode: str = "", trees: int = 0, pool_size: int = 0, lease_seconds: float = 0.0,
                     ring_sum: str = "", ring_layout: str = "",
                     lanes: int | str = "") -> tuple[list[jobs_pb2.Job], str]:
        """A rail set: ``nodes`` in node order, each its local ranks in order, each rank as ``create``'s members
        are.  Returns rail i's job at index i (``NAME-rail<i>``, of every node's local rank i; ``create``'s
        options apply to each) and the one secret that renews and deletes every rail; all are made or none."""
        request = jobs_pb2.CreateJobRequest(
            name=name, nodes=[jobs_pb2.Node(ranks=[_member(m) for m in node]) for node in nodes], values=values,
            mode=mode, trees=trees, pool_size=pool_size, lease_seconds=lease_seconds, ring_sum=ring_sum,
            ring_layout=ring_layout, lanes=str(lanes))
        reply = self._call("CreateJob", request)
        return list(reply.rails), reply.secret

    def keep_alive(self, name: str, secret: str, stalled: Sequence[int] = ()) -> jobs_pb2.KeepAliveReply:
        """Renew the lease; ``stalled``: job ids of the job's trees this worker finds stalled (the service
        probes their switches)."""
        return self._call("KeepAlive", jobs_pb2.KeepAliveRequest(name=name, secret=secret, stalled_trees=stalled))

    def delete(self, name: str, secret: str) -> None:
        self._call("DeleteJob", jobs_pb2.DeleteJobRequest(name=name, secret=secret))

    def get(self, name: str) -> jobs_pb2.Job:
        return self._call("GetJob", jobs_pb2.GetJobRequest(name=name))

    def list(self) -> list[jobs_pb2.Job]:
        return list(self._call("ListJobs", jobs_pb2.ListJobsRequest()).jobs)

    def status(self, counters: bool = False) -> jobs_pb2.StatusReply:
        return self._call("Status", jobs_pb2.StatusRequest(counters=counters))

    def plan_direct(self, cluster: dict, nbytes: int, kinds: Sequence[str] = ()) -> dict:
        """A direct-connect cluster's plan for calls of ``nbytes`` per worker (docs/direct.md), as a dict."""
        reply = self._call("PlanDirect", jobs_pb2.PlanDirectRequest(cluster_json=json.dumps(cluster), bytes=nbytes,
                                                                    kinds=list(kinds)))
        return json.loads(reply.plan_json)


def _member(rank: Sequence[str] | str) -> jobs_pb2.Member:
    """A rank as a host name or address, or the list of its addresses."""
    return jobs_pb2.Member(addresses=[rank] if isinstance(rank, str) else list(rank))


class LeaseKeeper:
    """Renews a job's lease every third of its time to live, on a thread of its own, until ``stop``;
    ``on_spec`` gets the job's new spec (JSON) whenever its version grows (a tree moved, a switch lost
    its registers).  Without a secret it only follows the spec (GetJob at each beat), for ranks that do
    not own the job.  A beat that fails is tried again at the next; ``failure`` keeps the last (an
    ``on_spec`` that raised too: the thread goes on).

    Each renewal carries the trees ``stalled`` names (job ids; a worker's ``stalled_trees``), and
    ``stalled_now`` renews at once, without waiting for the interval, at most once per ``early_gap``.
    A beat while trees are stalled is followed by another STALL_FOLLOW_UP later, doubling while they
    stay stalled, to fetch the spec the service's probe may have changed (a keeper without the secret
    reports nothing, but follows up the same way: its rank's trees move with the owner's report)."""

    def __init__(self, client: JobsClient, job: jobs_pb2.Job, secret: str | None,
                 on_spec: Callable[[str], None] | None = None, interval: float | None = None,
                 early_gap: float = 0.02) -> None:
        self.client, self.name, self.secret, self.on_spec = client, job.name, secret, on_spec
        self.interval = interval if interval is not None else max(job.lease_seconds / 3, 0.05)
        self.early_gap = early_gap
        self.version = job.spec_version
        self.failure: Exception | None = None
        self.stalled: Callable[[], Collection[int]] | None = None  # the trees to report with each renewal
        self._stop = threading.Event()
        self._early = threading.Event()  # a tree became stalled (or ``stop``): renew now
        self._last = -float("inf")  # when the last beat went (``time.monotonic``)
        self._follow_up: float | None = None  # after beats while trees were stalled: the wait for the next
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"ina-lease-{job.name}")
        self._thread.start()

    def stalled_now(self) -> None:
        """A tree became stalled: renew at once (or ``early_gap`` after the last renewal).  Only a renewal
        reports stalls; a keeper without the secret looks at the spec instead, and both follow up."""
        self._early.set()

    def _beat(self) -> bool:
        """Wait for the next beat: the interval, or a stall (no sooner than ``early_gap`` after the last
        beat); False once stopped."""
        wait = self.interval if self._follow_up is None else min(self.interval, self._follow_up)
        if self._early.wait(wait):
            self._early.clear()
            if not self._stop.is_set():
                self._stop.wait(self._last + self.early_gap - time.monotonic())
        if self._stop.is_set():
            return False
        self._last = time.monotonic()
        return True

    def _run(self) -> None:
        while self._beat():
            try:
                stalled = sorted(self.stalled()) if self.stalled is not None else []
                if self.secret is None:
                    job = self.client.get(self.name)
                    version = job.spec_version
                else:
                    job, version = None, self.client.keep_alive(self.name, self.secret, stalled).spec_version
                if not stalled:
                    self._follow_up = None
                else:
                    self._follow_up = STALL_FOLLOW_UP if self._follow_up is None else 2 * self._follow_up
                self.failure = None
                if version != self.version and self.on_spec is not None:
                    job = job if job is not None else self.client.get(self.name)
                    self.version = job.spec_version
                    self.on_spec(job.spec_json)
            except Exception as e:  # noqa: BLE001 - the service's, or on_spec's: kept, and the next beat tries again
                self.failure = e

    def stop(self) -> None:
        self._stop.set()
        self._early.set()
        self._thread.join(timeout=self.client.timeout + 1)
