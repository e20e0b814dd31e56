"""The controller service (controller/service.py) over real gRPC, on tests/loopback_net.py's one-switch
network: the API and its refusals, leases, admission, a restart of the service, concurrent creations
whose jobs all sum exactly, and mutated requests."""

from __future__ import annotations

import json
import logging
import random
import signal
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from controller.controller import Controller
from controller.pipeline import PipelineOptions
from controller.service import MAX_ADDRESSES, start
from ina_api import jobs_pb2
from ina_api.client import JobsClient, ServiceError
from tests.conftest import free_port
from tests.loopback_net import LoopbackNet
from worker import Worker
from worker.jobspec import JobSpec

TOKEN = "s3cret-token"


@pytest.fixture
def net(tmp_path):
    with LoopbackNet(4, tmp_path) as n:
        yield n


@pytest.fixture
def service(net):
    running = start(net.controller, "127.0.0.1:0", TOKEN, lease_seconds=1.5, watch_interval=None)
    yield running
    running.stop()


@pytest.fixture
def client(service):
    with JobsClient(service.address, TOKEN) as c:
        yield c


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(ServiceError) as e:
        call()
    return e.value.code


def sums_exactly(spec: JobSpec, size: int = 5000, seed: int = 0) -> bool:
    """Every rank of the job sums int32 through the switch; all get the exact total."""
    rng = np.random.default_rng(seed)
    data = [rng.integers(-1000, 1000, size, dtype=np.int32) for _ in spec.members]
    results: list = [None] * len(data)

    def rank(r: int) -> None:
        with Worker(spec, r, timeout=10) as w:
            results[r] = w.allreduce(data[r])

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(data))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return all(r is not None and np.array_equal(r, sum(data)) for r in results)


def test_a_job_from_create_to_delete(net, client, worker_core):
    job, secret = client.create("", [["10.9.9.9", "127.0.1.1"], ["h2"], ["127.0.1.3"]], values=64)
    assert job.name.startswith("job-") and job.mode == "auto" and job.trees == 1 and job.switches == ["s1"]
    # the model's choice at a few call sizes, and where it changes, come with the job
    assert [p.bytes for p in job.predictions] == [64 << 10, 1 << 20, 25 << 20]
    assert all(p.seconds == min(p.seconds_by_method.values()) or p.method == "ina" for p in job.predictions)
    assert all(c.below != c.above for c in job.crossovers)
    spec = JobSpec.from_json(job.spec_json, "the service")
    assert [m.host for m in spec.members] == ["h1", "h2", "h3"] and spec.pool_size == 64
    assert client.get(job.name).spec_json == job.spec_json and [j.name for j in client.list()] == [job.name]
    assert sums_exactly(spec)
    status = client.status(counters=True)
    [s1] = status.switches
    assert (s1.pool_slots - s1.free_slots, s1.cells - s1.free_cells, s1.reachable) == (64, 1, True)
    assert status.jobs[0].packets["results"] > 0  # the switch's own counters show the job
    assert client.keep_alive(job.name, secret).lease_seconds == 1.5
    client.delete(job.name, secret)
    jobs_table = net.controller.pipeline("s1").program.jobs
    assert client.list() == [] and net.controller.installed_entries("s1", jobs_table) <= \
        net.controller.expected_entries("s1")  # only the switch's high-water mark is left
    assert code_of(lambda: client.get(job.name)) == grpc.StatusCode.NOT_FOUND


def test_refusals_name_the_problem_and_the_service_stays_up(client, service):
    job, secret = client.create("mine", ["h1", "h2"])
    refused = {
        "name in use": (lambda: client.create("mine", ["h3"]), grpc.StatusCode.ALREADY_EXISTS),
        "unknown address": (lambda: client.create("", ["h1", "10.1.2.3"]), grpc.StatusCode.INVALID_ARGUMENT),
        "a host twice": (lambda: client.create("", ["h1", "127.0.1.1"]), grpc.StatusCode.INVALID_ARGUMENT),
        "no members": (lambda: client.create("", []), grpc.StatusCode.INVALID_ARGUMENT),
        "bad name": (lambda: client.create("no spaces", ["h1"]), grpc.StatusCode.INVALID_ARGUMENT),
        "values": (lambda: client.create("", ["h1"], values=32), grpc.StatusCode.INVALID_ARGUMENT),
        "mode": (lambda: client.create("", ["h1"], mode="fast"), grpc.StatusCode.INVALID_ARGUMENT),
        "lease": (lambda: client.create("", ["h1"], lease_seconds=-1), grpc.StatusCode.INVALID_ARGUMENT),
        "pool": (lambda: client.create("", ["h1"], pool_size=5000), grpc.StatusCode.INVALID_ARGUMENT),
        "wrong secret": (lambda: client.keep_alive("mine", "guess"), grpc.StatusCode.PERMISSION_DENIED),
        "delete, wrong secret": (lambda: client.delete("mine", secret + "x"), grpc.StatusCode.PERMISSION_DENIED),
        "unknown job": (lambda: client.keep_alive("other", secret), grpc.StatusCode.NOT_FOUND),
    }
    for what, (call, code) in refused.items():
        assert code_of(call) == code, what
    with JobsClient(service.address, "wrong") as intruder:
        assert code_of(intruder.list) == grpc.StatusCode.UNAUTHENTICATED
        assert code_of(lambda: intruder.delete("mine", secret)) == grpc.StatusCode.UNAUTHENTICATED
    with grpc.insecure_channel(service.address) as channel:  # no token at all; health needs none
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="ina.jobs.v1.Jobs"))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    assert [j.name for j in client.list()] == ["mine"]  # nothing refused changed anything


def test_every_address_of_a_rank_counts(client):
    """Exactly one address of a rank must be known, wherever it stands in the list: one past the 64th still
    names the rank's host (or a second host), and a list longer than MAX_ADDRESSES is refused by its count."""
    junk = [f"10.9.{i // 250}.{i % 250 + 1}" for i in range(100)]  # addresses of no host of the network
    job, _ = client.create("late", [[*junk, "127.0.1.3"], "h1"])
    assert [m["host"] for m in json.loads(job.spec_json)["members"]] == ["h3", "h1"]
    with pytest.raises(ServiceError) as e:
        client.create("two", [["h2", *junk, "127.0.1.4"]])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "rank 0: " in str(e.value) and \
        "they name 2 hosts" in str(e.value)
    with pytest.raises(ServiceError) as e:
        client.create("many", ["h2", [f"10.8.{i // 250}.{i % 250 + 1}" for i in range(999)] + ["h4"]])
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and \
        f"rank 1: 1000 addresses; at most {MAX_ADDRESSES}" in str(e.value)
    assert [j.name for j in client.list()] == ["late"]


def test_a_lease_not_renewed_expires_and_frees_the_slots(net, client, caplog):
    caplog.set_level(logging.WARNING, logger="ina.service")
    kept, secret = client.create("kept", ["h1", "h2"])
    gone, _ = client.create("gone", ["h3", "h4"])
    t0 = time.monotonic()
    while "gone" in {j.name for j in client.list()} and time.monotonic() - t0 < 10:
        client.keep_alive("kept", secret)
        time.sleep(0.2)
    elapsed = time.monotonic() - t0
    assert 1.5 <= elapsed < 1.5 + 2.0, elapsed  # the lease, then at most a tick and a delete
    assert [j.name for j in client.list()] == ["kept"]
    assert client.status().switches[0].free_slots == 1024 - 64
    expired = [r.getMessage() for r in caplog.records if "lease expired" in r.getMessage()]
    assert expired == ["job gone: lease expired (1.5 s without renewal): deleted, 64 slot(s) on 1 switch(es) freed"]
    assert sums_exactly(JobSpec.from_json(client.get("kept").spec_json, "service"))


def test_renewals_never_wait_for_the_controller(net, client):
    """While the controller is busy (its lock held, as by a create writing switches), renewals still answer
    at once: they touch only the leases."""
    job, secret = client.create("busy", ["h1", "h2"])
    with net.controller._lock:
        t0 = time.monotonic()
        for _ in range(5):
            assert client.keep_alive("busy", secret).lease_seconds == 1.5
        assert time.monotonic() - t0 < 1.0


def test_a_job_that_does_not_fit_gets_a_smaller_pool_then_the_ring(net, client):
    big, _ = client.create("big", ["h1", "h2"], pool_size=1000, lease_seconds=60)
    smaller, _ = client.create("smaller", ["h3", "h4"], pool_size=64, lease_seconds=60)
    assert (big.pool_size, smaller.pool_size) == (1000, 16) and "pool 16 of 64 asked" in smaller.admission
    last, _ = client.create("last", ["h2", "h4"], pool_size=64, lease_seconds=60)
    assert last.pool_size == 8 and client.status().switches[0].free_slots == 0
    ring, _ = client.create("ring", ["h1", "h3"], pool_size=64, lease_seconds=60)
    assert (ring.mode, ring.trees) == ("ring", 0) and {p.method for p in ring.predictions} == {"ring"}
    assert ring.admission.startswith("ring alone: no tree fits") and "no 4 free" not in ring.admission
    assert sums_exactly(JobSpec.from_json(smaller.spec_json, "service"))
    status = {j.name: j.admission for j in client.status().jobs}
    assert status["ring"] == ring.admission and status["big"] == ""


def test_jobs_and_leases_survive_a_restart_of_the_service(net, tmp_path):
    first = start(net.controller, "127.0.0.1:0", TOKEN, lease_seconds=1.0, watch_interval=None)
    with JobsClient(first.address, TOKEN) as c:
        job, secret = c.create("survivor", ["h1", "h2", "h3"])
        left, _ = c.create("left", ["h4"])
    first.stop()
    net.controller.close()
    again = Controller(net.controller.network, net.controller.state_path, PipelineOptions(values=64))
    second = start(again, "127.0.0.1:0", TOKEN, lease_seconds=1.0, grace=3.0, watch_interval=None)
    try:
        with JobsClient(second.address, TOKEN) as c:
            assert {j.name for j in c.list()} == {"survivor", "left"}  # within the grace period
            assert c.get("survivor").lease_remaining > 1.5
            for _ in range(20):  # the owner comes back; "left" never does
                c.keep_alive("survivor", secret)
                time.sleep(0.2)
            assert [j.name for j in c.list()] == ["survivor"]
            assert sums_exactly(JobSpec.from_json(c.get("survivor").spec_json, "service"))
            assert code_of(lambda: c.keep_alive("survivor", "not-it")) == grpc.StatusCode.PERMISSION_DENIED
    finally:
        second.stop()
        again.close()


def test_twenty_concurrent_creations_get_disjoint_pools_and_all_sum(net, service):
    hosts = sorted(net.topology.hosts)
    rng = random.Random(7)
    asks = [rng.sample(hosts, rng.randint(2, 4)) for _ in range(20)]
    made: list = [None] * len(asks)

    def create(i: int) -> None:
        with JobsClient(service.address, TOKEN) as c:  # a client of its own
            made[i] = c.create(f"c{i}", asks[i], lease_seconds=120)[0]

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(asks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(m is not None for m in made)
    jobs = net.controller.state.jobs
    ids = [t.job_id for j in jobs.values() for t in j.trees] + [j.ring_id for j in jobs.values()]
    assert len(ids) == len(set(ids))
    spans = sorted((t.allocations["s1"].pool_base, j.pool_size) for j in jobs.values() for t in j.trees)
    assert all(a + n <= b for (a, n), (b, _) in zip(spans, spans[1:])) and spans[-1][0] + spans[-1][1] <= 1024
    cells = [t.allocations["s1"].cell for j in jobs.values() for t in j.trees]
    assert len(cells) == len(set(cells))
    for i, m in enumerate(made):
        assert sums_exactly(JobSpec.from_json(m.spec_json, "service"), size=700, seed=i), m.name


def _mutations(rng: random.Random, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        if kind == 0 and raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        elif kind == 1:
            raw[rng.randrange(len(raw) + 1):rng.randrange(len(raw) + 1)] = rng.randbytes(rng.randint(1, 12))
        elif kind == 2 and raw:
            del raw[rng.randrange(len(raw)):]
        else:
            raw += rng.randbytes(rng.randint(1, 40))
    return bytes(raw)


def test_two_thousand_mutated_requests_each_get_a_status(net, service, client):
    """Bytes of valid requests, mutated, to every method, with the token, a wrong one or none: each gets
    an answer, and the service then serves a valid request."""
    job, secret = client.create("target", ["h1", "h2"], lease_seconds=300)
    valid = {
        "CreateJob": jobs_pb2.CreateJobRequest(name="fz", members=[jobs_pb2.Member(addresses=["h3", "127.0.1.4"])],
                                               mode="auto", trees=1, pool_size=8, lease_seconds=2.5),
        "KeepAlive": jobs_pb2.KeepAliveRequest(name="target", secret=secret),
        "DeleteJob": jobs_pb2.DeleteJobRequest(name="fz", secret="x" * 32),
        "GetJob": jobs_pb2.GetJobRequest(name="target"),
        "ListJobs": jobs_pb2.ListJobsRequest(),
        "Status": jobs_pb2.StatusRequest(counters=True),
    }
    rng = random.Random(34)
    codes: dict[grpc.StatusCode, int] = {}
    t0 = time.monotonic()
    with grpc.insecure_channel(service.address) as channel:
        methods = {m: channel.unary_unary(f"/ina.jobs.v1.Jobs/{m}") for m in valid}  # raw bytes each way
        for i in range(2000):
            method = rng.choice(list(valid))
            token = rng.choice([TOKEN, TOKEN, TOKEN, "", "Bearer", TOKEN[:-1]])
            metadata = [("authorization", f"Bearer {token}")] if token else []
            try:
                methods[method](_mutations(rng, valid[method].SerializeToString()), timeout=10, metadata=metadata)
                code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                code = e.code()
            assert code in (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                            grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED,
                            grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INTERNAL), (i, method, code)
            codes[code] = codes.get(code, 0) + 1
    assert time.monotonic() - t0 < 120
    assert codes.get(grpc.StatusCode.INTERNAL, 0) == 0, codes  # protobuf's own parse failures are INTERNAL
    answered = (grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAUTHENTICATED)
    assert min(codes.get(c, 0) for c in answered) > 10, codes
    assert client.get("target").spec_json == job.spec_json
    fresh, fresh_secret = client.create("after", ["h3", "h4"])
    assert sums_exactly(JobSpec.from_json(fresh.spec_json, "service"))
    client.delete("after", fresh_secret)


def test_an_expired_jobs_late_packets_are_dropped_not_summed_into_the_next_job(net, client):
    """The dead job's workers still send after its lease ran out and a new job took its very slots: the
    switch drops and counts them (no entry for the old job id), and the new job sums exactly."""
    old, _ = client.create("old", ["h1", "h2"], pool_size=32)
    old_spec = JobSpec.from_json(old.spec_json, "service")
    while "old" in {j.name for j in client.list()}:
        time.sleep(0.1)
    new, new_secret = client.create("new", ["h1", "h2"], pool_size=32, lease_seconds=60)
    new_spec = JobSpec.from_json(new.spec_json, "service")
    before = net.controller.status()["drops"]["s1"]["unknown_member"]
    assert new.trees == 1 and new_spec.trees[0].job_id != old_spec.trees[0].job_id
    assert net.controller.state.jobs["new"].trees[0].allocations["s1"].pool_base == 0  # the old job's slots
    late = [Worker(old_spec, r, timeout=1.5) for r in range(2)]
    failures: list = []

    def send_late(w: Worker) -> None:
        try:
            w.allreduce(np.full(3000, 1 << 20, dtype=np.int32))
        except Exception as e:  # noqa: BLE001 - what the dead job's worker meets
            failures.append(e)

    threads = [threading.Thread(target=send_late, args=(w,)) for w in late]
    for t in threads:
        t.start()
    assert sums_exactly(new_spec, size=3000, seed=5)
    for t in threads:
        t.join(30)
    for w in late:
        w.close()
    assert len(failures) == 2  # nobody answered the dead job
    assert net.controller.status()["drops"]["s1"]["unknown_member"] - before >= 32  # a window at least
    client.delete("new", new_secret)


def _ina_ctl(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "controller.cli", *args], capture_output=True, text=True, timeout=60)
    assert not check or run.returncode == 0, run.stderr
    return run


def test_ina_ctl_serve_and_its_clients_and_a_sigkill(net, tmp_path):
    """`ina-ctl serve` as its own process: `job create --controller` and friends, a hand-run `job create`
    refused while it holds the state, and a SIGKILL: the restarted service has the job and its lease."""
    net_file, token = tmp_path / "cli" / "net.json", tmp_path / "token"
    net_file.parent.mkdir()
    net.controller.network.save(net_file)
    token.write_text(TOKEN + "\n")
    _ina_ctl("--net", str(net_file), "setup", "--values", "64")
    port = free_port()
    address = f"127.0.0.1:{port}"
    serve = ["--net", str(net_file), "--election-id", "7", "--token-file", str(token), "serve", "--listen", address,
             "--lease-seconds", "2"]

    def start_service() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "controller.cli", *serve], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert "serving on" in line, proc.stderr.read() if proc.poll() is not None else line
        return proc

    service = start_service()
    try:
        to_it = ["--controller", address, "--token-file", str(token)]
        made = _ina_ctl(*to_it, "job", "create", "train", "--hosts", "h1,h2,h3", "--lease-seconds", "600",
                        "--spec-out", str(tmp_path / "train.json")).stdout
        secret = made.split("secret ")[1].split()[0]
        assert JobSpec.load(tmp_path / "train.json").name == "train"
        refused = _ina_ctl("--net", str(net_file), "job", "create", "other", "--hosts", "h4", check=False)
        assert refused.returncode == 1 and f"held by the controller service at {address}" in refused.stderr
        service.kill()
        service.wait()
        service = start_service()
        listed = _ina_ctl(*to_it, "job", "list").stdout
        assert listed.startswith("train: mode auto (64 KB ") and "1 tree(s) of pool 64 on s1; lease 600 s" in listed
        assert "s1 (v1model): 960 of 1024 slots" in _ina_ctl(*to_it, "status").stdout
        wrong = _ina_ctl(*to_it, "job", "delete", "train", "--secret", "guess", check=False)
        assert wrong.returncode == 1 and "PERMISSION_DENIED" in wrong.stderr
        _ina_ctl(*to_it, "job", "delete", "train", "--secret", secret)
        assert _ina_ctl(*to_it, "job", "list").stdout == ""
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(20)
    assert service.returncode == 0
    _ina_ctl("--net", str(net_file), "job", "create", "other", "--hosts", "h4")  # the lock is free again


def test_two_hand_run_creates_at_once_take_turns(net, tmp_path):
    """Two `ina-ctl job create` processes at once plan from the same state file: the state's lock makes
    them take turns, so neither overwrites the other's job and their pools and ids differ."""
    net_file = tmp_path / "cli" / "net.json"
    net_file.parent.mkdir()
    net.controller.network.save(net_file)
    _ina_ctl("--net", str(net_file), "setup", "--values", "64")
    procs = [subprocess.Popen([sys.executable, "-m", "controller.cli", "--net", str(net_file), "job", "create", name,
                               "--hosts", hosts], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name, hosts in (("one", "h1,h2"), ("two", "h3,h4"))]
    for p in procs:
        _, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    state = json.loads((net_file.parent / "controller-state.json").read_text())
    assert state["format"] == 3 and sorted(state["jobs"]) == ["one", "two"]
    trees = [state["jobs"][n]["trees"][0] for n in ("one", "two")]
    assert trees[0]["job_id"] != trees[1]["job_id"]
    assert {t["allocations"]["s1"]["pool_base"] for t in trees} == {0, 64}


def test_the_service_plans_a_direct_connect_cluster(client):
    cluster = {"workers": {"count": 128, "interfaces": 4, "gbps": 100}, "devices": {"count": 63, "ports": 4}}
    found = client.plan_direct(cluster, 25 << 20)
    assert found["devices_used"] <= 63 and found["seconds"] < found["baselines"]["ring"]
    assert sum(len(p["interfaces"]) for p in found["parts"]) <= 4
    trees = client.plan_direct({**cluster, "devices": {"count": 252, "ports": 4}}, 25 << 20, ["tree"])
    assert [p["kind"] for p in trees["parts"]] == ["tree"] * 4
    for bad, field in (({**cluster, "devices": {"count": 63, "ports": 2}}, "devices.ports"),
                       ({"workers": {"count": 128}}, "workers.interfaces")):
        with pytest.raises(ServiceError, match=field) as e:
            client.plan_direct(bad, 1 << 20)
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(ServiceError, match="bytes") as e:
        client.plan_direct(cluster, 0)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert [j.name for j in client.list()] == []  # planning installs nothing
