"""End to end in Mininet (root) on the Tofino program: the switch is the built-in target running
p4src/tofino/ina_tna.p4 (recirculating on its internal port 68), the controller provisions it, and
workers on the hosts sum through it, as tests/test_e2e.py does with ina.p4.
"""

from __future__ import annotations

from controller.controller import Controller
from controller.programs import TNA
from controller.topology import Topology, single
from tests.mininet_env import USABLE, needs_mininet
from tests.test_e2e import assert_all_exact, reports, start_workers

if USABLE:
    from bmv2env.network import InaNetwork

pytestmark = needs_mininet
SIZE = 6_400  # values per allreduce: 100 packets of 64 per worker, a few seconds on the built-in target


def test_a_job_sums_through_the_tna_program(tmp_path):
    with InaNetwork(Topology.from_dict(single(3)), tmp_path / "net", arch="tna") as net:
        assert net.network.access["s1"].arch == "tna" and net.network.access["s1"].target == "builtin"
        with Controller(net.network, tmp_path / "state.json") as controller:
            controller.setup()
            assert controller.pipeline("s1").program is TNA
            hosts = ["h1", "h2", "h3"]
            controller.create_job("tna", hosts, pool_size=16, mode="ina")
            results = reports(start_workers(net, controller.spec_dir / "tna.json", hosts, size=SIZE, repeat=2), 50)
            assert_all_exact(results, 3, repeat=2)
            status = controller.status()
            stats = status["jobs"]["tna"]["s1"]
            packets = -(-SIZE // 64)
            assert stats["aggregated"] >= 2 * 3 * packets and stats["results"] >= 2 * packets, stats
            assert not any(status["drops"]["s1"].values()), status["drops"]
