"""Rail sets (issue 44): nodes of several local ranks ask the service (controller/service.py, over real gRPC)
for a job per rail in one request, on tests/loopback_net.py's one-switch network of six hosts: the jobs and
their specs, the refusals that leave nothing behind, a rail that fails taking the others away, each rail's
lease kept and lost on its own with the set's one secret; and `ina-ctl job create --nodes` by hand."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
import time

import grpc
import pytest

from controller.controller import Controller
from controller.entries import HIGH_WATER_CHILD
from controller.network import Network
from controller.p4runtime_client import SwitchError
from controller.pipeline import PipelineOptions
from controller.service import MAX_NAME, MAX_RAILS, start
from controller.state import STATE_FILE, ControllerState
from controller.topology import Topology
from ina_api import jobs_pb2, jobs_pb2_grpc
from ina_api.client import JobsClient, ServiceError
from tests.loopback_net import LoopbackNet
from tests.test_service import TOKEN, _ina_ctl, code_of, sums_exactly
from worker.jobspec import JobSpec, JobSpecError, Rail, rail_name

IPS = [f"127.0.5.{i}" for i in range(1, 7)]  # h1..h6: addresses of their own, beside other tests' networks
# three nodes of two local ranks, a NIC each: by name, by address, by a rank's several addresses
NODES = [["h1", "h2"], ["h3", IPS[3]], [["10.9.9.9", IPS[4]], "h6"]]


@pytest.fixture
def net(tmp_path):
    with LoopbackNet(6, tmp_path, host_ips=IPS, switch_ip="127.0.5.254") as n:
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


def spec_of(job: jobs_pb2.Job) -> JobSpec:
    return JobSpec.from_json(job.spec_json, f"job {job.name}")


def all_sum(specs: list[JobSpec]) -> bool:
    """Every rank of every one of the jobs sums through the switch at the same time, each job exactly."""
    done: list = [None] * len(specs)

    def run(i: int) -> None:
        done[i] = sums_exactly(specs[i], size=3000, seed=i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(specs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return all(done)


def test_a_rail_set_is_a_job_per_local_rank_of_the_nodes_hosts(net, client):
    rails, secret = client.create_rails("train", NODES, pool_size=32)
    assert [j.name for j in rails] == ["train-rail0", "train-rail1"] == [rail_name("train", i) for i in range(2)]
    assert [(j.rail_set, j.rail) for j in rails] == [("train", 0), ("train", 1)]
    specs = [spec_of(j) for j in rails]
    assert [[m.host for m in s.members] for s in specs] == [["h1", "h3", "h5"], ["h2", "h4", "h6"]]
    assert [s.rail for s in specs] == [Rail("train", 0, 2), Rail("train", 1, 2)]
    assert all(j.pool_size == 32 and j.lease_seconds == 1.5 for j in rails)  # the request's options, each
    assert {j.name: (j.rail_set, j.rail) for j in client.list()} == {"train-rail0": ("train", 0),
                                                                     "train-rail1": ("train", 1)}
    assert client.get("train-rail1").spec_json == rails[1].spec_json
    # the record keeps it (the state file), and so does the spec file a hand-made job's workers read
    saved = json.loads(net.controller.state_path.read_text())["jobs"]
    assert saved["train-rail1"]["rail"] == {"set": "train", "index": 1, "count": 2}
    assert JobSpec.load(net.spec_file("train-rail0")).rail == Rail("train", 0, 2)
    assert all_sum(specs)
    for j in rails:
        client.delete(j.name, secret)
    assert client.list() == [] and client.status().switches[0].free_slots == 1024


def test_a_node_with_fewer_nics_than_ranks_shares_one_between_its_rails(net, client):
    """Node 0's two local ranks both send from h1: both rails hold h1, each through its own trees and ports;
    a plain job beside the set says it is none."""
    rails, _ = client.create_rails("", [["h1", IPS[0]], ["h2", "h3"]])
    assert rails[0].name.startswith("job-") and rails[0].name.endswith("-rail0")
    set_name = rails[0].rail_set
    assert [j.name for j in rails] == [f"{set_name}-rail0", f"{set_name}-rail1"]
    specs = [spec_of(j) for j in rails]
    assert [[m.host for m in s.members] for s in specs] == [["h1", "h2"], ["h1", "h3"]]
    assert all_sum(specs)
    plain, _ = client.create("plain", ["h4", "h5"])
    assert (plain.rail_set, plain.rail) == ("", 0) and spec_of(plain).rail is None
    assert "rail" not in json.loads(plain.spec_json)  # a plain job's spec is as before rails
    # the reply of a plain create has no rails; a set's `job` is its rail 0
    reply = jobs_pb2_grpc.JobsStub(client._channel).CreateJob(
        jobs_pb2.CreateJobRequest(name="one", members=[jobs_pb2.Member(addresses=["h6"])]),
        metadata=[("authorization", f"Bearer {TOKEN}")])
    assert reply.job.name == "one" and list(reply.rails) == []
    reply = jobs_pb2_grpc.JobsStub(client._channel).CreateJob(
        jobs_pb2.CreateJobRequest(name="two", nodes=[jobs_pb2.Node(ranks=[jobs_pb2.Member(addresses=["h6"])])]),
        metadata=[("authorization", f"Bearer {TOKEN}")])
    assert reply.job == reply.rails[0] and [j.name for j in reply.rails] == ["two-rail0"]


def held(service) -> list[str]:
    """The jobs the service holds a lease for."""
    return sorted(name for name, _ in service.service.leases.expired(math.inf))


def raw_create(client: JobsClient, request: jobs_pb2.CreateJobRequest):
    """CreateJob with a request the client would not build."""
    try:
        return jobs_pb2_grpc.JobsStub(client._channel).CreateJob(request, metadata=[("authorization",
                                                                                     f"Bearer {TOKEN}")])
    except grpc.RpcError as e:
        raise ServiceError(e.details(), e.code()) from None


def test_refused_rail_sets_name_the_problem_and_create_nothing(net, client, service):
    taken, _ = client.create("taken-rail1", ["h6"], lease_seconds=60)
    node = jobs_pb2.Node(ranks=[jobs_pb2.Member(addresses=["h1"])])
    bad = grpc.StatusCode.INVALID_ARGUMENT
    refused = {
        "unequal ranks": (lambda: client.create_rails("", [["h1", "h2"], ["h3"]]), bad,
                          "node 1: 1 local ranks, but node 0 has 2"),
        "a host in two nodes": (lambda: client.create_rails("", [["h1", "h2"], ["h3", IPS[0]]]), bad,
                                "host h1 is in nodes 0 and 1"),
        "members and nodes": (lambda: raw_create(client, jobs_pb2.CreateJobRequest(
            nodes=[node], members=[jobs_pb2.Member(addresses=["h2"])])), bad, "either members"),
        "a node of no rank": (lambda: client.create_rails("", [["h1"], []]), bad, "node 1: 0 local ranks"),
        "too many ranks": (lambda: client.create_rails("", [["h1"] * (MAX_RAILS + 1)]), bad,
                           f"node 0: {MAX_RAILS + 1} local ranks; 1..{MAX_RAILS}"),
        "an unknown address": (lambda: client.create_rails("", [["h1", "h2"], ["h3", "10.1.2.3"]]), bad,
                               "node 1 local rank 1: '10.1.2.3': none is a host"),
        "a name too long": (lambda: client.create_rails("x" * (MAX_NAME - 5), NODES), bad,
                            f"rail job name {'x' * (MAX_NAME - 5)}-rail1 is {MAX_NAME + 1} characters"),
        "a bad name": (lambda: client.create_rails("no spaces", NODES), bad, "use letters"),
        "a bad option": (lambda: client.create_rails("", NODES, mode="fast"), bad, "mode 'fast'"),
        "a rail's name taken": (lambda: client.create_rails("taken", NODES), grpc.StatusCode.ALREADY_EXISTS,
                                "rail set taken: job(s) taken-rail1 exist already"),
    }
    for what, (call, code, message) in refused.items():
        with pytest.raises(ServiceError) as e:
            call()
        assert e.value.code == code and message in str(e.value), (what, e.value)
    assert [j.name for j in client.list()] == [taken.name]  # nothing refused made anything
    assert held(service) == ["taken-rail1"]
    assert client.status().switches[0].free_slots == 1024 - 64


def test_a_rail_that_cannot_be_made_takes_the_rails_made_before_it_away(net, client, service, monkeypatch):
    """Rail 1's switch write fails: rail 0, made already, is deleted again (entries, slots, lease, spec file,
    state), the original error is the answer, and the name is free for the next try."""
    install = net.controller.io.install

    def failing(switch, *entries):
        if "broken-rail1" in net.controller.state.jobs:
            raise SwitchError(f"{switch}: injected failure")
        return install(switch, *entries)

    monkeypatch.setattr(net.controller.io, "install", failing)
    with pytest.raises(ServiceError) as e:
        client.create_rails("broken", NODES)
    assert e.value.code == grpc.StatusCode.UNAVAILABLE and "injected failure" in str(e.value)
    assert client.list() == [] and net.controller.state.jobs == {}
    assert json.loads(net.controller.state_path.read_text())["jobs"] == {}
    assert not net.spec_file("broken-rail0").exists()
    assert held(service) == []
    assert client.status().switches[0].free_slots == 1024
    installed = net.controller.installed_entries("s1", net.controller.pipeline("s1").program.jobs)
    assert {dict(e.match)["hdr.ina.child"] for e in installed} == {HIGH_WATER_CHILD}  # no job's entry is left
    monkeypatch.setattr(net.controller.io, "install", install)
    rails, _ = client.create_rails("broken", NODES)
    assert all_sum([spec_of(j) for j in rails])


def test_each_rail_keeps_and_loses_its_own_lease_with_the_sets_one_secret(net, client, caplog):
    caplog.set_level(logging.INFO, logger="ina.service")
    rails, secret = client.create_rails("set", NODES)
    assert [r.getMessage().split(":")[0] for r in caplog.records if r.getMessage().startswith("rail set")] == \
        ["rail set set"]
    other, other_secret = client.create_rails("other", [["h1", "h2"], ["h3", "h4"]], lease_seconds=60)
    assert code_of(lambda: client.keep_alive("set-rail0", other_secret)) == grpc.StatusCode.PERMISSION_DENIED
    assert code_of(lambda: client.delete("other-rail0", secret)) == grpc.StatusCode.PERMISSION_DENIED
    client.delete("other-rail0", other_secret)  # node 0's rank 0 gives its rail back; rail 1 stays
    assert {j.name for j in client.list()} == {"set-rail0", "set-rail1", "other-rail1"}
    client.delete("other-rail1", other_secret)
    for j in rails:  # every rank renews its own rail with the set's secret
        assert client.keep_alive(j.name, secret).lease_seconds == 1.5
    # only rail 0's rank goes on renewing: rail 1 expires alone, then rail 0 once it stops too
    t0 = time.monotonic()
    while "set-rail1" in {j.name for j in client.list()} and time.monotonic() - t0 < 10:
        client.keep_alive("set-rail0", secret)
        time.sleep(0.2)
    assert 1.5 <= time.monotonic() - t0 < 1.5 + 2.0
    assert {j.name for j in client.list()} == {"set-rail0"}
    assert sums_exactly(spec_of(client.get("set-rail0")))
    while "set-rail0" in {j.name for j in client.list()} and time.monotonic() - t0 < 15:
        time.sleep(0.2)
    assert client.list() == [] and client.status().switches[0].free_slots == 1024
    expired = [r.getMessage().split(":")[0] for r in caplog.records if "lease expired" in r.getMessage()]
    assert expired == ["job set-rail1", "job set-rail0"]
    assert code_of(lambda: client.keep_alive("set-rail1", secret)) == grpc.StatusCode.NOT_FOUND


def test_a_rail_set_survives_a_restart_of_the_service(net):
    first = start(net.controller, "127.0.0.1:0", TOKEN, lease_seconds=1.0, watch_interval=None)
    with JobsClient(first.address, TOKEN) as c:
        rails, secret = c.create_rails("kept", NODES)
    first.stop()
    net.controller.close()
    again = Controller(net.controller.network, net.controller.state_path, PipelineOptions(values=64))
    second = start(again, "127.0.0.1:0", TOKEN, lease_seconds=1.0, grace=3.0, watch_interval=None)
    try:
        with JobsClient(second.address, TOKEN) as c:
            assert {(j.name, j.rail_set, j.rail) for j in c.list()} == {("kept-rail0", "kept", 0),
                                                                        ("kept-rail1", "kept", 1)}
            assert [spec_of(c.get(j.name)).rail for j in rails] == [Rail("kept", 0, 2), Rail("kept", 1, 2)]
            for j in rails:
                c.keep_alive(j.name, secret)
    finally:
        second.stop()
        again.close()


def test_the_spec_says_which_rail_and_old_specs_load_unchanged(net):
    spec = net.job()
    assert spec.rail is None and "rail" not in json.loads(spec.to_json())
    railed = dataclasses.replace(spec, rail=Rail("t", 1, 4))
    assert json.loads(railed.to_json())["rail"] == {"set": "t", "index": 1, "count": 4}
    assert JobSpec.from_json(railed.to_json(), "here") == railed
    assert JobSpec.from_json(spec.to_json(), "an old spec") == spec
    data = json.loads(railed.to_json())
    for rail, field in (({"set": "t", "index": 4, "count": 4}, "rail.index"),
                        ({"set": "t", "index": 0, "count": 0}, "rail.count"),
                        ({"set": "", "index": 0, "count": 1}, "rail.set"),
                        ({"set": "t", "index": True, "count": 2}, "rail.index"),
                        ({"set": "t", "index": 0}, "rail must be an object of set, index and count"),
                        ([0, 1], "rail must be an object")):
        with pytest.raises(JobSpecError, match=f"^the file: {field}"):
            JobSpec.from_json(json.dumps({**data, "rail": rail}), "the file")


def test_ina_ctl_job_create_nodes_makes_a_spec_file_per_rail(net, tmp_path):
    """By hand, without the service: the machines of the topology (its hosts' "node"), a job per rail with its
    spec in NAME-rail<i>.json, `job list` and `status` showing which rail each is."""
    data = net.topology.to_dict()
    for host, machine in (("h1", "m1"), ("h2", "m1"), ("h3", "m2"), ("h4", "m2"), ("h5", "m3")):
        data["hosts"][host]["node"] = machine
    net_file = tmp_path / "cli" / "net.json"
    net_file.parent.mkdir()
    Network(Topology.from_dict(data), net.controller.network.access).save(net_file)
    # the switch is set up (the fixture's controller): a state of its values, which `setup` keeps only with a job
    ControllerState(net.controller.state.options).save(net_file.parent / STATE_FILE)
    at = ["--net", str(net_file)]
    made = _ina_ctl(*at, "job", "create", "big", "--nodes", "m2,m1", "--pool-size", "16").stdout
    assert made.count("(rail ") == 2 and "job big-rail1 (rail 1 of 2 of set big)" in made
    specs = [JobSpec.load(net_file.parent / "jobs" / f"big-rail{i}.json") for i in range(2)]
    assert [[m.host for m in s.members] for s in specs] == [["h3", "h1"], ["h4", "h2"]]
    assert [s.rail for s in specs] == [Rail("big", 0, 2), Rail("big", 1, 2)] and specs[0].pool_size == 16
    assert all_sum(specs)
    assert "big-rail0: rail 0 of 2 of set big" in _ina_ctl(*at, "status").stdout
    assert ", rail 1 of 2 of set big" in _ina_ctl(*at, "job", "list").stdout
    for args, why in ((["--nodes", "m1,m3"], "every node needs the same number of NICs, not m1 2, m3 1"),
                      (["--nodes", "m1,m9"], "m9: not a node of the topology"),
                      (["--nodes", "m1,m1"], "node(s) m1 given twice"),
                      (["--nodes", "m1,m2"], "job big-rail0 exists already"),
                      (["--nodes", "h6,m3", "--export"], "takes neither --export")):
        refused = _ina_ctl(*at, "job", "create", "big", *args, check=False)
        assert refused.returncode == 1 and why in refused.stderr, (args, refused.stderr)
    state = json.loads((net_file.parent / "controller-state.json").read_text())
    assert sorted(state["jobs"]) == ["big-rail0", "big-rail1"]
    made = _ina_ctl(*at, "job", "create", "solo", "--nodes", "h6,m3").stdout  # a host without "node" is its own
    assert "job solo-rail0 (rail 0 of 1 of set solo)" in made
