"""What a user gets without tuning is what the benchmarks found fastest.

The benchmarks keep their own settings, each with the measurement that chose it in their
docstrings; the library's defaults must be the same values, so a user who passes nothing runs
the configuration that was measured.  Change either side and this fails until the other follows.
"""

from __future__ import annotations

import inspect

from bench import bench_allreduce, bench_trees
from controller import cli, programs
from controller.controller import DEFAULT_POOL_SIZE, Controller, fastest
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineOptions
from controller.topology import Topology, single, tree
from controller.windows import MIN_AUTO_WINDOW
from worker import protocol, ring


def _network(archs: list[str]) -> Network:
    """Switches running these programs: one under two hosts, or s1 above s2."""
    topology = Topology.from_dict(single(2) if len(archs) == 1 else tree(1, 1))
    access = {name: SwitchAccess(f"127.0.0.1:{50001 + i}", i + 1, "builtin", arch)
              for i, (name, arch) in enumerate(zip(topology.switches, archs))}
    return Network(topology, access, {})


def test_values_per_packet_default_to_the_most_each_program_takes():
    assert protocol.load().values == bench_allreduce.VALUES == bench_trees.VALUES == 256
    assert programs.V1MODEL.max_values == 256 and programs.TNA.max_values == 64
    assert fastest(PipelineOptions(), _network(["v1model"])).values == 256
    assert fastest(PipelineOptions(), _network(["tna"])).values == 64
    assert fastest(PipelineOptions(values=32), _network(["v1model"])).values == 32  # asked for: kept


def test_a_network_with_both_programs_gets_what_every_switch_takes():
    net = _network(["v1model", "tna"])
    assert len(net.topology.switches) == 2
    assert fastest(PipelineOptions(), net).values == 64


def test_the_cli_passes_no_values_unless_asked(tmp_path):
    args = cli.parser().parse_args(["--net", str(tmp_path / "net.json"), "setup"])
    assert args.values is None  # resolved by Controller from the network's programs
    create = cli.parser().parse_args(["--net", "n.json", "job", "create", "j", "--hosts", "h1,h2"])
    assert create.pool_size is None and create.ring_sum == "native"  # auto: the trees' bandwidth-delay product
    asked = cli.parser().parse_args(["--net", "n.json", "job", "create", "j", "--hosts", "h1,h2", "--pool-size", "32"])
    assert asked.pool_size == 32


def test_a_new_controller_state_records_the_resolved_values(tmp_path):
    ctl = Controller(_network(["v1model"]), tmp_path / "state.json")
    assert ctl.state.options.values == 256


def test_pool_and_window_default_to_the_benchmarks_window_or_more():
    assert bench_allreduce.DEFAULT_POOL == DEFAULT_POOL_SIZE == MIN_AUTO_WINDOW  # auto windows are no smaller
    assert inspect.signature(Controller.create_job).parameters["pool_size"].default is None


def test_the_rings_congestion_control_is_the_benchmarks():
    assert bench_allreduce.RING_CC == ring.DEFAULT_TCP_CONGESTION
    assert inspect.signature(ring.RingWorker).parameters["tcp_congestion"].default == ring.DEFAULT_TCP_CONGESTION

