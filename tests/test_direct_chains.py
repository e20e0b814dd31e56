"""A ring_tree part on real sockets (worker/chain.py, controller/direct_jobs.py's chain_part), on loopback.

Eight workers of two "interfaces" each (127.0.40.x and 127.0.41.x) and two devices of four ports: the plan's
ring_tree(4) makes two groups of four, each a ring of circuits through its device (d0, d1), the devices joined
by a circuit.  The devices are built-in-target switches on loopback with no controller of their own
(tests/loopback_net.py's LoopbackSwitch, one wire each, the d0-d1 circuit between the wires): `ina-ctl direct
setup` creates the devices' job over the four chain ends and writes every rank's relay into parts.json, and
eight DirectWorker ranks (threads) sum through their relays and the devices over real UDP sockets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from controller import cli
from controller.direct import DirectCluster, plan_of
from controller.direct_jobs import chain_network
from controller.direct_site import DirectSite
from tests.conftest import free_port, free_ports
from tests.loopback_net import Faults, LoopbackSwitch
from tests.test_direct_worker import on_ranks
from worker import DirectWorker, quantize
from worker.chain import ChainLink, ChainPart
from worker.direct import DirectAllreduceError, check_parts, parts_from_json, parts_to_json

N = 8
CLUSTER = DirectCluster(N, 2, 10.0, devices=2, device_ports=4)
KINDS = ["ring_tree(4)"]
NBYTES = 1 << 20
SIZE = 20_011  # elements per call: not a multiple of V = 256
DEVICE_IPS = ("127.0.0.230", "127.0.0.231")
SUBNET = 40  # worker w's interface i at 127.0.(SUBNET + i).(w + 1)


def site_dict(grpc: list[str], subnet: int, device_ips: tuple[str, ...]) -> dict:
    """Worker w's interface i at 127.0.(subnet+i).(w+1); device j at device_ips[j]."""
    return {"workers": [{"interfaces": [{"ip": f"127.0.{subnet + i}.{w + 1}/24",
                                         "mac": f"02:00:{subnet + i:02x}:00:00:{w + 1:02x}"}
                                        for i in range(CLUSTER.interfaces)]} for w in range(N)],
            "devices": [{"p4runtime": grpc[j], "device_id": 1, "target": "builtin", "ip": device_ips[j],
                         "mac": f"02:00:00:00:fe:{j:02x}"} for j in range(CLUSTER.devices)],
            "ring_port": free_port()}


@dataclasses.dataclass
class Setup:
    parts: list
    out: str  # what `ina-ctl direct setup` printed
    devices: list[LoopbackSwitch]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with set_up(tmp_path_factory.mktemp("chains"), SUBNET, DEVICE_IPS) as done:
        yield done


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Setup]:
    """A setup of its own: a job is one session of its ranks (the devices' cells are past the rounds of another)."""
    with set_up(tmp_path, SUBNET + 2, ("127.0.0.232", "127.0.0.233")) as done:
        yield done


@contextlib.contextmanager
def set_up(tmp: Path, subnet: int, device_ips: tuple[str, ...]) -> Iterator[Setup]:
    """The devices on loopback, `ina-ctl direct setup` of the plan's ring_tree part, and the parts it wrote."""
    grpc = [f"127.0.0.1:{port}" for port in free_ports(CLUSTER.devices)]
    site, cluster = tmp / "site.json", tmp / "cluster.json"
    site.write_text(json.dumps(site_dict(grpc, subnet, device_ips)))
    cluster.write_text(json.dumps(CLUSTER.to_dict()))
    network = chain_network(CLUSTER, plan_of(CLUSTER, NBYTES, KINDS), 0, DirectSite.load(site))
    with contextlib.ExitStack() as stack:
        devices = [stack.enter_context(LoopbackSwitch(network.topology, f"d{j}", grpc_address=grpc[j]))
                   for j in range(CLUSTER.devices)]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["direct", "setup", "--cluster", str(cluster), "--site", str(site), "--size", "1MB",
                             "--state-dir", str(tmp / "state"), "--kinds", ",".join(KINDS)]) == 0
        yield Setup(parts_from_json((tmp / "state" / "parts.json").read_text()), out.getvalue(), devices)


@contextlib.contextmanager
def ranks(parts: list, timeout: float) -> Iterator[list[DirectWorker]]:
    workers = [DirectWorker(parts, r, timeout=timeout) for r in range(N)]
    try:
        yield workers
    finally:
        for w in workers:
            w.close()


def test_setup_makes_the_relays_from_the_site(setup: Setup) -> None:
    """The devices' job is over the chain ends at their device-side addresses; every relay port binds its
    interface's address and sends to its circuit's far end (a neighbour's interface, or the device)."""
    assert "(fabric only)" not in setup.out and "part 1/1: ring_tree(4), share 1.000" in setup.out, setup.out
    (part,) = setup.parts
    assert isinstance(part, ChainPart) and part.spec.mode == "ina"
    (tree,) = part.spec.trees
    port = tree.port
    ends = {}
    for w, relay in enumerate(part.relays):
        for link in relay.links:
            here, far = link.circuit.split(" <-> ")
            interface = int(here.split(".")[1])
            assert link.port == 1 + interface and link.local == f"127.0.{SUBNET + interface}.{w + 1}:{port}"
            if far.startswith("d"):
                assert link.far == f"{DEVICE_IPS[int(far[1])]}:{part.spec.udp_port}"
                ends[w] = far
            else:
                node, there = (int(x) for x in far[1:].split("."))
                assert link.far == f"127.0.{SUBNET + there}.{node + 1}:{port}"
    assert sorted(ends) == [0, 3, 4, 7] and {ends[0], ends[3]} == {"d0.1", "d0.2"}
    assert [m.ip for m in part.spec.members] == [f"127.0.{SUBNET}.{w + 1}" for w in range(N)]


def test_every_rank_sums_through_the_relays_and_the_devices(setup: Setup) -> None:
    """float32 then int32: every rank the same bits; float32 within quantize's bound, int32 exact."""
    parts = setup.parts
    assert parts_from_json(parts_to_json(parts)) == parts
    rng = np.random.default_rng(58)
    with ranks(parts, 5.0) as workers:
        for dtype in (np.float32, np.int32, np.float32):
            if dtype == np.float32:
                arrays = [(rng.standard_normal(SIZE) * 10 ** rng.uniform(-3, 3, SIZE)).astype(dtype) for _ in range(N)]
            else:
                arrays = [rng.integers(-2**20, 2**20, SIZE, dtype=np.int32) for _ in range(N)]
            results = on_ranks(workers, lambda w, xs=arrays: w.allreduce(xs[w.rank]))
            for r in results:
                assert not isinstance(r, BaseException), r
                assert r.dtype == dtype and r.tobytes() == results[0].tobytes(), "ranks disagree"
            if dtype == np.int32:
                assert (results[0] == np.sum(arrays, axis=0, dtype=np.int64).astype(np.int32)).all()
                continue
            exact = np.sum([a.astype(np.float64) for a in arrays], axis=0)
            bound = quantize.elementwise_bound(arrays, parts[0].spec.values) + np.abs(exact) * np.finfo(dtype).eps
            assert bound.max() > 0 and (np.abs(results[0] - exact) <= bound).all()
        assert set(workers[0].last_parts) == {"part 1/1 (ring_tree, job direct-0-chains)"}


def test_a_relay_closed_mid_call_fails_every_rank_naming_the_part_and_a_circuit(fresh: Setup) -> None:
    """Rank 1 (a relay between chain end 0 and nobody further out) goes away in the middle of a call: every
    rank's own call stops getting results and fails within its timeout, naming the part and the circuit silent
    longest (and any other silent as long); rank 0 names its circuit to rank 1."""
    errors = failed_call(fresh, lambda workers: workers[1]._trees[0].close())
    assert "relay was closed mid-call" in str(errors[1])
    # rank 0 hears neither rank 1 nor (so) its device: both silent a timeout, rank 1's named (longest, mostly)
    assert "silent longest at rank 0: circuit w0." in str(errors[0]), errors[0]
    assert "circuit w0.0 <-> w1.1 (relay port 1, far end 127.0.43.2:" in str(errors[0]), errors[0]


def test_a_device_gone_mid_call_fails_every_rank_naming_its_circuits(fresh: Setup) -> None:
    """Device d1 drops everything from the middle of a call on: its chain ends name their circuits to it."""
    errors = failed_call(fresh, lambda _: setattr(fresh.devices[1], "faults", Faults(loss=1.0)))
    for r in (4, 7):  # d1's chain ends: d1 is silent, their outward neighbours still send
        assert f"silent longest at rank {r}: circuit w{r}." in str(errors[r]) and "<-> d1." in str(errors[r]), \
            errors[r]


def failed_call(setup: Setup, cut: Callable[[list[DirectWorker]], None], timeout: float = 1.5) -> list:
    """A call that ``cut`` breaks 50 ms in: every rank's error, each naming the part and (but the rank cut) a
    circuit, within the timeout (and a scheduling margin)."""
    with ranks(setup.parts, timeout) as workers:
        small = np.arange(1000, dtype=np.int32)
        assert all((r == N * small).all() for r in on_ranks(workers, lambda w: w.allreduce(small)))
        x = np.arange(1 << 19, dtype=np.int32) % 1000  # seconds of Python relays: the cut comes mid-call
        threading.Timer(0.05, cut, (workers,)).start()
        began = time.monotonic()
        errors = on_ranks(workers, lambda w: w.allreduce(x))
        took = time.monotonic() - began
    for r, e in enumerate(errors):
        assert isinstance(e, DirectAllreduceError), (r, e)
        assert set(e.failures) == {"part 1/1 (ring_tree, job direct-0-chains)"}, e
        assert "part 1/1 (ring_tree" in str(e) and (" <-> " in str(e) or "closed mid-call" in str(e)), (r, e)
    assert took < timeout + 2.0, f"the failure took {took:.1f} s to reach every rank"
    return errors


def test_bad_ring_tree_parts_are_refused_by_name(setup: Setup) -> None:
    (part,) = setup.parts
    relays = list(part.relays)

    def with_links(w: int, links: tuple[ChainLink, ...]) -> ChainPart:
        changed = list(relays)
        changed[w] = dataclasses.replace(relays[w], links=links)
        return dataclasses.replace(part, relays=tuple(changed))

    first = relays[2].links[0]
    cases = [
        (dataclasses.replace(part, relays=tuple(relays[:7])), "part 1/1: a ring_tree part has a relay per worker: 7"),
        (with_links(2, relays[2].links[1:]), r"part 1/1: relays\[2\]\.links: ports \[.*\], the relay's circuits"),
        (with_links(2, (dataclasses.replace(first, far="nowhere"), *relays[2].links[1:])),
         r"relays\[2\]\.links\[0\]\.far = 'nowhere' is not ip:port"),
        (with_links(2, (dataclasses.replace(first, local=relays[1].links[0].local), *relays[2].links[1:])),
         r"relays\[2\]\.links\[0\]\.local: .* is also relays\[1\]'s"),
        (dataclasses.replace(part, relays=(dataclasses.replace(relays[0], tree=relays[1].tree), *relays[1:])),
         None),  # rank 1's tree at rank 0: its ports are not rank 0's circuits
        (dataclasses.replace(part, relays=tuple(dataclasses.replace(
            r, tree=dataclasses.replace(r.tree, pool_size=r.tree.pool_size + 1)) for r in relays)),
         r"relays\[0\]\.tree: job .* pool .*, not the chain spec's"),
    ]
    for bad, message in cases:
        with pytest.raises(ValueError, match=message or "relays\\[0\\]"):
            check_parts([bad])
        with pytest.raises(ValueError, match="plan.json"):
            parts_from_json(parts_to_json([bad]), "plan.json")
    broken = json.loads(parts_to_json([part]))
    broken["parts"][0]["relays"][3]["tree"]["pool_size"] = 0
    with pytest.raises(ValueError, match=r"plan.json: RelayTree \(job \d+\)\.pool_size: 0 is not 1..65535"):
        parts_from_json(json.dumps(broken), "plan.json")



def time_calls(elements: int, calls: int = 4) -> list[float]:
    """Seconds per call of ``elements`` float32 on every rank at once, on a setup of its own (docs/direct.md)."""
    import tempfile

    took = []
    with tempfile.TemporaryDirectory() as tmp, set_up(Path(tmp), SUBNET + 4, ("127.0.0.234", "127.0.0.235")) as done:
        with ranks(done.parts, 5.0) as workers:
            x = np.ones(elements, np.float32)
            for _ in range(calls):
                began = time.perf_counter()
                results = on_ranks(workers, lambda w: w.allreduce(x), limit=120.0)
                took.append(time.perf_counter() - began)
                assert all(isinstance(r, np.ndarray) and (r == N).all() for r in results), results
    return took


if __name__ == "__main__":  # python -m tests.test_direct_chains [ELEMENTS]
    import sys

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 18
    for seconds in time_calls(size):
        print(f"{N} ranks, {size:,} float32 ({size * 4 / 2**20:.2f} MiB) each: {seconds:.3f} s a call")
