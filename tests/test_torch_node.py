"""Nodes of several ranks (worker/torch_node.py): reduce-scatter in the node, a job per rail, all-gather.

Ranks are real processes (tests/node_rank.py) with torchrun's LOCAL_RANK, LOCAL_WORLD_SIZE and
GROUP_RANK; each rail's job is a job of the loopback switch (tests/loopback_net.py: ina.p4 on the
built-in target) whose members are that rail's NIC of every node.
"""

import os
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from controller.service import start  # noqa: E402
from ina_api.client import JobsClient  # noqa: E402
from tests.conftest import free_port  # noqa: E402
from tests.loopback_net import LoopbackNet  # noqa: E402
from tests.rank_procs import json_lines, run_ranks  # noqa: E402

NODES = 2


def node_net(hosts: int, tmp_path: Path) -> LoopbackNet:
    """The loopback network on addresses of its own (127.0.4.x): these tests run beside others'."""
    return LoopbackNet(hosts, tmp_path, host_ips=[f"127.0.4.{i}" for i in range(1, hosts + 1)],
                       switch_ip="127.0.4.254")


def rail_specs(net: LoopbackNet, tmp_path: Path, local: int, name: str) -> str:
    """A job per rail of the network's hosts h(k*local + i + 1) (node k's NIC i); the path with {rail}."""
    for rail in range(local):
        members = [f"h{k * local + rail + 1}" for k in range(NODES)]
        spec = net.controller.create_job(f"{name}-rail{rail}", members, 32, mode="ina")
        spec.save(tmp_path / f"{name}-rail{rail}.json")
    return str(tmp_path / f"{name}-rail{{rail}}.json")


def node_ranks(spec: str | None, local: int, *extra: str, timeout: float = 180,
               env: dict[str, str] | None = None) -> list[tuple[int, str, str]]:
    """The ranks of NODES nodes of ``local`` ranks, as torchrun starts them; rank r sends from 127.0.4.(r + 1)."""
    world = NODES * local
    port = free_port()
    base = {k: v for k, v in os.environ.items() if k != "INA_JOB_SPEC"}
    envs = [dict(base, INA_TIMEOUT="3", LOCAL_WORLD_SIZE=str(local), LOCAL_RANK=str(r % local),
                 GROUP_RANK=str(r // local), INA_ADDRESS=f"127.0.4.{r + 1}", **({"INA_JOB_SPEC": spec} if spec else {}),
                 **(env or {})) for r in range(world)]
    return run_ranks([[sys.executable, "-m", "tests.node_rank", str(r), str(world), str(port), *extra]
                      for r in range(world)], envs, timeout)


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (NCCL inside the node)")


@pytest.mark.parametrize("local, device", [(1, "cpu"), (2, "cpu"), (3, "cpu"), (4, "cpu"),
                                           pytest.param(2, "cuda", marks=GPU)])
def test_every_dtype_and_size_on_nodes_of_several_ranks(tmp_path, local, device):
    """SUM and AVG of float32/float16/bfloat16 within the bound and int32 exact, at sizes that split
    unevenly over the node's ranks (and a tensor smaller than the node); calls in flight together; each
    rank in its own rail's job as its node's member, sending its shard and no more.  On CUDA tensors the
    node's collectives are NCCL's."""
    with node_net(NODES * local, tmp_path) as net:
        results = node_ranks(rail_specs(net, tmp_path, local, f"nodes{local}"), local, env={"NODE_DEVICE": device})
    sent = {}
    for rank, (code, stdout, stderr) in enumerate(results):
        assert code == 0, stderr[-2000:]
        checks = json_lines(stdout)
        sums = [c for c in checks if c["check"] == "allreduce"]
        assert len(sums) == 4 * 2 * 3
        for c in sums:
            if c["dtype"] == "int32":
                assert c["exact"], c
            else:
                assert c["over_bound"] <= 1.0 and c["max_abs"] > 0, c
        assert [c["exact"] for c in checks if c["check"] == "async"] == [True]
        rail = next(c for c in checks if c["check"] == "rail")
        assert (rail["job"], rail["member"]) == (f"nodes{local}-rail{rank % local}", rank // local)
        sent[rank] = rail["bytes_sent"]
    if local > 1:  # each rank sends about 1/local of what a rank of a one-rank node sends
        per_node = [sum(sent[k * local + i] for i in range(local)) for k in range(NODES)]
        for k in range(NODES):
            assert max(sent[k * local + i] for i in range(local)) < 1.5 * per_node[k] / local + 4096, sent


def test_the_service_makes_a_job_per_rail_from_one_request(tmp_path):
    """INA_CONTROLLER and nothing else: rank 0 asks the service for the nodes' rails in one request,
    every rank joins its rail's job as its node's member, and node 0's ranks delete the rails at the end."""
    with node_net(NODES * 2, tmp_path) as net:
        running = start(net.controller, "127.0.0.1:0", "t0ken", lease_seconds=2.0, watch_interval=0.2)
        try:
            (tmp_path / "token").write_text("t0ken\n")
            results = node_ranks(None, 2, env={"INA_CONTROLLER": running.address, "TORCHELASTIC_RUN_ID": "run-9",
                                               "INA_TOKEN_FILE": str(tmp_path / "token")})
            with JobsClient(running.address, "t0ken") as client:
                left = client.list()
        finally:
            running.stop()
    for rank, (code, stdout, stderr) in enumerate(results):
        assert code == 0, stderr[-2000:]
        checks = json_lines(stdout)
        assert all(c["exact"] if "exact" in c else c.get("over_bound", 0) <= 1.0 for c in checks), checks
        rail = next(c for c in checks if c["check"] == "rail")
        assert (rail["job"], rail["member"]) == (f"run-9-rail{rank % 2}", rank // 2)
    assert left == []


def test_a_killed_rank_fails_every_rank_within_the_timeout(tmp_path):
    """Node 1's local rank 1 dies in a call: every other rank's call fails with an error, within the
    worker's 3 s timeout and the node's own, not a hang and not a wrong sum."""
    with node_net(NODES * 2, tmp_path) as net:
        started = time.perf_counter()
        results = node_ranks(rail_specs(net, tmp_path, 2, "killed"), 2, "kill-after", "3", timeout=120)
        elapsed = time.perf_counter() - started
    for rank, (code, stdout, stderr) in enumerate(results):
        if rank == 3:
            assert code == 9
            continue
        failed = [c for c in json_lines(stdout) if c["check"] == "failed"]
        assert code == 0 and failed, stderr[-2000:]
        # the dying rank's call may finish before it dies: then the next one fails
        assert failed[0]["call"] in (3, 4) and failed[0]["seconds"] < 3 + 1, failed
        error = failed[0]["error"]
        if rank == 2:  # the dead rank's node-mate: its node's collective breaks at once
            assert "among node 1's 2 ranks failed" in error, error
        else:  # rail 1 lost node 1's member: both ranks of node 0 fail, and rail 1's rank says why
            assert "the allreduce failed on rail(s)" in error and "1 of node 0" in error, error
            assert rank == 0 or "AllreduceTimeout" in error, error
    assert elapsed < 100


def test_the_layout_groups_ranks_by_node_and_refuses_what_torchrun_would_not_start():
    from worker.torch_node import layout_of

    posted = [{"node": n, "local": i, "of": 2} for n, i in (("b", 1), ("a", 0), ("b", 0), ("a", 1))]
    layout = layout_of(posted, 2)
    assert layout.ranks == ((2, 0), (1, 3)) and (layout.node, layout.local_rank, layout.nodes) == (0, 0, 2)
    with pytest.raises(ValueError, match="different numbers of ranks"):
        layout_of([{"node": "a", "local": 0, "of": 1}, {"node": "b", "local": 0, "of": 2}], 0)
    with pytest.raises(ValueError, match="both say they are local rank 0 of node a"):
        layout_of([{"node": "a", "local": 0, "of": 2}, {"node": "a", "local": 0, "of": 2}], 0)
    with pytest.raises(ValueError, match=r"node a has local ranks \[1\], not 0..1"):
        layout_of([{"node": "a", "local": 1, "of": 2}, {"node": "b", "local": 0, "of": 2},
                   {"node": "b", "local": 1, "of": 2}], 0)


def test_rails_that_share_a_nic_share_its_window(tmp_path):
    """A node with one NIC for its ranks: its rails' calls split the job's pool, so the NIC has one window in
    flight (and each call one window of exponent-only frames), as a node of one rank would."""
    from worker.torch_node import NodeLayout, nic_window

    with node_net(4, tmp_path) as net:
        shared = [net.controller.create_job(f"shared-rail{i}", ["h1", "h2"], 32, mode="ina") for i in range(2)]
        own = [net.controller.create_job(f"own-rail{i}", [f"h{i + 1}", f"h{i + 3}"], 32, mode="ina")
               for i in range(2)]
    layout = NodeLayout(rank=1, node=0, local_rank=1, local_size=2, ranks=((0, 1), (2, 3)))
    assert nic_window(shared, layout) == 16
    assert nic_window(own, layout) is None
    assert nic_window(shared[:1], NodeLayout(0, 0, 0, 1, ((0,), (1,)))) is None
