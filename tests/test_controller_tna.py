"""The controller on the TNA program (p4src/tofino/ina_tna.p4): per-program names, entries, provisioning.

No root: the switches are in-process P4Runtime servers of the built-in target (as in
tests/test_controller.py), which runs TNA programs and recirculates on port 68 inside the switch.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scapy.all import IP, UDP, Ether

from controller import entries, programs
from controller.controller import Controller
from controller.network import Network, SwitchAccess
from controller.pipeline import PipelineError, PipelineOptions, build
from controller.programs import TNA, V1MODEL
from controller.schema import Entry, Schema
from controller.topology import Topology, TopologyError, single, tree
from p4target.executor.tna_switch import RECIRCULATION_PORTS
from tests.test_controller import Switches, build_tree, contribution, run_tree
from worker import protocol


@pytest.fixture(scope="module")
def pipes() -> dict[str, object]:
    return {"v1model": build("builtin"), "tna": build("builtin", arch="tna")}


def with_arch(switches: Switches, arch: dict[str, str]) -> Switches:
    """The same in-process switches, the network file saying which program each runs (default v1model)."""
    switches.network = Network(switches.topology, {n: SwitchAccess(a.grpc_address, a.device_id, a.target,
                                                                   arch.get(n, "v1model"))
                                                   for n, a in switches.network.access.items()})
    return switches


@pytest.fixture
def tna_tree():
    s = with_arch(Switches(Topology.from_dict(tree(2, 2))), {"s1": "tna", "s2": "tna", "s3": "tna"})
    yield s
    s.stop()


# --- the per-program descriptions --------------------------------------------------------------

def test_program_by_arch_alias_p4info_and_path(pipes):
    assert programs.by_arch("tna") is TNA and programs.by_arch("tofino") is TNA
    assert programs.by_arch("v1model") is V1MODEL and programs.by_arch("ina") is V1MODEL
    assert pipes["tna"].program is TNA and pipes["v1model"].program is V1MODEL  # from pkg_info.arch
    assert programs.for_path("p4src/tofino/ina_tna.p4") is TNA and programs.for_path("p4src/ina.p4") is V1MODEL
    with pytest.raises(programs.ProgramError, match="psa"):
        programs.by_arch("psa")
    with pytest.raises(programs.ProgramError, match="not one of the aggregation programs"):
        programs.for_path("p4src/tofino/bitmap.p4")


def test_the_recirculation_port_is_read_from_the_tna_program():
    """RECIRC_PORT of p4src/tofino/types.p4, not re-typed: one of the ports the target recirculates on."""
    assert TNA.recirculation_port == 68 and TNA.recirculation_port in RECIRCULATION_PORTS
    assert V1MODEL.recirculation_port is None and programs.NIC.recirculation_port is None


@pytest.mark.parametrize("arch", ["v1model", "tna"])
def test_every_name_a_program_uses_is_in_its_p4info(pipes, arch):
    program, info = programs.by_arch(arch), pipes[arch].p4info
    tables = {t.preamble.name: t for t in info.tables}
    actions = {a.preamble.name: {p.name for p in a.params} for a in info.actions}
    keys = {program.jobs: {program.ingress_port, "hdr.ina.job_id", "hdr.ina.child"},
            program.routes: {"hdr.ipv4.dst"}, program.receivers: {"hdr.ina.job_id", "meta.receiver"}}
    for table, wanted in keys.items():
        assert {f.name for f in tables[table].match_fields} == wanted, table
    assert actions[program.member] == {"pool_base", "pool_size", "children", "is_root", "group", "parent_port",
                                       "index_at_parent", "epoch", "stats_base"}
    kept = {"pool_base", "pool_size", "children", "epoch"} if program.keeps_results else set()
    assert actions[program.result_from_parent] == {"group", "stats_base"} | kept
    assert actions[program.forward] == {"port", "dst_mac", "src_mac"}
    assert actions[program.address] == {"dst_mac", "src_mac", "dst_ip", "src_ip", "dst_port"}
    assert {program.job_stats, program.drops} <= {c.preamble.name for c in info.counters}
    for table in program.program_tables:  # filled by the program: the controller must not own them
        assert tables[table].is_const_table and table not in program.managed_tables


@pytest.mark.parametrize("options", [PipelineOptions(), PipelineOptions(pool_slots=256, max_jobs=8)])
def test_sizes_read_from_either_program_agree(options):
    ina, tna = build("builtin", options), build("builtin", options, "tna")
    assert (tna.pool_slots, tna.max_jobs) == (ina.pool_slots, ina.max_jobs) == \
        (options.pool_slots or 1024, options.max_jobs or 64)


def test_targets_refuse_what_they_cannot_run():
    with pytest.raises(PipelineError, match="BMv2 runs v1model programs only"):
        build("bmv2", PipelineOptions(), "tna")
    with pytest.raises(PipelineError, match="architecture 'psa'"):
        build("builtin", PipelineOptions(), "psa")


# --- entries -----------------------------------------------------------------------------------

def renamed(entry: Entry) -> Entry:
    """A v1model entry under the TNA program's names: the only difference the programs have, but for the
    cell a v1model switch keeps a parent's result in (TNA keeps none: ``Program.keeps_results``)."""
    names = {getattr(V1MODEL, f): getattr(TNA, f) for f in ("jobs", "member", "result_from_parent", "ingress_port",
                                                           "routes", "forward", "receivers", "address")}
    params = entry.params
    if entry.action == V1MODEL.result_from_parent:
        params = tuple((k, v) for k, v in params if k in ("group", "stats_base"))
    return Entry(names[entry.table], tuple(sorted((names.get(k, k), v) for k, v in entry.match)),
                 names[entry.action], params)


def test_tna_entries_are_the_v1model_entries_renamed_and_encode(pipes):
    topo = Topology.from_dict(tree(2, 2))
    P = protocol.load(64)
    schema = Schema(pipes["tna"].p4info)
    nodes = build_tree(topo, ["h1", "h2", "h3", "h4"], 32)
    for switch, node in nodes.items():
        alloc = entries.Allocation(pool_base=16, cell=2, epoch=7)
        ina, ina_group = entries.job_entries(topo, P, node, 5, 8, alloc, 16389)
        tna, tna_group = entries.job_entries(topo, P, node, 5, 8, alloc, 16389, TNA)
        assert [renamed(e) for e in ina] == tna and ina_group == tna_group, switch
        routes = entries.route_entries(topo, switch, TNA)
        assert [renamed(e) for e in entries.route_entries(topo, switch)] == routes
        for e in tna + routes:  # names, keys and widths all in the TNA program's P4Info
            assert schema.decode(schema.table_entry(e)) == e
    root = next(n for n in nodes.values() if n.parent is None)
    assert {e.key(TNA.ingress_port) for e in entries.job_entries(topo, P, root, 5, 8, alloc, 1, TNA)[0]
            if e.table == TNA.jobs} == {c.port for c in root.children}
    mark = entries.high_water_entry(41, 9, TNA)
    assert mark == renamed(entries.high_water_entry(41, 9)) and entries.read_high_water(mark) == (41, 9)
    assert schema.decode(schema.table_entry(mark)) == mark


# --- the network file ----------------------------------------------------------------------------

def test_network_file_carries_each_switchs_arch(tmp_path):
    topo = Topology.from_dict(single(2))
    net = Network(topo, {"s1": SwitchAccess("127.0.0.1:1", 1, "builtin", "tna")})
    net.save(tmp_path / "net.json")
    assert Network.load(tmp_path / "net.json").access["s1"].arch == "tna"
    data = json.loads((tmp_path / "net.json").read_text())
    del data["switches"]["s1"]["arch"]  # a file written before the field existed
    (tmp_path / "net.json").write_text(json.dumps(data))
    assert Network.load(tmp_path / "net.json").access["s1"].arch == "v1model"
    with pytest.raises(TopologyError, match="arch must be one of"):
        Network(topo, {"s1": SwitchAccess("127.0.0.1:1", 1, "builtin", "psa")})


# --- against switches running the TNA program -----------------------------------------------------

def test_tna_tree_provisioned_sums_and_converges(tna_tree, tmp_path):
    c = Controller(tna_tree.network, tmp_path / "state.json")
    c.setup()
    spec = c.create_job("big", ["h1", "h2", "h3", "h4"], pool_size=8)
    c.setup()  # idempotent
    for sw in ("s1", "s2", "s3"):
        assert c.pipeline(sw).program is TNA
        assert c.installed_entries(sw) == c.expected_entries(sw), sw
    assert c.installed_groups("s1") == {1: [(1, 0), (2, 1)]}
    parent = {e.key("hdr.ina.child"): e.action for e in c.installed_entries("s2", TNA.jobs)
              if e.key(TNA.ingress_port) == 1}
    assert parent == {0: TNA.result_from_parent}
    values = [np.full(spec.values, r + 1, dtype=np.int32) for r in range(4)]
    out = run_tree(tna_tree, spec, {r: contribution(tna_tree.topology, spec, r, values[r], slot=5, seq=9)
                                    for r in range(4)})
    P = protocol.load(spec.values)
    for m in spec.members:
        (frame,) = out[m.host]
        assert (Ether(frame)[IP].dst, Ether(frame)[UDP].dport) == (m.ip, spec.trees[0].port)
        fields, got = P.unpack(bytes(Ether(frame)[UDP].payload))
        assert (fields["slot"], fields["seq"], fields["msg_type"]) == (5, 9, P.MSG_RESULT)
        assert (got == 10).all()
    status = c.status()
    assert status["jobs"]["big"]["s1"]["aggregated"] == 2 and status["jobs"]["big"]["s2"]["from_parent"] == 1
    assert all(not any(d.values()) for d in status["drops"].values())
    c.delete_job("big")
    assert all(c.installed_entries(sw) == c.expected_entries(sw) for sw in ("s1", "s2", "s3"))
    c.close()


def test_a_lost_state_file_never_repeats_an_epoch_on_tna(tna_tree, tmp_path):
    """The high-water entry (child 0xFE) works on the TNA program too: it never looks it up."""
    c = Controller(tna_tree.network, tmp_path / "a.json")
    c.setup()
    c.create_job("one", ["h1", "h2"], pool_size=4)
    epoch = c.state.next_epoch["s2"]
    c.close()
    again = Controller(tna_tree.network, tmp_path / "b.json")
    again.setup()
    assert again.state.next_epoch["s2"] >= epoch
    again.close()


def test_a_network_of_both_programs(tmp_path):
    """Root on the TNA program, leaves on ina.p4: same wire protocol, so one job spans both."""
    s = with_arch(Switches(Topology.from_dict(tree(2, 2))), {"s1": "tna"})
    try:
        c = Controller(s.network, tmp_path / "state.json")
        c.setup()
        assert (c.pipeline("s1").program, c.pipeline("s2").program) == (TNA, V1MODEL)
        spec = c.create_job("mixed", ["h1", "h2", "h3", "h4"], pool_size=8)
        values = [np.arange(spec.values, dtype=np.int32) * (r + 1) for r in range(4)]
        out = run_tree(s, spec, {r: contribution(s.topology, spec, r, values[r]) for r in range(4)})
        P = protocol.load(spec.values)
        for m in spec.members:
            (frame,) = out[m.host]
            np.testing.assert_array_equal(P.unpack(bytes(Ether(frame)[UDP].payload))[1],
                                          np.arange(spec.values) * 10)
        c.close()
    finally:
        s.stop()


def test_bmv2env_refuses_links_on_recirculation_ports(tmp_path):
    pytest.importorskip("mininet.net")
    from bmv2env.network import InaNetwork

    spec = single(2)
    spec["links"][1] = ["h2", "s1-p68"]
    topo = Topology.from_dict(spec)
    InaNetwork(topo, tmp_path)  # ina.p4: port 68 is an ordinary port
    with pytest.raises(TopologyError, match="s1-p68 are TNA recirculation ports"):
        InaNetwork(topo, tmp_path, arch="tna")
    with pytest.raises(ValueError, match="BMv2 cannot run the tna program"):
        InaNetwork(Topology.from_dict(single(2)), tmp_path, target="bmv2", arch="tna")
    assert InaNetwork(Topology.from_dict(single(2)), tmp_path, arch="tna").target == "builtin"
