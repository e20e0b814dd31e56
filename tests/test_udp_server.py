"""The aggregation server process (``p4target-switch-grpc --udp``, issue 62): ina.p4 on a UDP socket, set up by
the controller over P4Runtime as a topology's server host, summing real workers' calls on loopback exactly;
datagrams that are not a member's contributions dropped and counted, the server still serving."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from bench.bench_server import SERVER_IP, ServerNet, server_network
from controller.calibrate import calibrate_server
from controller.state import ControllerState
from p4target import switch_grpc, udpio
from p4target.frontend import load_declarations
from worker import Worker, protocol
from worker.jobspec import JobSpec

V = 64  # values per packet: a small pipeline, quick to build
WORKERS = 4


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> ServerNet:
    with server_network(WORKERS, V, threads=1, pool_size=16, state_dir=tmp_path_factory.mktemp("server")) as net:
        yield net


def _allreduce(spec: JobSpec, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Each rank's two calls (``arrays``, then twice them) in a worker of its own; the second call's results."""
    results: list[np.ndarray | BaseException | None] = [None] * len(arrays)

    def rank(r: int) -> None:
        try:
            with Worker(spec, r, timeout=5.0) as w:
                results[r] = w.allreduce(arrays[r])
                results[r] = w.allreduce(arrays[r] * 2)  # a second call on the same slots' next rounds
        except BaseException as e:  # noqa: BLE001 - reported by the test
            results[r] = e

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    errors = [r for r in results if not isinstance(r, np.ndarray)]
    assert not errors, errors
    return results  # type: ignore[return-value]


def test_four_workers_sum_exactly_through_the_server(net: ServerNet):
    (tree,) = net.spec.trees
    assert tree.to_ip == SERVER_IP and tree.children == (0, 1, 2, 3)
    before = net.counters()
    rng = np.random.default_rng(62)
    arrays = [rng.integers(-1 << 20, 1 << 20, V * 37 + 5, dtype=np.int32) for _ in range(WORKERS)]
    for result in _allreduce(net.spec, arrays):
        np.testing.assert_array_equal(result, 2 * sum(arrays))
    after = net.counters()
    chunks = 2 * -(-(V * 37 + 5) // V)  # two calls' chunks, each one result of four contributions
    assert after["results"] - before["results"] >= chunks
    assert after["aggregated"] - before["aggregated"] >= WORKERS * chunks
    assert net.process.poll() is None


def test_foreign_datagrams_are_dropped_and_counted_and_the_server_goes_on(net: ServerNet):
    P = protocol.load(V)
    before = net.counters()
    (tree,) = net.spec.trees
    stranger = P.pack(msg_type=P.MSG_DATA, job_id=tree.job_id + 7, child=0, seq=1)  # no such job
    outsider = P.pack(msg_type=P.MSG_DATA, job_id=tree.job_id, child=9, seq=1)  # no such member
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.62.1.99", 0))
        for data in (b"", b"\x01", bytes(P.header_bytes), stranger[:-1], b"\xff" * 1500):
            s.sendto(data, (SERVER_IP, P.INA_UDP_PORT))
        for data in (stranger, outsider):
            s.sendto(data, (SERVER_IP, P.INA_UDP_PORT))
    deadline = 50
    while deadline and net.counters()["unknown_member"] - before["unknown_member"] < 2:
        threading.Event().wait(0.1)
        deadline -= 1
    after = net.counters()
    assert after["truncated"] - before["truncated"] == 4  # all but the 1,500 bytes, too long for the job's values
    assert after["unknown_member"] - before["unknown_member"] == 3  # the long one reads as job 0xffff
    assert net.process.poll() is None
    spec = net.controller.create_job("after", [m.host for m in net.spec.members], 16, mode="ina")  # new workers
    arrays = [np.full(V * 3, r + 1, np.int32) for r in range(WORKERS)]
    for result in _allreduce(spec, arrays):
        np.testing.assert_array_equal(result, np.full(V * 3, 2 * 10, np.int32))


def test_calibrate_server_measures_the_real_process_with_the_real_workers(net: ServerNet, monkeypatch):
    """``ina-ctl calibrate --server``'s default burst (``ina-allreduce`` launched per host through the network
    file's ``host_exec``) against the server process: on loopback every host's prefix is empty, a local command."""
    ctl = net.controller
    members = [m.host for m in net.spec.members]
    monkeypatch.setattr(ctl.network, "host_exec", {host: [] for host in members})
    live = sorted(ctl.state.jobs)
    measured = calibrate_server(ctl, "srv1", members, values=1 << 18, timeout=5.0)
    print(measured.line())
    assert measured.cores == 1 and measured.seconds > 0
    assert 10e3 < measured.per_core_pps < 5e6, measured.line()  # V = 64, 4 workers and the server on 2 cores
    assert measured.jobs == live  # the live jobs through srv1: their models made again
    assert sorted(ctl.state.jobs) == live  # the temporary job is gone
    assert ctl.state.server_rates == {"srv1": measured.per_core_pps}
    assert ctl.topology.hosts["srv1"].server.agg_pps_per_core == measured.per_core_pps
    assert ControllerState.load(net.spec_file.parent / "state.json").server_rates == {"srv1": measured.per_core_pps}
    assert net.process.poll() is None


def test_two_threads_each_take_a_lane_and_sum_exactly(tmp_path):
    """``--threads 2 --steer ina_t.job_id``: the job's two lanes (job ids 1 and 2) land on the two sockets, each
    thread runs its own context of the pipeline over the same registers, and every sum is exact."""
    with server_network(WORKERS, V, threads=2, pool_size=16, state_dir=tmp_path, server_ip="127.62.0.78") as net:
        assert sorted(t.job_id % 2 for t in net.spec.trees) == [0, 1]
        arrays = [np.arange(V * 41, dtype=np.int32) * (r + 1) for r in range(WORKERS)]
        for result in _allreduce(net.spec, arrays):
            np.testing.assert_array_equal(result, 2 * sum(arrays))
        counters = net.counters()
    assert net.udp["thread0_rx_segments"] > 0 and net.udp["thread1_rx_segments"] > 0
    assert net.udp["rx_segments"] == net.udp["thread0_rx_segments"] + net.udp["thread1_rx_segments"]
    assert net.udp["rx_segments"] >= counters["aggregated"] and net.udp.get("tx_errors", 0) == 0


def test_the_server_reads_its_facts_from_the_program():
    declarations = load_declarations(protocol.PROTOCOL_P4)
    assert udpio.steering_field(declarations, "ina_t.job_id") == protocol.load().field_bytes("job_id")
    with pytest.raises(ValueError, match="no header type 'ina_t' with a field 'jobid'"):
        udpio.steering_field(declarations, "ina_t.jobid")
    with pytest.raises(ValueError, match="1, 2 or 4 whole bytes"):
        udpio.steering_field(declarations, "ina_t.set")


@pytest.mark.parametrize("argv, message", [
    (["--udp", "127.0.0.1", "x.p4"], "give IP:PORT"),
    (["--udp", "127.0.0.300:9", "x.p4"], "not an IPv4 address"),
    (["--udp", "127.0.0.1:9", "--threads", "2", "x.p4"], "--threads needs --steer"),
    (["--threads", "2", "--steer", "ina_t.job_id", "x.p4"], "with --udp"),
    (["--udp", "127.0.0.1:9", "-i", "1@lo", "x.p4"], "one or the other"),
])
def test_bad_server_flags_are_refused_by_name(argv, message, capsys):
    with pytest.raises(SystemExit):
        switch_grpc.parse_args(argv)
    assert message in capsys.readouterr().err
