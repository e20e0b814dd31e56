"""Workers that get their job from the controller service (worker/service_job.py): ``Worker.from_controller``
and ``init_process_group("ina")`` with INA_CONTROLLER, over real gRPC to controller/service.py and real UDP
through tests/loopback_net.py's switch; the torch ranks are real processes (tests/backend_rank.py)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from controller.service import start
from ina_api.client import JobsClient, ServiceError
from tests.conftest import free_port
from tests.loopback_net import LoopbackNet
from tests.rank_procs import json_lines, run_ranks
from tests.test_restart import LoseResult, arrays3
from tests.test_worker import check_sum
from worker import Worker
from worker.service_job import ADDRESS_ENV, local_addresses

TOKEN = "t0ken"
MEMBERS = ["h1", "127.0.1.2", ["10.9.9.9", "127.0.1.3"]]  # a name, an address, a rank with two addresses


@pytest.fixture
def net(tmp_path: Path):
    with LoopbackNet(3, tmp_path) as n:
        yield n


@pytest.fixture
def service(net):
    running = start(net.controller, "127.0.0.1:0", TOKEN, lease_seconds=1.5, watch_interval=0.2)
    yield running
    running.stop()


@pytest.fixture
def client(service):
    with JobsClient(service.address, TOKEN) as c:
        yield c


def workers(service, name: str, **options) -> list[Worker]:
    """Every rank's ``Worker.from_controller`` at once, rank 0 last (the others wait for its job)."""
    made: list = [None] * len(MEMBERS)

    def rank(r: int) -> None:
        if r == 0:
            time.sleep(0.3)
        made[r] = Worker.from_controller(MEMBERS, r, name, client=JobsClient(service.address, TOKEN), pool_size=8,
                                         join_timeout=10, **options)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(MEMBERS))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(made), "a rank did not get its worker"
    return made


def allreduce_all(ws: list[Worker], arrays: list[np.ndarray]) -> list[np.ndarray]:
    futures = [w.allreduce_async(a) for w, a in zip(ws, arrays, strict=True)]
    return [f.result(timeout=80) for f in futures]


def test_from_controller_sums_exactly_and_rank_0_deletes_the_job(service, client):
    ws = workers(service, "trio")
    try:
        rng = np.random.default_rng(1)
        arrays = [rng.integers(-(1 << 28), 1 << 28, 5000, dtype=np.int32) for _ in ws]
        for _ in range(2):
            assert all(np.array_equal(r, sum(a.astype(np.int64) for a in arrays)) for r in allreduce_all(ws, arrays))
        time.sleep(2)  # longer than the lease: rank 0 renews it
        assert [j.name for j in client.list()] == ["trio"]
        assert [w.service.owner for w in ws] == [True, False, False] and not any(w.service.failure for w in ws)
    finally:
        for w in reversed(ws):
            w.close()
    assert client.list() == []


def test_a_spec_change_from_the_service_recovers_a_call_in_flight(net, service):
    """The result of one packet never reaches h3; the switch restarts; the service provisions it again
    and raises the tree's incarnation; the workers hear of it through the lease (rank 0) and GetJob (the
    others), send their last window again, and both calls complete with the exact sum."""
    ws = workers(service, "restart", timeout=30.0)  # a loaded machine re-provisions slowly: no call may time out
    fault = LoseResult("127.0.1.3", seq=8 + 20)
    net.faults = fault
    arrays = arrays3(7)
    results: list = []
    errors: list = []

    def call_twice() -> None:
        try:
            results.extend(allreduce_all(ws, arrays) for _ in range(2))
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    calls = threading.Thread(target=call_twice)
    try:
        calls.start()
        deadline = time.monotonic() + 20
        while fault.lost < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fault.lost >= 2, "the workers never got to the packet whose result is lost"
        net.restart_switch()
        fault.on = False
        calls.join(90)
        assert len(results) == 2, errors
        for call in results:
            check_sum(call, arrays)
        assert [w.stats.recoveries for w in ws[:2]] == [1, 1]
    finally:
        for w in ws:
            w.close()


def test_refusals_are_clear(service, client):
    wrong = JobsClient(service.address, "not-the-token")
    for rank in (0, 1):
        with pytest.raises(ServiceError, match="UNAUTHENTICATED: wrong token") as e:
            Worker.from_controller(MEMBERS, rank, "nope", client=wrong, join_timeout=5)
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(ServiceError, match=r"no job 'late' after 0.3 s: the rank that creates it \(rank 0\)"):
        Worker.from_controller(MEMBERS, 2, "late", client=client, join_timeout=0.3)
    client.create("other", ["h1", "h3"])  # a job of that name, but not of these ranks
    with pytest.raises(ValueError, match="another job of that name"):
        Worker.from_controller(["h1", "h2"], 1, "other", client=client)
    assert [j.name for j in client.list()] == ["other"]  # a rank that only followed it deleted nothing


def test_from_env_with_a_controller(service, client, tmp_path, monkeypatch):
    """INA_CONTROLLER and no INA_JOB_SPEC: the job of INA_MEMBERS named INA_JOB_NAME (here one rank)."""
    (tmp_path / "token").write_text(TOKEN)
    monkeypatch.delenv("INA_JOB_SPEC", raising=False)
    monkeypatch.setenv("INA_CONTROLLER", service.address)
    monkeypatch.setenv("INA_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("INA_RANK", "0")
    with pytest.raises(RuntimeError, match="set INA_MEMBERS"):
        Worker.from_env()
    monkeypatch.setenv("INA_MEMBERS", "127.0.1.2")
    monkeypatch.setenv("INA_JOB_NAME", "solo")
    with Worker.from_env(timeout=5) as w:
        x = np.arange(-500, 500, dtype=np.int32)
        assert np.array_equal(w.allreduce(x), x) and [j.name for j in client.list()] == ["solo"]
    assert client.list() == []


def test_local_addresses(monkeypatch):
    monkeypatch.setenv(ADDRESS_ENV, " 127.0.1.1, 10.0.0.1 ,")
    assert local_addresses() == ["127.0.1.1", "10.0.0.1"]
    monkeypatch.delenv(ADDRESS_ENV)
    try:
        found = local_addresses()
    except OSError as e:  # a host with loopback only
        assert ADDRESS_ENV in str(e)
    else:
        assert found and not any(a.startswith("127.") for a in found)


def backend_ranks(service, tmp_path: Path, token: str, device: str, world: int = 3) -> list[tuple[int, str, str]]:
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    port = free_port()
    base = {k: v for k, v in os.environ.items() if k != "INA_JOB_SPEC"}
    envs = [dict(base, INA_CONTROLLER=service.address, INA_TOKEN_FILE=str(token_file), TORCHELASTIC_RUN_ID="run-7",
                 **{ADDRESS_ENV: f"127.0.1.{r + 1}"}) for r in range(world)]
    return run_ranks([[sys.executable, "-m", "tests.backend_rank", str(r), str(world), str(port), device]
                      for r in range(world)], envs, timeout=90)


def test_the_torch_backend_gets_its_job_from_the_service(service, client, tmp_path):
    pytest.importorskip("torch")
    checks = []
    for code, stdout, stderr in backend_ranks(service, tmp_path, TOKEN, "service"):
        assert code == 0, stderr[-2000:]
        checks += json_lines(stdout)
    assert [c["job"] for c in checks] == ["run-7"] * 3  # named by torchrun's run id
    assert all(c["exists"] and c["exact"] and c["packets"] > 0 and c["setup_seconds"] > 0 for c in checks), checks
    assert client.list() == []  # rank 0 deleted it at destroy_process_group


def test_the_torch_backend_with_a_wrong_token_fails_every_rank(service, client, tmp_path):
    pytest.importorskip("torch")
    for code, _, stderr in backend_ranks(service, tmp_path, "not-the-token", "none", world=2):
        assert code != 0
        assert 'init_process_group("ina")' in stderr and "rank 0: ServiceError: controller" in stderr, stderr[-2000:]
        assert "CreateJob: UNAUTHENTICATED: wrong token" in stderr
    assert client.list() == []
