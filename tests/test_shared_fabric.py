"""Jobs that meet on a fabric (controller/shared_fabric.py, issue 61): a new job's trees are packed where the
running jobs leave links free, its model on its fair share of the links they use; two interleaved jobs at once
each run as fast as one alone (virtual time)."""

from __future__ import annotations

import pytest

from controller.plan import fabric_links, pack_trees
from controller.shared_fabric import BUSY_FLOOR, fabric_loads, new_job_trees, with_loads
from controller.topology import Topology, fat_tree, tree
from virtual_fabric.jobs_at_once import run_jobs
from worker import protocol

GBIT = 1000.0


def _fat_tree_4() -> Topology:
    return Topology.from_dict(fat_tree(4, host_bw=100 * GBIT, fabric_bw=100 * GBIT))


def _hosts(topology: Topology) -> list[str]:
    return sorted(topology.hosts, key=lambda h: int(h[1:]))


def test_a_running_trees_links_offer_what_it_leaves_and_at_least_a_share() -> None:
    topology = _fat_tree_4()
    P = protocol.load(None)
    even = _hosts(topology)[0::2]
    planned = pack_trees(topology, even, P.MAX_CHILDREN, 1).trees[0]
    links = fabric_links(topology, planned.tree)
    loads = fabric_loads(topology, [("a", planned.tree, 60 * GBIT), ("b", planned.tree, 60 * GBIT)])
    assert set(loads) == set(links) and all(v == (120 * GBIT, 2) for v in loads.values())
    fair, free = with_loads(topology, loads, fair=True), with_loads(topology, loads, fair=False)
    for i, link in enumerate(topology.links):
        if i in loads:  # full: a third beside the two jobs, or the floor
            assert fair.links[i].capacity == pytest.approx(100 * GBIT / 3)
            assert free.links[i].capacity == pytest.approx(100 * GBIT * BUSY_FLOOR)
        else:
            assert fair.links[i].capacity == free.links[i].capacity == link.capacity
    half = with_loads(topology, fabric_loads(topology, [("a", planned.tree, 30 * GBIT)]), fair=True)
    assert {half.links[i].capacity for i in links} == {70 * GBIT}  # what the job leaves beats half


def test_a_new_job_takes_the_links_a_running_job_leaves_free_and_shares_when_none_are() -> None:
    topology = _fat_tree_4()
    P = protocol.load(None)
    hosts = _hosts(topology)
    even, odd = hosts[0::2], hosts[1::2]
    a = pack_trees(topology, even, P.MAX_CHILDREN, None)
    alone = pack_trees(topology, odd, P.MAX_CHILDREN, None)
    assert {fabric_links(topology, t.tree)[0] for t in alone.trees} & \
        {i for t in a.trees for i in fabric_links(topology, t.tree)}  # planned alone, b would meet a
    running = [("a", t.tree, t.rate) for t in a.trees]
    view, b = new_job_trees(topology, running, odd, P.MAX_CHILDREN, None, P.wire_factor)
    assert b is not None and b.rate == pytest.approx(alone.rate)
    assert not {i for t in b.trees for i in fabric_links(topology, t.tree)} & \
        {i for t in a.trees for i in fabric_links(topology, t.tree)}
    assert new_job_trees(topology, [], odd, P.MAX_CHILDREN, None, P.wire_factor) == (topology, None)


def test_a_new_job_shares_the_links_it_cannot_avoid_at_its_fair_share() -> None:
    topology = Topology.from_dict(tree(2, 4))  # two leaves under one spine: one way up from each
    P = protocol.load(None)
    a = pack_trees(topology, ["h1", "h2", "h5", "h6"], P.MAX_CHILDREN, None)
    alone = pack_trees(topology, ["h3", "h4", "h7", "h8"], P.MAX_CHILDREN, None, P.wire_factor)
    running = [("a", t.tree, t.rate) for t in a.trees]
    view, b = new_job_trees(topology, running, ["h3", "h4", "h7", "h8"], P.MAX_CHILDREN, None, P.wire_factor)
    assert b is not None and [t.tree for t in b.trees] == [t.tree for t in alone.trees]
    assert b.rate == pytest.approx(alone.rate / 2)  # a fills the uplinks: half of each beside it


def test_two_interleaved_jobs_at_once_each_run_as_fast_as_one_alone() -> None:
    """Odd and even hosts of fat_tree(4) at 100 Gbit/s: planned on the whole fabric each would take the
    same uplinks (1.45x the time alone, measured before this)."""
    topology = _fat_tree_4()
    hosts = _hosts(topology)
    (alone,) = run_jobs(topology, [hosts[0::2]], 1 << 16)
    together = run_jobs(topology, [hosts[0::2], hosts[1::2]], 1 << 16)
    assert alone.identical and all(j.identical for j in together)
    assert max(j.seconds[1] for j in together) <= 1.1 * alone.seconds[1], (together, alone)
    assert together[0].links and together[1].links and not together[0].links & together[1].links
