"""The hybrid split (controller/hybrid.py) and the jobs it makes: the model against hand-computed
cases, the controller's choice of mode, and the worker's pacer.  End-to-end runs of each mode are
in tests/test_e2e.py and tests/test_worker.py."""

from __future__ import annotations

import json
import math
import random

import pytest

from controller import hybrid, plan
from controller.calibrate import calibrate
from controller.controller import JobError
from controller.entries import HIGH_WATER_CHILD
from controller.topology import Topology, single
from tests.test_controller import Switches, controller, members
from worker.engine import Pacer

F = (42 + 16 + 1024) / 1024  # wire bytes per tensor byte at V = 256
R4 = 3 * 3 / 4 * (66 + 1448) / 1448  # a hybrid's 4-worker ring of float32: float64 partials, float32 gather, TCP
R4_ALONE = 2 * 3 / 4 * (66 + 1448) / 1448  # a ring alone: float32 both ways, as gloo


def test_a_hybrids_ring_puts_3_n_minus_1_over_n_on_each_link_a_ring_alone_2():
    assert hybrid.Capacity(4, 4.0, math.inf, F).ring_wire == pytest.approx(R4)
    assert hybrid.Capacity(8, 4.0, math.inf, F).ring_wire == pytest.approx(3 * 7 / 8 * 1514 / 1448)
    assert hybrid.Capacity(1, 4.0, math.inf, F).ring_wire == 0
    assert hybrid.Capacity(4, 4.0, math.inf, F).ring_alone_wire == pytest.approx(R4_ALONE)
    assert hybrid.Capacity(4, 4.0, math.inf, F, ring_sum="float64").ring_alone_wire == pytest.approx(R4)
    assert hybrid.Capacity(4, 4.0, 1.0, F).seconds_per_mb(0.0) == pytest.approx(R4_ALONE * 8 / 4.0)


def test_split_by_hand():
    """L = 4, C = 2 Mb/s, four workers: alpha* = C r / (f (L - C) + C r), both parts end together."""
    cap = hybrid.Capacity(4, 4.0, 2.0, F)
    alpha = 2 * R4 / (F * 2 + 2 * R4)
    assert cap.best_alpha() == pytest.approx(alpha) and 0.69 < alpha < 0.70
    t = cap.seconds_per_mb(alpha)
    assert t == pytest.approx(alpha * F * 8 / 2.0)  # the switches' side...
    assert t == pytest.approx((alpha * F + (1 - alpha) * R4) * 8 / 4.0)  # ...and the link's, equal
    assert cap.seconds_per_mb(1.0) == pytest.approx(F * 8 / 2.0)  # pure INA runs at C
    assert cap.seconds_per_mb(0.0) == pytest.approx(R4_ALONE * 8 / 4.0)  # the pure ring at L, in float32
    split = hybrid.choose(cap)
    assert (split.mode, split.pace_mbps) == ("hybrid", 2.0) and split.alpha == pytest.approx(alpha)
    assert split.seconds_per_mb["hybrid"] < min(split.seconds_per_mb["ina"], split.seconds_per_mb["ring"])


@pytest.mark.parametrize("ina_mbps, mode", [(math.inf, "ina"), (4.0, "ina"), (10.0, "ina"), (0.01, "ring"),
                                            (1.0, "ring"), (2.0, "hybrid")])  # C = 1: a float32 ring alone wins
def test_auto_picks_what_the_model_predicts_fastest(ina_mbps, mode):
    split = hybrid.choose(hybrid.Capacity(4, 4.0, ina_mbps, F))
    assert split.mode == mode
    assert split.seconds_per_mb[mode] <= min(split.seconds_per_mb.values()) * 1.02
    assert split.pace_mbps is None if mode != "hybrid" else split.pace_mbps == ina_mbps


@pytest.mark.parametrize("measured, mode", [({"ina": 2.0, "ring": 3.0, "hybrid": 2.5}, "ina"),
                                            ({"ina": 2.0, "ring": 1.5, "hybrid": 2.5}, "ring"),
                                            ({"ina": 2.0, "ring": 3.0, "hybrid": 1.6}, "hybrid"),
                                            ({"ina": 2.0, "ring": 3.0}, "hybrid")])  # no hybrid burst: the model
def test_auto_runs_what_the_bursts_measured_fastest(measured, mode):
    """A small window's round trip grows when the ring shares the link: a hybrid the model favours can
    measure slower, and then auto runs the faster pure method, at its own share."""
    split = hybrid.choose(hybrid.Capacity(4, 4.0, 2.0, F), "auto", measured=measured)
    assert split.mode == mode and split.alpha == {"ina": 1.0, "ring": 0.0}.get(mode, split.alpha)
    assert ("measured" in split.why) == ("hybrid" in measured)
    assert hybrid.choose(hybrid.Capacity(4, 4.0, 2.0, F), "hybrid", measured=measured).mode == "hybrid"  # asked for


def test_the_best_split_is_never_slower_than_either_pure_method():
    """best_alpha is the best hybrid (its ring in float64 partials); auto also weighs a ring alone, which
    moves a third less (float32 both ways), so it never picks slower than any of the three."""
    rng = random.Random(3)
    for _ in range(500):
        cap = hybrid.Capacity(rng.randint(2, 64), rng.uniform(0.1, 100), rng.uniform(0.01, 200), rng.uniform(1, 1.3),
                              ring_sum=rng.choice(["native", "float64"]))
        best = cap.seconds_per_mb(cap.best_alpha())
        assert best <= cap.seconds_per_mb(1.0) * (1 + 1e-9)
        if cap.ring_sum == "float64":
            assert best <= cap.seconds_per_mb(0.0) * (1 + 1e-9)
        for alpha in (0.1, 0.5, 0.9):
            assert best <= cap.seconds_per_mb(alpha) * (1 + 1e-9)
        split = hybrid.choose(cap)
        assert split.seconds_per_mb[split.mode] <= min(split.seconds_per_mb.values()) * 1.02


@pytest.mark.parametrize("kwargs, message", [({"alpha": 1.5, "mode": "hybrid"}, r"within \[0, 1\], not 1.5"),
                                             ({"alpha": -0.1, "mode": "hybrid"}, r"within \[0, 1\]"),
                                             ({"alpha": 0.5, "mode": "ina"}, "mode ina fixes its own"),
                                             ({"mode": "fastest"}, "mode must be one of")])
def test_bad_splits_are_refused(kwargs, message):
    with pytest.raises(hybrid.SplitError, match=message):
        hybrid.choose(hybrid.Capacity(4, 4.0, 2.0, F), **kwargs)


def test_declared_aggregation_rates_bound_the_switches_share():
    spec = single(4)
    spec["switches"]["s1"]["agg_pps"] = 1000
    topology = Topology.from_dict(spec)
    p = plan.plan_job(topology, ["h1", "h2", "h3", "h4"], 32)
    limit, why = hybrid.aggregation_limit(topology, p, 1082)
    assert limit == pytest.approx(1000 / 4 * 1082 * 8 / 1e6) and "s1 sums 1000" in why
    assert hybrid.aggregation_limit(Topology.from_dict(single(4)), p, 1082)[0] == math.inf
    spec["switches"]["s1"]["agg_pps"] = -5
    with pytest.raises(ValueError, match="agg_pps must be a positive number"):
        Topology.from_dict(spec)


# --- jobs --------------------------------------------------------------------------------------------

@pytest.fixture
def slow_switch():
    """Four hosts on 4 Mb/s links under a switch that sums 4,000 contributions per second (C = 2.51 Mb/s;
    below about 1.3 Mb/s a float32 ring alone would beat any hybrid)."""
    spec = single(4)
    spec["switches"]["s1"]["agg_pps"] = 4000
    for link in spec["links"]:
        link.append({"bw": 4})
    s = Switches(Topology.from_dict(spec))
    yield s
    s.stop()


def test_a_hybrid_job_carries_its_split_and_ring_in_the_spec(slow_switch, tmp_path):
    c = controller(slow_switch, tmp_path)
    hosts = ["h1", "h2", "h3", "h4"]
    shown = c.plan(hosts)
    assert shown.split.mode == "hybrid" and 0 < shown.split.alpha < 1
    spec = c.create_job("mixed", hosts, pool_size=8)
    assert spec.ina_share == pytest.approx(shown.split.alpha) and spec.ina_pace_mbps == pytest.approx(
        4000 / 4 * (42 + 272) * 8 / 1e6)
    assert spec.ring_port is not None and spec.ring_port not in {t.port for t in spec.trees}
    assert spec.ring_pace_mbps == pytest.approx(4.0 - spec.ina_pace_mbps)  # the ring gets what is left: L - C
    assert spec.ring_peers == [f"10.0.0.{i}:{spec.ring_port}" for i in range(1, 5)]
    assert json.loads(json.dumps(shown.to_dict(slow_switch.topology)))["split"]["mode"] == "hybrid"
    ring = c.create_job("ring", hosts, pool_size=8, mode="ring")
    assert (ring.trees, ring.ina_share) == ((), 0.0) and ring.ring_port not in (spec.ring_port, None)
    assert {e.key("hdr.ina.job_id") for e in members(c, "s1")} == {spec.trees[0].job_id}  # the ring has no entries
    pure = c.create_job("pure", hosts, pool_size=8, mode="ina")
    assert (pure.ina_share, pure.ina_pace_mbps) == (1.0, spec.ina_pace_mbps)  # paced at C
    c.close()


@pytest.mark.parametrize("kwargs, message", [({"mode": "hybrid", "alpha": 2.0}, r"within \[0, 1\]"),
                                             ({"mode": "ina", "alpha": 0.5}, "fixes its own"),
                                             ({"mode": "both"}, "mode must be one of")])
def test_bad_hybrid_requests_change_nothing(slow_switch, tmp_path, kwargs, message):
    c = controller(slow_switch, tmp_path)
    before = (c.state.next_job_id, c.installed_entries("s1"))
    with pytest.raises(JobError, match=message):
        c.create_job("x", ["h1", "h2"], pool_size=8, **kwargs)
    assert (c.state.next_job_id, c.installed_entries("s1")) == before and not c.state.jobs
    c.close()


def test_the_pacer_lets_a_burst_through_then_holds_to_the_rate():
    pacer = Pacer(8.0, frame_bytes=1000, burst_packets=2)  # 1 MB/s; a burst of 2,000 bytes
    now = 12.5  # any time: the bucket is full at the first look
    for _ in range(3):  # the bucket starts full (2,000 bytes): two frames go, the third puts it in debt
        assert pacer.ready_at(now) == now
        pacer.spend(958, now)
    assert pacer.ready_at(now) == pytest.approx(now + 1000 / 1e6)  # 1,000 bytes of debt at 1 MB/s
    assert pacer.ready_at(now + 0.0005) == pytest.approx(now + 0.001)
    assert pacer.ready_at(now + 0.002) == now + 0.002


@pytest.mark.parametrize("host_exec, message", [({}, "gives no way to run commands on h1"),
                                                ({h: ["false"] for h in ("h1", "h2", "h3", "h4")},
                                                 r"calibration: h\d \(is it running\?\): exit status 1")])
def test_calibrating_a_job_whose_hosts_do_not_run_changes_nothing(slow_switch, tmp_path, host_exec, message):
    c = controller(slow_switch, tmp_path)
    c.network.host_exec = host_exec
    spec = c.create_job("idle", ["h1", "h2", "h3", "h4"], pool_size=8)

    def seen() -> tuple:  # job ids and epochs move on (a temporary job's packets may still fly), nothing else
        jobs = json.loads((tmp_path / "state.json").read_text())["jobs"]
        entries = {e for e in c.installed_entries("s1") if dict(e.match).get("hdr.ina.child") != HIGH_WATER_CHILD}
        return jobs, entries, c.installed_groups("s1"), sorted(p.name for p in c.spec_dir.iterdir())

    before = seen()
    with pytest.raises(JobError, match=message):
        calibrate(c, "idle", values=1000, timeout=2.0)
    assert seen() == before and c.job_spec("idle") == spec
    c.close()
