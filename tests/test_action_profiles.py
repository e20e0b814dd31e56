"""v1model action profiles and action selectors (tests/p4/action_profiles.p4): the P4Info p4c
writes for them, BMv2's choice of a group member, and the P4Runtime entities through a real
gRPC channel (the server fixtures of tests/test_p4runtime.py).

The packet is op k flow(16) m res; a selector hashes flow and m (3 bytes) with CRC-16/ARC,
and BMv2 runs the member at ``hash % n`` among the group's n member handles in increasing
order (handles are given lowest-free at creation, a weight W adds W-1 copies).
"""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4target.executor.switch import Switch as V1Switch
from p4target.executor.tables import exact
from p4target.frontend import P4Error, load_program
from p4target.p4info import build_p4info
from p4target.runtime.device_config import build_device_config

from . import test_p4runtime
from .conftest import P4_DIR, PRELUDE
from .test_p4runtime import Client, Switch
from .test_p4runtime_externs import codes
from .test_p4runtime_externs import read as read_entities

switch = test_p4runtime.switch  # a fresh server per test
PROGRAM = P4_DIR / "action_profiles.p4"
INFO = build_p4info(load_program(PROGRAM))
CONFIG = build_device_config(PROGRAM)
TABLE = {t.preamble.alias: t.preamble.id for t in INFO.tables}
ACTION = {a.preamble.alias: a.preamble.id for a in INFO.actions}
PROFILE = {a.preamble.alias: a.preamble.id for a in INFO.action_profiles}
U = p4runtime_pb2.Update
TIMEOUT = 5.0


def pkt(op: int, k: int, flow: int = 0, m: int = 0, res: int = 0) -> bytes:
    return bytes([op, k]) + flow.to_bytes(2, "big") + bytes([m, res])


def crc16_arc(data: bytes) -> int:
    """CRC-16/ARC bit by bit (BMv2's crc16), independent of the target's table-driven one."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def chosen(ports: list[int], flow: int, m: int = 0) -> int:
    """The port of the member BMv2 picks: ``ports`` are the group's members in handle order."""
    return ports[crc16_arc(flow.to_bytes(2, "big") + bytes([m])) % len(ports)]


def test_reference_crc() -> None:
    assert crc16_arc(b"123456789") == 0xBB3D  # CRC-16/ARC's check value


# --- P4Info -----------------------------------------------------------------------------------

# p4c's testdata/p4_16_samples/action_profile-bmv2.p4 and action_selector_shared-bmv2.p4 (with
# v1model's current mark_to_drop), and the P4Info p4c writes for them.
P4C_SAMPLE = PRELUDE + """
struct H { }
struct M { bit<32> hash1; }
parser ParserI(packet_in pk, out H hdr, inout M meta, inout standard_metadata_t smeta) {
    state start { transition accept; }
}
control IngressI(inout H hdr, inout M meta, inout standard_metadata_t smeta) {
    action drop() { mark_to_drop(smeta); }
    %s
}
control EgressI(inout H hdr, inout M meta, inout standard_metadata_t smeta) { apply { } }
control DeparserI(packet_out pk, in H hdr) { apply { } }
control VerifyChecksumI(inout H hdr, inout M meta) { apply { } }
control ComputeChecksumI(inout H hdr, inout M meta) { apply { } }
V1Switch(ParserI(), VerifyChecksumI(), IngressI(), EgressI(), ComputeChecksumI(), DeparserI()) main;
"""
IN_PLACE = """
    table indirect {
        key = { }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        @name("ap") implementation = action_profile(32w128);
    }
    table indirect_ws {
        key = { meta.hash1 : selector; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        @name("ap_ws") implementation = action_selector(HashAlgorithm.identity, 32w1024, 32w10);
    }
    apply { indirect.apply(); indirect_ws.apply(); }
"""
SHARED = """
    action_selector (HashAlgorithm.identity, 32w1024, 32w10) as;
    table indirect_ws {
        key = { meta.hash1 : selector; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        @name("ap_ws") implementation = as;
    }
    table indirect_ws_1 {
        key = { meta.hash1 : selector; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        @name("ap_ws") implementation = as;
    }
    apply { indirect_ws.apply(); indirect_ws_1.apply(); }
"""
P4C_TABLE = """
tables {
  preamble { id: %d name: "%s" alias: "%s" }
  action_refs { id: 23455883 }
  action_refs { id: 21257015 }
  const_default_action_id: 21257015
  initial_default_action { action_id: 21257015 }
  implementation_id: %d
  size: 1024
}
"""
P4C_ACTIONS = """
actions { preamble { id: 21257015 name: "NoAction" alias: "NoAction" annotations: "@noWarn(\\"unused\\")" } }
actions { preamble { id: 23455883 name: "IngressI.drop" alias: "drop" } }
"""
P4C_IN_PLACE = (
    'pkg_info { arch: "v1model" }'
    + P4C_TABLE % (46872340, "IngressI.indirect", "indirect", 294074782)
    + P4C_TABLE % (38116258, "IngressI.indirect_ws", "indirect_ws", 300324846)
    + P4C_ACTIONS + """
action_profiles { preamble { id: 294074782 name: "ap" alias: "ap" } table_ids: 46872340 size: 128 }
action_profiles {
  preamble { id: 300324846 name: "ap_ws" alias: "ap_ws" }
  table_ids: 38116258 with_selector: true size: 1024
}
""")
P4C_SHARED = (
    'pkg_info { arch: "v1model" }'
    + P4C_TABLE % (38116258, "IngressI.indirect_ws", "indirect_ws", 291652621)
    + P4C_TABLE % (33951097, "IngressI.indirect_ws_1", "indirect_ws_1", 291652621)
    + P4C_ACTIONS + """
action_profiles {
  preamble { id: 291652621 name: "IngressI.as" alias: "as" }
  table_ids: 38116258 table_ids: 33951097 with_selector: true size: 1024
}
""")


@pytest.mark.parametrize("body, expected", [(IN_PLACE, P4C_IN_PLACE), (SHARED, P4C_SHARED)], ids=["in_place", "shared"])
def test_p4info_is_p4cs(tmp_path, body: str, expected: str) -> None:
    path = tmp_path / "prog.p4"
    path.write_text(P4C_SAMPLE % body)
    got = build_p4info(load_program(path))
    want = text_format.Parse(expected, p4info_pb2.P4Info())
    got.ClearField("type_info")
    assert got == want, text_format.MessageToString(got)


def test_p4info_of_the_test_program() -> None:
    tables = {t.preamble.alias: t for t in INFO.tables}
    # selector keys are hashed, not matched: left out, but their field ids stay taken
    assert [(f.id, f.name) for f in tables["ecmp"].match_fields] == [(1, "hdr.h.k")]
    assert [(f.id, f.name, f.match_type) for f in tables["ecmp2"].match_fields] == [
        (2, "hdr.h.k", p4info_pb2.MatchField.TERNARY)]
    sel, small, ap = INFO.action_profiles  # declared in the control, then the one built with its table
    assert (sel.preamble.name, sel.preamble.id >> 24, sel.with_selector, sel.size, sel.max_group_size) == (
        "I.sel", 0x11, True, 128, 0)
    assert list(sel.table_ids) == [TABLE["ecmp"], TABLE["ecmp2"]]  # in name order
    assert tables["ecmp"].implementation_id == tables["ecmp2"].implementation_id == sel.preamble.id
    assert (small.size, small.max_group_size, list(small.preamble.annotations)) == (16, 4, ['@noWarn("unused")'])
    assert (ap.preamble.name, ap.with_selector, ap.size, list(ap.table_ids)) == ("ap", False, 4, [TABLE["prof"]])


def test_p4info_size_semantics(tmp_path) -> None:
    path = tmp_path / "prog.p4"
    path.write_text(P4C_SAMPLE % SHARED.replace(
        "action_selector (", '@max_group_size(200) @selector_size_semantics("sum_of_members") '
        "@max_member_weight(4000) action_selector ("))
    (profile,) = build_p4info(load_program(path)).action_profiles
    assert (profile.max_group_size, profile.sum_of_members.max_member_weight) == (200, 4000)
    assert not profile.preamble.annotations


def test_a_profile_built_in_place_needs_a_name_for_p4runtime(tmp_path) -> None:
    path = tmp_path / "prog.p4"
    path.write_text(P4C_SAMPLE % IN_PLACE.replace('@name("ap") ', ""))
    prog = load_program(path)
    V1Switch(prog)  # p4c-bm2-ss compiles it for BMv2...
    with pytest.raises(P4Error, match="anonymous table property 'implementation' with no name annotation"):
        build_p4info(prog)  # ... but not for P4Runtime


@pytest.mark.parametrize("table, message", [
    ("table t { key = { hdr.h.a : selector; } actions = { a; } }", "a selector key needs 'implementation'"),
    ('table t { key = { hdr.h.a : selector; } actions = { a; } @name("p") implementation = action_profile(8); }',
     "a selector key needs 'implementation'"),
    ('table t { key = { hdr.h.a : exact; } actions = { a; } entries = { 1 : a(); } @name("p") '
     "implementation = action_profile(8); }", "'entries' in a table with an action profile"),
    ("table t { key = { hdr.h.a : exact; } actions = { a; } implementation = 8w3; }",
     "'implementation' must name an action_profile or action_selector"),
    ("action_selector(HashAlgorithm.crc16, 32w8, 32w8) s; "
     "table t { key = { hdr.h.a : selector; } actions = { a; } implementation = s; } "
     "table u { key = { hdr.h.b : selector; } actions = { a; } implementation = s; }",
     "share action selector s but hash different selector keys"),
])
def test_tables_bmv2_cannot_run_are_refused(write_p4, table: str, message: str) -> None:
    with pytest.raises(P4Error, match=message):
        load_program(write_p4(locals="action a() { } " + table, body="t.apply();"))


# --- the executor (Python API) ------------------------------------------------------------------


@pytest.fixture
def sw() -> V1Switch:
    return V1Switch.from_file(PROGRAM)


def port_of(sw: V1Switch, data: bytes) -> int:
    (out,) = sw.process(1, data)
    return out.port


def test_profiles_run_in_python_with_a_reason(sw: V1Switch) -> None:
    assert sw.native is None and "an action profile or selector" in sw.native_status


def test_a_group_member_is_chosen_by_crc16_over_handles(sw: V1Switch) -> None:
    sel = sw.profiles["I.sel"]
    for key, port in ((20, 1), (10, 2), (30, 3), (40, 4)):  # handles 0, 1, 2, 3: creation order, not ids
        sel.add_member(key, "I.fwd", [port])
    sel.add_group(7)
    sel.set_group(7, {10: 1, 20: 1, 30: 1})
    sw.tables["I.ecmp"].add_ref([exact(5)], ("group", 7))
    got = [port_of(sw, pkt(1, 5, flow, m=flow % 7)) for flow in range(60)]
    assert got == [chosen([1, 2, 3], flow, flow % 7) for flow in range(60)]
    assert set(got) == {1, 2, 3}

    sel.set_group(7, {10: 2, 30: 1})  # member 10 gets a copy: handle 4 (lowest free)
    assert [port_of(sw, pkt(1, 5, f)) for f in range(30)] == [chosen([2, 3, 2], f) for f in range(30)]
    sel.set_group(7, {40: 1, 10: 1})  # the copy goes again
    assert [port_of(sw, pkt(1, 5, f)) for f in range(30)] == [chosen([2, 4], f) for f in range(30)]
    assert sel.members[10].handles == [1]


def test_members_misses_and_empty_groups(sw: V1Switch) -> None:
    ap = sw.profiles["ap"]
    ap.add_member(1, "I.mark", [0x42, 2])
    prof = sw.tables["I.prof"]
    prof.add_ref([exact(9)], ("member", 1))
    (out,) = sw.process(1, pkt(3, 9))
    assert (out.port, out.data) == (2, pkt(3, 9, m=0xEE, res=0x42))  # switch (action_run) saw mark
    assert port_of(sw, pkt(3, 8)) == 0  # a miss runs nothing (BMv2 has no P4 default for it)
    prof.set_default_ref(("member", 1))
    assert port_of(sw, pkt(3, 8)) == 2
    prof.reset_default()

    sel = sw.profiles["I.sel"]
    sel.add_member(1, "I.fwd", [3])
    sel.add_group(1)
    sel.set_group(1, {1: 1})
    sw.tables["I.ecmp2"].add_ref([("mask", 4, 0xFF)], ("group", 1), priority=1)
    assert port_of(sw, pkt(2, 4, flow=77)) == 3
    sel.set_group(1, {})  # emptied under an entry: BMv2 logs it and runs no action
    assert port_of(sw, pkt(2, 4, flow=77)) == 0


# --- P4Runtime ---------------------------------------------------------------------------------


@pytest.fixture
def ctl(switch: Switch) -> Client:
    client = switch.connect()
    assert client.arbitrate(1).arbitration.status.code == code_pb2.OK
    client.set_pipeline(p4info=INFO, device_config=CONFIG)
    return client


def member(profile: str, mid: int, action: str | None = "fwd", *params: int) -> dict:
    m = p4runtime_pb2.ActionProfileMember(action_profile_id=PROFILE[profile], member_id=mid)
    if action is not None:
        m.action.action_id = ACTION[action]
        for i, v in enumerate(params, 1):
            m.action.params.add(param_id=i, value=bytes([v]))
    return {"action_profile_member": m}


def group(profile: str, gid: int, *members: tuple[int, int], max_size: int = 0) -> dict:
    g = p4runtime_pb2.ActionProfileGroup(action_profile_id=PROFILE[profile], group_id=gid, max_size=max_size)
    for mid, weight in members:
        g.members.add(member_id=mid, weight=weight)
    return {"action_profile_group": g}


def table_entry(table: str, k: int, *, member_id: int | None = None, group_id: int | None = None,
                action_set: list[tuple[str, tuple[int, ...], int]] | None = None, default: bool = False) -> dict:
    te = p4runtime_pb2.TableEntry(table_id=TABLE[table], is_default_action=default)
    if not default:
        te.match.add(field_id=1, exact={"value": bytes([k])})
    if member_id is not None:
        te.action.action_profile_member_id = member_id
    if group_id is not None:
        te.action.action_profile_group_id = group_id
    if action_set is not None:
        te.action.action_profile_action_set.SetInParent()
    for action, params, weight in action_set or []:
        a = te.action.action_profile_action_set.action_profile_actions.add(weight=weight)
        a.action.action_id = ACTION[action]
        for i, v in enumerate(params, 1):
            a.action.params.add(param_id=i, value=bytes([v]))
    return {"table_entry": te}


def update(kind: int, entity: dict) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(**entity))


def read(client: Client, entity: dict) -> list:
    """What a read returns, each entity unwrapped to its message."""
    return [getattr(e, e.WhichOneof("entity")) for e in read_entities(client, **entity)]


def sent_port(switch: Switch, data: bytes) -> int | None:
    out = switch.send(1, data)
    return next(iter(out)) if out else None


def test_members_groups_and_entries(switch: Switch, ctl: Client) -> None:
    ctl.write(*(update(U.INSERT, member("sel", mid, "fwd", port)) for mid, port in ((1, 1), (2, 2), (3, 3))),
              update(U.INSERT, group("sel", 10, (1, 1), (2, 1), (3, 1))),
              update(U.INSERT, table_entry("ecmp", 5, group_id=10)))
    got = [sent_port(switch, pkt(1, 5, flow, m=3)) for flow in range(40)]
    assert got == [chosen([1, 2, 3], flow, 3) for flow in range(40)]

    ctl.write(update(U.MODIFY, group("sel", 10, (3, 2), (1, 1))))  # weights: member 3 twice (a copy, handle 3)
    assert [sent_port(switch, pkt(1, 5, f)) for f in range(40)] == [chosen([1, 3, 3], f) for f in range(40)]
    (g,) = read(ctl, group("sel", 0))
    assert [(m.member_id, m.weight) for m in g.members] == [(1, 1), (3, 2)]
    assert [m.member_id for m in read(ctl, member("sel", 0, None))] == [1, 2, 3]
    (m2,) = read(ctl, member("sel", 2, None))
    assert (m2.action.action_id, [p.value for p in m2.action.params]) == (ACTION["fwd"], [b"\x02"])
    (e,) = read(ctl, {"table_entry": p4runtime_pb2.TableEntry(table_id=TABLE["ecmp"])})
    assert e.action.action_profile_group_id == 10

    ctl.write(update(U.MODIFY, table_entry("ecmp", 5, member_id=2)))
    assert {sent_port(switch, pkt(1, 5, f)) for f in range(10)} == {2}
    ctl.write(update(U.MODIFY, member("sel", 2, "mark", 0x55, 1)))  # the member changes under the entry
    assert switch.send(1, pkt(1, 5)) == {1: [pkt(1, 5, res=0x55)]}

    ctl.write(update(U.INSERT, member("ap", 1, "mark", 0x42, 2)), update(U.INSERT, table_entry("prof", 9, member_id=1)))
    assert switch.send(1, pkt(3, 9)) == {2: [pkt(3, 9, m=0xEE, res=0x42)]}


def test_default_member(switch: Switch, ctl: Client) -> None:
    assert sent_port(switch, pkt(3, 8)) is None  # a miss runs nothing (port 0)
    ctl.write(update(U.INSERT, member("ap", 4, "fwd", 3)), update(U.MODIFY, table_entry("prof", 0, member_id=4,
                                                                                         default=True)))
    assert sent_port(switch, pkt(3, 8)) == 3
    te = p4runtime_pb2.TableEntry(table_id=TABLE["prof"], is_default_action=True)
    (got,) = read(ctl, {"table_entry": te})
    assert got.action.action_profile_member_id == 4
    assert codes(ctl, update(U.DELETE, member("ap", 4, None))) == ["FAILED_PRECONDITION"]
    ctl.write(update(U.MODIFY, {"table_entry": te}))  # no action: reset
    assert sent_port(switch, pkt(3, 8)) is None
    ctl.write(update(U.DELETE, member("ap", 4, None)))


def test_one_shot(switch: Switch, ctl: Client) -> None:
    action_set = [("fwd", (1,), 1), ("fwd", (2,), 2)]  # hidden members fwd(1), fwd(2), fwd(2): handles 0, 1, 2
    ctl.write(update(U.INSERT, table_entry("ecmp", 5, action_set=action_set)))
    assert [sent_port(switch, pkt(1, 5, f)) for f in range(40)] == [chosen([1, 2, 2], f) for f in range(40)]
    (e,) = read(ctl, {"table_entry": p4runtime_pb2.TableEntry(table_id=TABLE["ecmp"])})
    assert e.action == table_entry("ecmp", 5, action_set=action_set)["table_entry"].action  # as written
    assert read(ctl, member("sel", 0, None)) == [] and read(ctl, group("sel", 0)) == []  # hidden

    assert codes(ctl, update(U.INSERT, member("sel", 1, "fwd", 1)),  # a one-shot profile takes no members
                 update(U.INSERT, table_entry("ecmp", 6, action_set=[])),
                 update(U.INSERT, table_entry("ecmp", 6, action_set=[("fwd", (1,), 0)])),
                 update(U.INSERT, table_entry("small_t", 6, action_set=[("fwd", (1,), 5)])),
                 update(U.INSERT, table_entry("prof", 6, action_set=[("fwd", (1,), 1)]))) == [
        "INVALID_ARGUMENT", "UNIMPLEMENTED", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"]

    ctl.write(update(U.MODIFY, table_entry("ecmp", 5, action_set=[("mark", (9, 3), 1)])))
    assert switch.send(1, pkt(1, 5, 1234)) == {3: [pkt(1, 5, 1234, res=9)]}
    ctl.write(update(U.DELETE, table_entry("ecmp", 5)))
    assert switch.dataplane.switch.profiles["I.sel"].members == {}  # the hidden members went with it
    ctl.write(update(U.INSERT, member("sel", 1, "fwd", 1)))  # and the profile takes members again


def test_errors(ctl: Client) -> None:
    ctl.write(update(U.INSERT, member("sel", 1, "fwd", 1)), update(U.INSERT, member("sel", 2, "fwd", 2)),
              update(U.INSERT, group("sel", 10, (1, 1))), update(U.INSERT, table_entry("ecmp", 5, group_id=10)))
    bad_profile = member("sel", 3)
    bad_profile["action_profile_member"].action_profile_id = 0x11000999
    direct = table_entry("ecmp", 6)
    direct["table_entry"].action.action.action_id = ACTION["fwd"]
    direct["table_entry"].action.action.params.add(param_id=1, value=b"\x01")
    assert codes(
        ctl,
        update(U.INSERT, bad_profile),  # unknown profile
        update(U.INSERT, member("sel", 1, "fwd", 3)),  # duplicate member
        update(U.MODIFY, member("sel", 9, "fwd", 3)),
        update(U.DELETE, member("sel", 9, None)),
        update(U.INSERT, member("ap", 1, "drop")),  # prof cannot run drop
        update(U.INSERT, member("sel", 3, "fwd", 0xFF)),  # bit<9> fits 0xFF: fine
        update(U.DELETE, member("sel", 1, None)),  # in group 10
        update(U.DELETE, group("sel", 10)),  # under an entry
        update(U.INSERT, group("sel", 10, (2, 1))),
        update(U.INSERT, group("sel", 11, (9, 1))),  # no member 9
        update(U.INSERT, group("sel", 11, (1, 1), (1, 1))),  # twice
        update(U.INSERT, group("sel", 11, (1, 0))),  # weight 0
        update(U.INSERT, group("ap", 11)),  # a profile without selector has no groups
        update(U.MODIFY, group("sel", 12, (1, 1))),
        update(U.INSERT, direct),  # a direct action on an indirect table
        update(U.INSERT, table_entry("ecmp", 6, member_id=9)),
        update(U.INSERT, table_entry("ecmp", 6, group_id=9)),
        update(U.INSERT, table_entry("prof", 6, member_id=1)),  # a member of another profile: none here
    ) == ["INVALID_ARGUMENT", "ALREADY_EXISTS", "NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT", "OK",
          "FAILED_PRECONDITION", "FAILED_PRECONDITION", "ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT",
          "INVALID_ARGUMENT", "INVALID_ARGUMENT", "NOT_FOUND", "INVALID_ARGUMENT", "NOT_FOUND", "NOT_FOUND",
          "NOT_FOUND"]

    ctl.write(*(update(U.INSERT, member("small", mid, "fwd", mid)) for mid in range(1, 6)))
    assert codes(
        ctl,
        update(U.INSERT, group("small", 1, *((mid, 1) for mid in range(1, 6)))),  # 5 > @max_group_size(4)
        update(U.INSERT, group("small", 2, max_size=5)),
        update(U.INSERT, group("small", 3, (1, 2), max_size=2)),
        update(U.MODIFY, group("small", 3, (1, 3))),  # weights beyond max_size 2
        update(U.MODIFY, group("small", 3, (1, 1), max_size=3)),  # max_size is fixed at creation
        update(U.INSERT, group("small", 4)),
        update(U.INSERT, table_entry("small_t", 1, group_id=4)),  # BMv2 refuses an empty group
    ) == ["RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "OK", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "OK",
          "FAILED_PRECONDITION"]
    ctl.write(*(update(U.INSERT, member("ap", mid, "fwd", mid)) for mid in range(1, 5)))
    assert codes(ctl, update(U.INSERT, member("ap", 5, "fwd", 1))) == ["RESOURCE_EXHAUSTED"]  # action_profile(4)
    assert [g.group_id for g in read(ctl, group("small", 0))] == [3, 4]
    with pytest.raises(grpc.RpcError) as info:
        read(ctl, member("sel", 9, None))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND
