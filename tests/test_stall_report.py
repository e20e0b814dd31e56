"""Failures found by events, not silence (issue 41): a worker whose tree has had no result for a few
retransmission timeouts reports it with its lease renewal, and the controller probes that tree's switches with
a short deadline and moves the tree off one that does not answer, well before DEAD_AFTER.

The controller drives in-process switches (virtual_fabric.p4runtime_local, as tests/test_p4runtime_local.py)
behind the real gRPC service; the worker side runs on tests/loopback_net.py's switch.  No Mininet."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from controller.controller import DEAD_AFTER, Controller
from controller.failover import PROBE_GAP
from controller.service import start
from controller.topology import Topology, leaf_spine
from ina_api.client import JobsClient
from p4target.runtime.device_config import DeviceConfigCache
from tests.loopback_net import LoopbackNet
from tests.test_p4runtime_local import V64, FakeClock, LocalSwitches
from worker import Worker
from worker.driver import STALL_FLOOR, STALL_MAX
from worker.jobspec import JobSpec

TOKEN = "stall-token"
HOSTS = ["h1", "h2", "h3", "h4"]


@pytest.fixture(scope="module")
def cache() -> DeviceConfigCache:
    return DeviceConfigCache()


def packed(cache: DeviceConfigCache, tmp_path: Path, clock=time.monotonic) -> tuple[LocalSwitches, Controller]:
    """A leaf-spine of in-process switches, provisioned, with a job of two trees (roots spine1, spine2)."""
    net = LocalSwitches(Topology.from_dict(leaf_spine(2, 2, 2, host_bw=20, fabric_bw=10)), cache)
    c = Controller(net.network, tmp_path / "state.json", V64, connect=net.connect, clock=clock)
    c.setup()
    return net, c


def test_a_probe_takes_a_silent_switch_for_dead_and_moves_its_tree_at_once(cache, tmp_path):
    """No time passes (virtual clock): the probe alone finds spine2 silent and the round moves its tree; a second
    report within PROBE_GAP asks nobody; ids that are not the job's trees, or another job's name, do nothing."""
    clock = FakeClock()
    net, c = packed(cache, tmp_path, clock)
    spec = c.create_job("packed", HOSTS, pool_size=8)
    moving = next(t for t in spec.trees if t.root == "spine2")
    other = next(t for t in spec.trees if t.root == "spine1")
    assert c.probe("packed", [other.job_id]) == []  # its switches answer: nothing to do, no round
    net.servers["spine2"].stop()
    assert c.probe("packed", [12345]) == [] and c.probe("nobody", [moving.job_id]) == []
    lines = c.probe("packed", [moving.job_id, 12345])
    assert lines[0].startswith("spine2: does not answer within 0.2 s, and job packed reports tree(s) "
                               f"[{moving.job_id}] stalled: down")
    assert any(f"tree {moving.job_id} (root spine2) crosses spine2, down; moved to root spine1" in x for x in lines)
    assert [t.root for t in JobSpec.load(tmp_path / "jobs" / "packed.json").trees] == ["spine1", "spine1"]
    assert c.probe("packed", [moving.job_id]) == []  # spine1, leaf1, leaf2 were asked just now (PROBE_GAP)
    clock.advance(PROBE_GAP)
    assert c.probe("packed", [moving.job_id]) == []  # they answer
    c.close()


def test_a_keep_alive_reporting_a_stall_moves_the_tree_well_before_dead_after(cache, tmp_path):
    """Over gRPC, with a watch round only every 60 s: spine2 dies silently (its in-process client wakes
    nobody); the owner's renewal names the tree stalled, and the service probes and moves it within a fraction
    of DEAD_AFTER.  The renewal is answered at once, and bad ids are ignored, never an error."""
    net, c = packed(cache, tmp_path)
    service = start(c, "127.0.0.1:0", TOKEN, lease_seconds=6.0, watch_interval=60.0)
    try:
        with JobsClient(service.address, TOKEN) as client:
            job, secret = client.create("packed", [[h] for h in HOSTS], pool_size=8, mode="ina")
            spec = JobSpec.from_json(job.spec_json, "the service")
            moving = next(t for t in spec.trees if t.root == "spine2")
            assert client.keep_alive("packed", secret, [999, 0]).lease_seconds == 6.0  # not its trees: ignored
            net.servers["spine2"].stop()
            time.sleep(0.3)
            assert client.get("packed").spec_version == job.spec_version  # nothing noticed it
            started = time.monotonic()
            reply = client.keep_alive("packed", secret, [moving.job_id, 4000])
            assert time.monotonic() - started < 0.5 and reply.lease_seconds == 6.0
            while client.get("packed").spec_version == job.spec_version:
                assert time.monotonic() - started < DEAD_AFTER / 3, "the reported tree did not move"
                time.sleep(0.01)
            now = JobSpec.from_json(client.get("packed").spec_json, "the service")
            assert [t.root for t in now.trees] == ["spine1", "spine1"]
            assert next(t for t in now.trees if t.job_id == moving.job_id).incarnation == 1
            assert "spine2" in c.failover.gone
    finally:
        service.stop()
        c.close()


def test_a_worker_reports_its_stalled_tree_with_an_early_renewal(tmp_path, monkeypatch):
    """Rank 0 calls and rank 1 never does: rank 0's tree has no result with packets in flight, so the worker
    names it stalled within STALL_MAX, and its lease keeper renews at once (its interval is 2 s) carrying it;
    the service asks the controller to probe it.  After the call, nothing is stalled."""
    with LoopbackNet(2, tmp_path) as net:
        probed: list[tuple[str, set[int], float]] = []
        monkeypatch.setattr(net.controller, "probe", lambda name, ids: probed.append((name, set(ids),
                                                                                      time.monotonic())) or [])
        service = start(net.controller, "127.0.0.1:0", TOKEN, lease_seconds=15.0, watch_interval=None)
        try:
            w = Worker.from_controller(["h1", "h2"], 0, "lonely", client=JobsClient(service.address, TOKEN),
                                       pool_size=8, mode="ina", timeout=3.0)
            try:
                [tree] = w.spec.trees
                assert w.stalled_trees == frozenset() and w.service._keeper.interval == 2.0
                started = time.monotonic()
                call = w.allreduce_async(np.ones(64 * 4, np.int32))
                while not w.stalled_trees:
                    assert time.monotonic() - started < STALL_MAX + 0.5, "the tree never counted as stalled"
                    time.sleep(0.005)
                assert w.stalled_trees == {tree.job_id} and time.monotonic() - started >= STALL_FLOOR
                while not probed:
                    assert time.monotonic() - started < 1.9, "no early renewal reported the stall"
                    time.sleep(0.005)
                assert probed[0][:2] == ("lonely", {tree.job_id})
                with pytest.raises(Exception, match="no result"):
                    call.result(timeout=10)
                assert w.stalled_trees == frozenset()
            finally:
                w.close()
        finally:
            service.stop()


def test_a_keeper_renews_early_at_most_once_per_gap():
    """stalled_now wakes the keeper; a burst of them gives one renewal, and the reported trees go with it."""
    class Client:
        timeout = 1.0

        def __init__(self) -> None:
            self.renewals: list[list[int]] = []

        def keep_alive(self, name, secret, stalled=()):
            self.renewals.append(list(stalled))
            return type("Reply", (), {"spec_version": 0})()

    from ina_api import jobs_pb2
    from ina_api.client import LeaseKeeper
    client = Client()
    keeper = LeaseKeeper(client, jobs_pb2.Job(name="j", lease_seconds=30), "secret", interval=10.0, early_gap=0.2)
    keeper.stalled = lambda: {7, 3}
    try:
        for _ in range(50):
            keeper.stalled_now()
        deadline = time.monotonic() + 2
        while not client.renewals and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.1)
        assert client.renewals == [[3, 7]]
        keeper.stalled_now()
        time.sleep(0.4)
        assert client.renewals == [[3, 7], [3, 7]]  # the second no sooner than early_gap after the first
    finally:
        keeper.stop()


@pytest.mark.parametrize("secret", ["secret", None], ids=["owner", "follower"])
def test_a_beat_while_a_tree_is_stalled_is_followed_up_soon_for_the_moved_trees_spec(secret):
    """The service moves a reported tree after its probe (0.2 s deadline); the keeper beats again
    STALL_FOLLOW_UP later, not an interval (10 s here) later, and hands on the new spec: the owner's
    renewal, which reported the stall, and a rank's without the secret (a look at the spec).  Once
    nothing is stalled, beats go back to the interval."""
    from ina_api import jobs_pb2
    from ina_api.client import STALL_FOLLOW_UP, LeaseKeeper

    class Client:
        timeout = 1.0

        def __init__(self) -> None:
            self.beats: list[tuple[float, list[int]]] = []

        def keep_alive(self, name, secret, stalled=()):
            self.beats.append((time.monotonic(), list(stalled)))
            return type("Reply", (), {"spec_version": 0 if len(self.beats) == 1 else 1})()

        def get(self, name):
            if secret is None:  # a follower's beat
                self.beats.append((time.monotonic(), []))
            return jobs_pb2.Job(name=name, spec_version=0 if len(self.beats) == 1 else 1, spec_json="moved")

    client, specs, stalled = Client(), [], {5}
    keeper = LeaseKeeper(client, jobs_pb2.Job(name="j", lease_seconds=30), secret, on_spec=specs.append,
                         interval=10.0, early_gap=0.02)
    keeper.stalled = lambda: set(stalled)
    try:
        keeper.stalled_now()
        deadline = time.monotonic() + 3
        while not specs and time.monotonic() < deadline:
            time.sleep(0.005)
        assert specs == ["moved"], "no follow-up beat fetched the new spec"
        (first, reported), (second, _) = client.beats[:2]
        assert reported == ([5] if secret else []) and STALL_FOLLOW_UP - 0.01 <= second - first < STALL_FOLLOW_UP + 0.5
        stalled.clear()
        time.sleep(3 * STALL_FOLLOW_UP)  # the next follow-up (doubled) finds nothing stalled: then the interval
        count = len(client.beats)
        time.sleep(6 * STALL_FOLLOW_UP)
        assert len(client.beats) == count
    finally:
        keeper.stop()
