"""`ina-ctl serve`: the controller as one long-running process that training jobs ask for their switches.

It serves ``ina_api/jobs.proto`` (and the standard gRPC health service), is the one writer of the
state file, expires jobs whose lease is not renewed, and does what ``watch`` did: re-provisions
switches that restart and moves trees off switches and links that stay down.

Three kinds of thread touch it, and none waits for another's slow work: gRPC's (requests; a
create plans without the controller's lock and writes switches with it), the lease thread
(expiry, every ``TICK``), the watch thread.  A renewal only touches ``Leases``, and a renewal that reports
stalled trees queues them for the watch thread, which probes their switches (``Controller.probe``) before
its next round, at once.
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import json
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from controller import direct
from controller.capacity import CapacityError
from controller.controller import Controller, JobError, JobExists, NoSuchJob
from controller.direct import DirectCluster, DirectError
from controller.job_plan import MAX_LANES, REFERENCE_SIZES
from controller.leases import Leases, NoLease, WrongSecret, new_secret
from controller.p4runtime_client import SwitchError
from controller.state import JobRecord
from ina_api import jobs_pb2, jobs_pb2_grpc
from ina_api.client import AUTH_HEADER, AUTH_SCHEME
from worker.jobspec import RING_SUMS, rail_name
from worker.ring_layout import LAYOUTS
from worker.tuner import MODES

log = logging.getLogger("ina.service")
DEFAULT_LEASE = 6.0  # seconds a job lives unrenewed; its owner renews every third of it
MAX_LEASE = 7 * 86400.0  # a hand-made job (`ina-ctl job create --controller`) may hold a long one
TICK = 0.2  # seconds between looks for expired leases
SERVICE_NAME = "ina.jobs.v1.Jobs"  # the health service answers for it and for ""
MAX_NAME = 64
MAX_TREES = 64
MAX_ADDRESSES = 256  # of one rank: every interface's IPv4 and IPv6 addresses fit, many times over
MAX_RAILS = 16  # local ranks of a node in a rail set (CreateJobRequest.nodes): GPUs per machine, with room


class Refused(Exception):
    """A request answered with this gRPC status and message (the service goes on)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Malformed:
    """A request whose bytes did not parse: answered INVALID_ARGUMENT (gRPC's own parse failure says INTERNAL)."""

    error: str


def _lenient(message_type: type) -> Callable[[bytes], object]:
    def parse(data: bytes) -> object:
        try:
            return message_type.FromString(data)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, or a RuntimeWarning-ish from the C parser
            return Malformed(f"{type(e).__name__}: {e}")
    return parse


def _handlers(service: JobsService) -> grpc.GenericRpcHandler:
    """The Jobs service's methods as generated code names them, each parsing its request leniently."""
    methods = jobs_pb2.DESCRIPTOR.services_by_name["Jobs"].methods
    return grpc.method_handlers_generic_handler(SERVICE_NAME, {
        m.name: grpc.unary_unary_rpc_method_handler(
            getattr(service, m.name), request_deserializer=_lenient(getattr(jobs_pb2, m.input_type.name)),
            response_serializer=lambda reply: reply.SerializeToString())
        for m in methods})


class JobsService(jobs_pb2_grpc.JobsServicer):
    def __init__(self, controller: Controller, token: str, lease_seconds: float = DEFAULT_LEASE,
                 grace: float | None = None, clock: Callable[[], float] = time.monotonic,
                 pool_size: int | None = None) -> None:
        """``grace``: how long jobs found in the state file at start live before their first renewal is due
        (default: twice the lease), so a restart of the service does not expire jobs that kept running.
        ``pool_size``: what a job that asks for none gets (before admission); None: its trees' bandwidth-delay
        product, shared fairly (``controller.windows``)."""
        if not token:
            raise ValueError("the service needs a non-empty token")
        self.controller, self.token, self.lease_seconds, self.clock = controller, token, lease_seconds, clock
        self.pool_size = pool_size
        self.leases = Leases()
        self.started = clock()
        grace = 2 * lease_seconds if grace is None else grace
        for job in controller.state.jobs.values():
            if job.lease_seconds is not None and job.secret_hash is not None:
                self.leases.hold(job.name, job.lease_seconds, job.secret_hash, self.started, grace)
        self._by_ip = {str(h.ip.ip): name for name, h in controller.topology.hosts.items()}
        self._stalls: dict[str, set[int]] = {}  # job: tree ids reported stalled, for the watch thread to probe
        self._stalls_lock = threading.Lock()

    # --- the API -------------------------------------------------------------------------------

    def CreateJob(self, request, context):  # noqa: N802 - gRPC's names
        return self._answer(context, self._create, request)

    def KeepAlive(self, request, context):  # noqa: N802
        return self._answer(context, self._keep_alive, request)

    def DeleteJob(self, request, context):  # noqa: N802
        return self._answer(context, self._delete, request)

    def GetJob(self, request, context):  # noqa: N802
        return self._answer(context, lambda r: self._job_message(self._record(r.name)), request)

    def ListJobs(self, request, context):  # noqa: N802
        return self._answer(context, lambda _: jobs_pb2.ListJobsReply(jobs=self._all_jobs()), request)

    def Status(self, request, context):  # noqa: N802
        return self._answer(context, self._status, request)

    def PlanDirect(self, request, context):  # noqa: N802
        return self._answer(context, _plan_direct, request)

    def _answer(self, context: grpc.ServicerContext, handler: Callable, request):
        """The handler's reply, or the status its failure maps to: a bad request never escapes as a crash."""
        try:
            self._authenticate(context)
            if isinstance(request, Malformed):
                raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"malformed request: {request.error}")
            return handler(request)
        except Refused as e:
            code, message = e.code, str(e)
        except JobExists as e:
            code, message = grpc.StatusCode.ALREADY_EXISTS, str(e)
        except (NoSuchJob, NoLease) as e:
            code, message = grpc.StatusCode.NOT_FOUND, f"no job named {e.args[0]!r}" if isinstance(e, NoLease) \
                else str(e)
        except WrongSecret as e:
            code, message = grpc.StatusCode.PERMISSION_DENIED, str(e)
        except (JobError, CapacityError, DirectError) as e:
            code, message = grpc.StatusCode.INVALID_ARGUMENT, str(e)
        except (SwitchError, OSError) as e:
            code, message = grpc.StatusCode.UNAVAILABLE, f"a switch did not answer: {e}"
        except Exception as e:  # noqa: BLE001 - a bug answers INTERNAL and is logged; the service stays up
            log.exception("%s failed", handler)
            code, message = grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}"
        context.abort(code, message)

    def _authenticate(self, context: grpc.ServicerContext) -> None:
        given = dict(context.invocation_metadata()).get(AUTH_HEADER, "")
        if not isinstance(given, str) or not given.startswith(AUTH_SCHEME):
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, f"no token: send metadata '{AUTH_HEADER}: "
                                                           f"{AUTH_SCHEME}<the cluster's token>'")
        if not hmac.compare_digest(given[len(AUTH_SCHEME):].encode(), self.token.encode()):
            raise Refused(grpc.StatusCode.UNAUTHENTICATED, "wrong token")

    def _create(self, request: jobs_pb2.CreateJobRequest) -> jobs_pb2.CreateJobReply:
        if request.nodes:
            return self._create_rails(request)
        members = self._members(request.members)
        ask = _checked(request, self.controller.state.options.values, self.lease_seconds, self.pool_size)
        name = request.name or self._fresh_name()
        if len(name) > MAX_NAME:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"job name is {len(name)} characters; at most {MAX_NAME}")
        secret, secret_hash = new_secret()
        self.controller.create_job(name, members, ask["pool_size"], None, ask["trees"], ask["mode"], None,
                                   ask["ring_sum"], ask["ring_layout"], admit=True, lease=(ask["lease"], secret_hash),
                                   lanes=ask["lanes"])
        self.leases.hold(name, ask["lease"], secret_hash, self.clock())
        job = self.controller.state.jobs[name]
        log.info("job %s: created for %s: %s%s", name, ", ".join(members), job.mode,
                 f" ({job.admission})" if job.admission else "")
        return jobs_pb2.CreateJobReply(job=self._job_message(job), secret=secret)

    def _create_rails(self, request: jobs_pb2.CreateJobRequest) -> jobs_pb2.CreateJobReply:
        """A rail set (``CreateJobRequest.nodes``): a job per local rank, each an ordinary job with the request's
        options, all made or none (``Controller.create_rails``), every lease held with one secret."""
        if request.members:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "give either members (a job) or nodes (a rail set), "
                                                            "not both")
        rails = self._rails(request.nodes)
        ask = _checked(request, self.controller.state.options.values, self.lease_seconds, self.pool_size)
        name = request.name or self._fresh_name(len(rails))
        names = [rail_name(name, i) for i in range(len(rails))]
        if len(names[-1]) > MAX_NAME:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"rail job name {names[-1]} is {len(names[-1])} "
                                                            f"characters; at most {MAX_NAME}")
        taken = [n for n in names if n in self.controller.state.jobs]
        if taken:
            raise JobExists(f"rail set {name}: job(s) {', '.join(taken)} exist already")
        secret, secret_hash = new_secret()
        self.controller.create_rails(name, rails, pool_size=ask["pool_size"], trees=ask["trees"], mode=ask["mode"],
                                     ring_sum=ask["ring_sum"], ring_layout=ask["ring_layout"], admit=True,
                                     lease=(ask["lease"], secret_hash), lanes=ask["lanes"])
        now = self.clock()
        for each in names:
            self.leases.hold(each, ask["lease"], secret_hash, now)
        jobs = [self._job_message(self.controller.state.jobs[each]) for each in names]
        each_rail = [f"{j.name} for {', '.join(members)}: {j.mode}" + (f" ({j.admission})" if j.admission else "")
                     for j, members in zip(jobs, rails)]
        log.info("rail set %s: %d node(s) x %d rail(s) created: %s", name, len(request.nodes), len(rails),
                 "; ".join(each_rail))
        return jobs_pb2.CreateJobReply(job=jobs[0], secret=secret, rails=jobs)

    def _keep_alive(self, request: jobs_pb2.KeepAliveRequest) -> jobs_pb2.KeepAliveReply:
        seconds = self.leases.renew(request.name, request.secret, self.clock())
        job = self.controller.state.jobs.get(request.name)
        if job is not None and request.stalled_trees:
            self._report_stall(job, request.stalled_trees)
        return jobs_pb2.KeepAliveReply(lease_seconds=seconds, spec_version=job.spec_version() if job else 0)

    def _delete(self, request: jobs_pb2.DeleteJobRequest) -> jobs_pb2.DeleteJobReply:
        self.leases.check(request.name, request.secret)
        self.controller.delete_job(request.name)
        self.leases.release(request.name)
        log.info("job %s: deleted by its owner", request.name)
        return jobs_pb2.DeleteJobReply()

    def _status(self, request: jobs_pb2.StatusRequest) -> jobs_pb2.StatusReply:
        ctl = self.controller
        switches = [jobs_pb2.SwitchCapacity(**dataclasses.asdict(ctl.room(s)), reachable=ctl.reachable(s))
                    for s in ctl.topology.switches]
        jobs = self._all_jobs()
        if request.counters:
            counted = ctl.status()["jobs"]
            for job in jobs:
                for per_switch in counted.get(job.name, {}).values():
                    for counter, n in per_switch.items():
                        job.packets[counter] += n
        return jobs_pb2.StatusReply(jobs=jobs, switches=switches, uptime_seconds=self.clock() - self.started,
                                    state_file=str(ctl.state_path or ""))

    def _report_stall(self, job: JobRecord, reported) -> None:
        """Queue the job's trees a worker reports stalled for the watch thread (``take_stalls``), and wake it;
        ids that are not the job's trees are ignored.  Reports of many ranks merge until it takes them."""
        ids = {t.job_id for t in job.trees} & set(reported)
        if not ids:
            log.debug("job %s: stalled tree(s) %s reported, none of them the job's: ignored", job.name,
                      sorted(reported)[:8])
            return
        with self._stalls_lock:
            self._stalls.setdefault(job.name, set()).update(ids)
        self.controller.wake.set()

    def take_stalls(self) -> dict[str, set[int]]:
        """The trees reported stalled since the last call, by job."""
        with self._stalls_lock:
            taken, self._stalls = self._stalls, {}
        return taken

    def probe_stalls(self) -> bool:
        """Probe the switches of the trees reported stalled (``Controller.probe``); True when a watch round
        ran because one did not answer."""
        ran = False
        for name, ids in self.take_stalls().items():
            try:
                ran |= bool(self.controller.probe(name, ids))
            except Exception:  # noqa: BLE001 - one job's probe must not keep the others' or the round
                log.exception("job %s: probe of stalled tree(s) %s failed", name, sorted(ids))
        return ran

    # --- the pieces ----------------------------------------------------------------------------

    def _members(self, members) -> list[str]:
        """Each rank's host: the one of its addresses (or names) the network knows."""
        if not members:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "a job needs at least one member")
        if len(members) > len(self.controller.topology.hosts):
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{len(members)} members, but the network has "
                                                            f"{len(self.controller.topology.hosts)} hosts")
        hosts = [self._member_host(f"rank {rank}", member) for rank, member in enumerate(members)]
        twice = sorted({h for h in hosts if hosts.count(h) > 1})
        if twice:
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"host(s) {', '.join(twice)} given for several ranks")
        return hosts

    def _rails(self, nodes) -> list[list[str]]:
        """Each rail's members (rail i: every node's local rank i, in node order), each rank's host found as
        ``_members`` finds it.  A host may serve several local ranks of one node (fewer NICs than GPUs: its
        rails share the NIC), never two nodes: each rail job would hold it twice."""
        bad = grpc.StatusCode.INVALID_ARGUMENT
        if len(nodes) > len(self.controller.topology.hosts):
            raise Refused(bad, f"{len(nodes)} nodes, but the network has {len(self.controller.topology.hosts)} hosts")
        count = len(nodes[0].ranks)
        for n, node in enumerate(nodes):
            if not 1 <= len(node.ranks) <= MAX_RAILS:
                raise Refused(bad, f"node {n}: {len(node.ranks)} local ranks; 1..{MAX_RAILS}")
            if len(node.ranks) != count:
                raise Refused(bad, f"node {n}: {len(node.ranks)} local ranks, but node 0 has {count}: every node "
                                   f"of a rail set needs the same")
        hosts = [[self._member_host(f"node {n} local rank {i}", rank) for i, rank in enumerate(node.ranks)]
                 for n, node in enumerate(nodes)]
        seen: dict[str, int] = {}
        for n, node_hosts in enumerate(hosts):
            for host in node_hosts:
                first = seen.setdefault(host, n)
                if first != n:
                    raise Refused(bad, f"host {host} is in nodes {first} and {n}: a host serves one node's ranks")
        return [[node_hosts[i] for node_hosts in hosts] for i in range(count)]

    def _member_host(self, who: str, member: jobs_pb2.Member) -> str:
        """The one host of the network among a rank's addresses (or names); ``who`` names the rank in errors."""
        if len(member.addresses) > MAX_ADDRESSES:  # each is looked at: exactly one must be known
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{who}: {len(member.addresses)} addresses; "
                                                            f"at most {MAX_ADDRESSES}")
        known = {h for h in map(self._host, member.addresses) if h is not None}
        if len(known) != 1:
            shown = ", ".join(repr(a) for a in member.addresses[:8]) or "no address"
            why = "none is a host of the network" if not known else f"they name {len(known)} hosts"
            raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{who}: {shown}: {why}")
        return known.pop()

    def _host(self, address: str) -> str | None:
        if address in self.controller.topology.hosts:
            return address
        try:
            return self._by_ip.get(str(ipaddress.ip_address(address)))
        except ValueError:
            return None

    def _fresh_name(self, rails: int = 0) -> str:
        """An unused job name; with ``rails``, a set's, none of whose rail jobs exists."""
        while True:
            name = f"job-{secrets.token_hex(4)}"
            names = [rail_name(name, i) for i in range(rails)] if rails else [name]
            if not any(each in self.controller.state.jobs for each in names):
                return name

    def _record(self, name: str) -> JobRecord:
        job = self.controller.state.jobs.get(name)
        if job is None:
            raise NoSuchJob(f"no job named {name!r}")
        return job

    def _all_jobs(self) -> list[jobs_pb2.Job]:
        found = []
        for job in list(self.controller.state.jobs.values()):
            try:
                found.append(self._job_message(job))
            except NoSuchJob:  # deleted (or expired) since the list was taken
                pass
        return found

    def _job_message(self, job: JobRecord) -> jobs_pb2.Job:
        spec = self.controller.job_spec(job.name)
        remaining = self.leases.remaining(job.name, self.clock())
        planned = self.controller.job_plan(job.name)
        predictions = []
        for size in REFERENCE_SIZES:
            chosen = planned.choose(size)
            predictions.append(jobs_pb2.CallPrediction(
                bytes=size, method=chosen.method, ina_share=chosen.ina_share, ring_layout=chosen.layout or "",
                seconds=chosen.seconds, seconds_by_method={m: c.seconds for m, c in planned.options(size).items()}))
        return jobs_pb2.Job(
            name=job.name, spec_json=spec.to_json(),
            spec_version=job.spec_version(), mode=job.mode, trees=len(job.trees), lanes=job.lanes,
            pool_size=job.pool_size, admission=job.admission, lease_seconds=job.lease_seconds or 0.0,
            lease_remaining=math.inf if remaining is None else remaining, switches=sorted(job.switches()),
            predictions=predictions, crossovers=[jobs_pb2.Crossover(bytes=b, below=lo, above=hi)
                                                 for b, lo, hi in planned.crossovers()],
            rail_set=job.rail.set if job.rail else "", rail=job.rail.index if job.rail else 0)

    # --- time ----------------------------------------------------------------------------------

    def expire(self) -> list[str]:
        """Delete every job whose lease ran out; one log line each."""
        done = []
        for name, lease in self.leases.expired(self.clock()):
            job = self.controller.state.jobs.get(name)
            if job is None:
                self.leases.release(name)
                continue
            slots = sum(job.pool_size for t in job.trees for _ in t.allocations)
            try:
                self.controller.delete_job(name, force=True)
            except JobError:  # deleted meanwhile
                pass
            except OSError as e:  # the state file: try again next tick
                log.error("job %s: lease expired, but the state could not be saved: %s", name, e)
                continue
            self.leases.release(name)
            log.warning("job %s: lease expired (%.3g s without renewal): deleted, %d slot(s) on %d switch(es) freed",
                        name, lease.seconds, slots, len(job.switches()))
            done.append(name)
        return done


def _plan_direct(request: jobs_pb2.PlanDirectRequest) -> jobs_pb2.PlanDirectReply:
    """A direct-connect cluster's plan: pure planning, nothing installed (the cluster is the request's)."""
    try:
        cluster = DirectCluster.from_dict(json.loads(request.cluster_json), "cluster_json")
    except json.JSONDecodeError as e:
        raise DirectError(f"cluster_json: {e}") from None
    found = direct.plan(cluster, request.bytes, list(request.kinds) or None)
    return jobs_pb2.PlanDirectReply(plan_json=json.dumps(found.to_dict()), seconds=found.seconds,
                                    devices_used=found.devices_used)


def _checked(request: jobs_pb2.CreateJobRequest, values: int | None, default_lease: float,
             pool_size: int | None) -> dict:
    """The request's knobs, with the service's defaults for what it left at zero, or Refused."""
    bad = grpc.StatusCode.INVALID_ARGUMENT
    if request.values and request.values != values:
        raise Refused(bad, f"values {request.values}: the switches run {values} values per packet (0 takes those)")
    mode = request.mode or "auto"
    if mode not in MODES:
        raise Refused(bad, f"mode {request.mode!r}: one of {', '.join(MODES)}")
    ring_sum = request.ring_sum or "native"
    if ring_sum not in RING_SUMS:
        raise Refused(bad, f"ring_sum {request.ring_sum!r}: one of {', '.join(RING_SUMS)}")
    if request.ring_layout and request.ring_layout not in LAYOUTS:
        raise Refused(bad, f"ring_layout {request.ring_layout!r}: one of {', '.join(LAYOUTS)} (empty: the model's)")
    if request.trees > MAX_TREES:
        raise Refused(bad, f"trees {request.trees}: at most {MAX_TREES} (0: the planner's choice)")
    lease = request.lease_seconds or default_lease
    if not 0.1 <= lease <= MAX_LEASE:  # NaN fails too
        raise Refused(bad, f"lease_seconds {request.lease_seconds}: within 0.1..{MAX_LEASE:g} (0: the service's "
                           f"{default_lease:g})")
    lanes = request.lanes or "1"
    if lanes != "auto" and not (lanes.isdigit() and 1 <= int(lanes) <= MAX_LANES):
        raise Refused(bad, f"lanes {request.lanes!r}: auto, or 1..{MAX_LANES} (empty: 1)")
    return {"mode": mode, "ring_sum": ring_sum, "trees": request.trees or "auto", "lease": lease,
            "pool_size": request.pool_size or pool_size, "ring_layout": request.ring_layout or None,
            "lanes": lanes if lanes == "auto" else int(lanes)}


@dataclasses.dataclass
class RunningService:
    """A started service: its address, and ``stop()``."""

    service: JobsService
    server: grpc.Server
    health: health.HealthServicer
    address: str
    _stop: threading.Event
    _threads: list[threading.Thread]

    def stop(self, grace: float = 1.0) -> None:
        self.health.enter_graceful_shutdown()
        self._stop.set()
        self.service.controller.wake.set()  # the watch thread's wait ends now
        self.server.stop(grace).wait()
        for t in self._threads:
            t.join(timeout=10)


def start(controller: Controller, address: str, token: str, lease_seconds: float = DEFAULT_LEASE,
          grace: float | None = None, watch_interval: float | None = 1.0, workers: int = 16,
          pool_size: int | None = None) -> RunningService:
    """Serve on ``address`` (port 0: a free one, the returned ``address`` says which), expire leases every
    TICK and, unless ``watch_interval`` is None, watch the switches at that interval; either way, probe the
    switches of trees that workers report stalled (``KeepAliveRequest.stalled_trees``) at once."""
    service = JobsService(controller, token, lease_seconds, grace, pool_size=pool_size)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ina-service"),
                         options=[("grpc.max_receive_message_length", 4 << 20)])
    server.add_generic_rpc_handlers((_handlers(service),))
    healthy = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(healthy, server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    for name in ("", SERVICE_NAME):
        healthy.set(name, health_pb2.HealthCheckResponse.SERVING)
    stop = threading.Event()
    threads = [threading.Thread(target=_every, args=(TICK, stop, service.expire), daemon=True,
                                name="ina-service-leases"),
               threading.Thread(target=_watch, args=(service, watch_interval, stop), daemon=True,
                                name="ina-service-watch")]
    for t in threads:
        t.start()
    host = address.rsplit(":", 1)[0]
    return RunningService(service, server, healthy, f"{host}:{port}", stop, threads)


def _watch(service: JobsService, interval: float | None, stop: threading.Event) -> None:
    """The controller's watch rounds: every ``interval``, and at once when a switch reports something; first
    the probes of trees workers reported stalled.  ``interval`` None: no rounds but the probes'."""
    controller = service.controller
    while True:
        controller.wait(interval)
        if stop.is_set():
            return
        try:
            if not service.probe_stalls() and interval is not None:
                controller.watch_once()
        except Exception:  # noqa: BLE001 - a round that failed is tried again at the next
            log.exception("watch round failed")


def _every(interval: float, stop: threading.Event, work: Callable[[], object]) -> None:
    while not stop.wait(interval):
        try:
            work()
        except Exception:  # noqa: BLE001 - a round that failed is tried again next interval
            log.exception("%s failed", getattr(work, "__name__", work))
