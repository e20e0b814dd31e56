"""A job of the controller service (``ina-ctl serve``) as one rank holds it: asked for by address,
its lease kept, its spec followed.  No torch here: ``Worker.from_controller`` and the torch
backend both build on it.

    job = ServiceJob.create(JobsClient.from_env(), "train", [["10.0.1.1"], ["10.0.1.2"]])  # rank 0
    job = ServiceJob.join(JobsClient.from_env(), "train")                                # the others
    worker = Worker(job.spec, rank, service=job)  # follows the spec; closes the job with itself
"""

from __future__ import annotations

import ipaddress
import os
import threading
import time
import warnings
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import grpc

from ina_api import jobs_pb2
from ina_api.client import JobsClient, LeaseKeeper, ServiceError
from worker.driver import STALL_FLOOR
from worker.jobspec import JobSpec

ADDRESS_ENV = "INA_ADDRESS"  # comma-separated: the addresses this rank may send from (else the host's)
JOIN_TIMEOUT = 60.0  # seconds a rank waits for the job another rank creates
JOIN_POLL = 0.1
FOLLOW_INTERVAL = 2.0  # most seconds between looks at the spec: a restart is recovered once a worker sees it


def local_addresses() -> list[str]:
    """This host's IPv4 addresses but loopback, for the service to take the one its network knows;
    ``INA_ADDRESS`` overrides (ranks on one host's loopback, a host with an address it must not use)."""
    given = os.environ.get(ADDRESS_ENV)
    if given is not None:
        addresses = [a.strip() for a in given.split(",") if a.strip()]
        if not addresses:
            raise ValueError(f"{ADDRESS_ENV} is set but names no address")
        return addresses
    try:  # every local address of every table, unlike SIOCGIFADDR's one per interface
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError as e:
        raise OSError(f"cannot list this host's addresses ({e}): set {ADDRESS_ENV}") from None
    found, last = [], ""
    for line in lines:
        if "|--" in line:
            last = line.split()[-1]
        elif line.strip() == "/32 host LOCAL" and not ipaddress.ip_address(last).is_loopback:
            found.append(last)
    if not found:
        raise OSError(f"this host has no IPv4 address but loopback: set {ADDRESS_ENV}")
    return list(dict.fromkeys(found))


class ServiceJob:
    """One rank's hold on a job of the service: its latest spec, and a ``LeaseKeeper`` that renews the
    lease (given the secret) or only follows the spec (without), handing every newer spec to ``follow``'s
    callback.  ``owner``: ``close`` deletes the job (the rank that created it)."""

    def __init__(self, client: JobsClient, job: jobs_pb2.Job, secret: str | None = None, *, owner: bool = False,
                 own_client: bool = False, interval: float | None = None) -> None:
        """``own_client``: ``close`` closes ``client`` too.  ``interval``: seconds between renewals (or
        looks); default a third of the lease, at most ``FOLLOW_INTERVAL`` (a long lease must not leave a
        worker with a spec too old to recover a restart within its timeout)."""
        if owner and not secret:
            raise ValueError(f"job {job.name}: only a rank with its secret can own (delete) it")
        self.client, self.name, self.secret, self.owner = client, job.name, secret, owner
        self.spec = self._parsed(job.spec_json)
        self._own_client, self._closed = own_client, False
        self._lock = threading.Lock()  # one spec at a time reaches the callback, in order
        self._on_spec: Callable[[JobSpec], object] | None = None
        if interval is None:
            interval = min(job.lease_seconds / 3 or FOLLOW_INTERVAL, FOLLOW_INTERVAL)
        self._keeper = LeaseKeeper(client, job, secret, on_spec=self._new_spec, interval=interval,
                                   early_gap=STALL_FLOOR)

    @classmethod
    def create(cls, client: JobsClient, name: str, members: Sequence[Sequence[str] | str], *,
               own_client: bool = False, **options) -> ServiceJob:
        """A new job (``options``: ``JobsClient.create``'s), owned by this rank."""
        job, secret = client.create(name, members, **options)
        return cls(client, job, secret, owner=True, own_client=own_client)

    @classmethod
    def join(cls, client: JobsClient, name: str, timeout: float = JOIN_TIMEOUT, secret: str | None = None, *,
             own_client: bool = False) -> ServiceJob:
        """The job ``name`` once the service has it: another rank creates it, maybe after we look."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return cls(client, client.get(name), secret, own_client=own_client)
            except ServiceError as e:
                if e.code != grpc.StatusCode.NOT_FOUND:
                    raise
                if time.monotonic() >= deadline:
                    raise ServiceError(f"controller {client.address}: no job {name!r} after {timeout:g} s: the rank "
                                       f"that creates it (rank 0) has not (did it fail? do all ranks give the same "
                                       f"name?)", e.code) from None
            time.sleep(JOIN_POLL)

    @property
    def failure(self) -> Exception | None:
        """The last renewal (or look) that failed, until one succeeds."""
        return self._keeper.failure

    def follow(self, on_spec: Callable[[JobSpec], object],
               stalled: Callable[[], Collection[int]] | None = None) -> None:
        """``on_spec`` gets the latest spec now (it may be newer than the one a worker was built from), then
        every newer one, in order.  ``stalled``: see ``report_stalls``."""
        if stalled is not None:
            self.report_stalls(stalled)
        with self._lock:
            self._on_spec = on_spec
            on_spec(self.spec)

    def report_stalls(self, stalled: Callable[[], Collection[int]]) -> None:
        """Each renewal reports the trees ``stalled`` names (a worker's ``stalled_trees``: job ids), and
        ``stalled_now`` renews at once; a rank without the secret does not renew, so it reports nothing."""
        self._keeper.stalled = stalled

    def stalled_now(self) -> None:
        """A tree became stalled: renew now (no sooner than STALL_FLOOR after the last renewal)."""
        self._keeper.stalled_now()

    def close(self, delete: bool | None = None) -> None:
        """Stop renewing (or following), and with ``delete`` (default: ``owner``) give the job back at
        once.  A job already gone is no error; one the service cannot delete now is a warning: its lease
        runs out."""
        if self._closed:
            return
        self._closed = True
        self._keeper.stop()
        try:
            if self.owner if delete is None else delete:
                self.client.delete(self.name, self.secret or "")
        except ServiceError as e:
            if e.code != grpc.StatusCode.NOT_FOUND:
                warnings.warn(f"job {self.name} was not deleted (its lease will run out): {e}", stacklevel=2)
        finally:
            if self._own_client:
                self.client.close()

    def _new_spec(self, text: str) -> None:
        spec = self._parsed(text)
        with self._lock:
            self.spec = spec
            if self._on_spec is not None:
                self._on_spec(spec)

    def _parsed(self, text: str) -> JobSpec:
        return JobSpec.from_json(text, f"job {self.name} from controller {self.client.address}")
