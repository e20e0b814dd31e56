"""The executor runs the P4 source with v1model semantics; tables follow BMv2's rules."""

from __future__ import annotations

import random

import pytest
from scapy.all import IP, UDP, Ether, raw

from p4target.executor.switch import Switch
from p4target.executor.tables import TableError, exact, lpm, ternary, value_range

from .conftest import P4_DIR


def _ipv4(dst: str, ttl: int = 64) -> bytes:
    return raw(Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP(dst=dst, ttl=ttl) / UDP() / b"x")


def _basic(path=P4_DIR / "basic.p4") -> Switch:
    sw = Switch.from_file(path)
    sw.tables["MyIngress.ipv4_lpm"].add([lpm(0x0A000000, 8, 32)], "MyIngress.ipv4_forward", [0xAA, 2])
    return sw


def test_the_executor_runs_the_source(tmp_path):
    """Edit one operator in a copy of the program: the output must change with it."""
    edited = tmp_path / "basic_edited.p4"
    edited.write_text((P4_DIR / "basic.p4").read_text().replace("hdr.ipv4.ttl - 1", "hdr.ipv4.ttl + 5"))
    original, changed = _basic(), _basic(edited)
    assert Ether(original.process(1, _ipv4("10.1.1.1"))[0].data)[IP].ttl == 63
    assert Ether(changed.process(1, _ipv4("10.1.1.1"))[0].data)[IP].ttl == 69


def test_forwarding_rewrites_and_fixes_the_checksum():
    out = _basic().process(1, _ipv4("10.9.9.9", ttl=1))
    assert len(out) == 1 and out[0].port == 2
    pkt = Ether(out[0].data)
    assert pkt.dst == "00:00:00:00:00:aa" and pkt[IP].ttl == 0
    check = pkt.copy()
    del check[IP].chksum
    assert Ether(raw(check))[IP].chksum == pkt[IP].chksum
    assert pkt[UDP].payload.load == b"x", "the unparsed payload follows the headers"


def test_default_action_drops():
    sw = _basic()
    assert sw.process(1, _ipv4("11.0.0.1")) == []
    assert sw.stats["dropped"] == 1


def test_malformed_packets_never_raise():
    sw = _basic()
    rng = random.Random(7)
    frames = [b"", b"\x00", bytes(13), bytes(14), raw(Ether() / IP())[:20]]
    frames += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))) for _ in range(300)]
    frames.append(bytes(9000))
    for frame in frames:
        for out in sw.process(1, frame):
            assert isinstance(out.data, bytes)
    assert sw.stats["internal_errors"] == 0
    assert sw.stats["received"] == len(frames)


def test_short_frame_keeps_parsed_headers_and_payload():
    sw = _basic()
    frame = raw(Ether(type=0x800)) + bytes(10)  # IPv4 header cut short: PacketTooShort
    out = sw.process(1, frame)
    assert out == [(0, frame)], "ingress ran with only Ethernet valid; nothing is lost or added"


def _lane_packet(slot: int, value: int) -> bytes:
    return slot.to_bytes(4, "big") + value.to_bytes(4, "big") * 64


def test_register_out_of_range_reads_zero_and_ignores_writes():
    sw = Switch.from_file(P4_DIR / "register64.p4")
    sw.process(1, _lane_packet(1023, 5))
    assert sw.registers["AggIngress.lane0"].cells[1023] == 5
    out = sw.process(1, _lane_packet(1024, 9))[0].data
    assert out[4:8] == (9).to_bytes(4, "big"), "0 (read out of range) + 9"
    assert sw.registers["AggIngress.lane0"].cells == [0] * 1023 + [5]


def test_multicast_replicates_per_port_and_rid(write_p4):
    path = write_p4(body="sm.mcast_grp = (bit<16>)hdr.h.a;")
    e_body = "hdr.h.b = (bit<8>)sm.egress_rid; hdr.h.c = (bit<16>)sm.instance_type;"
    text = path.read_text().replace(
        "control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }",
        "control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { " + e_body + " } }")
    path.write_text(text)
    sw = Switch.from_file(path)
    sw.set_multicast_group(3, [(1, 10), (4, 11), (4, 12)])
    out = sw.process(9, bytes([3, 0, 0, 0]))
    assert [(o.port, o.data) for o in out] == [(1, bytes([3, 10, 0, 5])), (4, bytes([3, 11, 0, 5])),
                                               (4, bytes([3, 12, 0, 5]))]
    assert sw.process(9, bytes([7, 0, 0, 0])) == [], "an empty/unknown group sends nothing"


def test_exit_ends_the_control(write_p4):
    sw = Switch.from_file(write_p4(body="sm.egress_spec = 2; if (hdr.h.a == 1) { exit; } sm.egress_spec = 3;"))
    assert sw.process(0, bytes([1, 0, 0, 0]))[0].port == 2
    assert sw.process(0, bytes([0, 0, 0, 0]))[0].port == 3


def _table_switch(write_p4, kind: str) -> Switch:
    locals_ = ("action set(bit<8> v) { hdr.h.b = v; } "
               f"table t {{ key = {{ hdr.h.a: {kind}; }} actions = {{ set; NoAction; }} default_action = set(99); }}")
    return Switch.from_file(write_p4(locals=locals_, body="t.apply();"))


def _b(sw: Switch, a: int) -> int:
    return sw.process(0, bytes([a, 0, 0, 0]))[0].data[1]


def test_lpm_longest_prefix_wins(write_p4):
    sw = _table_switch(write_p4, "lpm")
    t = sw.tables["I.t"]
    t.add([lpm(0x80, 1, 8)], "I.set", [1])
    t.add([lpm(0xF0, 4, 8)], "I.set", [2])
    t.add([lpm(0xF3, 8, 8)], "I.set", [3])
    assert [_b(sw, a) for a in (0x81, 0xF1, 0xF3, 0x01)] == [1, 2, 3, 99]


def test_ternary_highest_priority_wins(write_p4):
    sw = _table_switch(write_p4, "ternary")
    t = sw.tables["I.t"]
    t.add([ternary(0x00, 0x00)], "I.set", [1], priority=1)
    t.add([ternary(0x0F, 0x0F)], "I.set", [2], priority=5)
    t.add([ternary(0xFF, 0xFF)], "I.set", [3], priority=3)
    assert [_b(sw, a) for a in (0x10, 0x1F, 0xFF)] == [1, 2, 2]


def test_range_and_table_errors(write_p4):
    sw = _table_switch(write_p4, "range")
    t = sw.tables["I.t"]
    t.add([value_range(10, 20)], "I.set", [1], priority=1)
    assert [_b(sw, a) for a in (9, 10, 20, 21)] == [99, 1, 1, 99]
    with pytest.raises(TableError) as err:
        t.add([value_range(10, 20)], "I.set", [7], priority=1)
    assert err.value.code == "ALREADY_EXISTS"
    with pytest.raises(TableError) as err:
        t.add([value_range(30, 40)], "I.set", [256], priority=1)
    assert err.value.code == "OUT_OF_RANGE"
    with pytest.raises(TableError) as err:
        t.delete([value_range(1, 2)], priority=1)
    assert err.value.code == "NOT_FOUND"
    t.set_default("NoAction")
    assert _b(sw, 50) == 0


def test_lookups_follow_modify_and_delete_in_every_table_mode(write_p4):
    """Entries are indexed one by one (no rebuild per change): lookups must see each change."""
    lpm_t = _table_switch(write_p4, "lpm")
    t = lpm_t.tables["I.t"]
    t.add([lpm(0x80, 1, 8)], "I.set", [1])
    t.add([lpm(0xF0, 4, 8)], "I.set", [2])
    t.modify([lpm(0xF0, 4, 8)], "I.set", [5])
    assert [_b(lpm_t, a) for a in (0xF1, 0x81)] == [5, 1]
    t.delete([lpm(0xF0, 4, 8)])  # its prefix length's bucket empties
    assert _b(lpm_t, 0xF1) == 1
    t.add([lpm(0xF0, 4, 8)], "I.set", [6])
    assert _b(lpm_t, 0xF1) == 6
    tern = _table_switch(write_p4, "ternary")
    t = tern.tables["I.t"]
    t.add([ternary(0x00, 0x00)], "I.set", [1], priority=1)
    t.add([ternary(0x0F, 0x0F)], "I.set", [2], priority=5)
    t.modify([ternary(0x0F, 0x0F)], "I.set", [7], priority=5)
    assert _b(tern, 0x1F) == 7
    t.delete([ternary(0x0F, 0x0F)], priority=5)
    assert _b(tern, 0x1F) == 1
    ex = _table_switch(write_p4, "exact")
    t = ex.tables["I.t"]
    t.add([exact(3)], "I.set", [1])
    t.modify([exact(3)], "I.set", [4])
    assert _b(ex, 3) == 4
    t.delete([exact(3)])
    assert _b(ex, 3) == 99


def test_exact_table_capacity(write_p4):
    locals_ = ("action set(bit<8> v) { hdr.h.b = v; } "
               "table t { key = { hdr.h.a: exact; } actions = { set; } size = 2; }")
    t = Switch.from_file(write_p4(locals=locals_, body="t.apply();")).tables["I.t"]
    t.add([exact(1)], "I.set", [1])
    t.add([exact(2)], "I.set", [1])
    with pytest.raises(TableError) as err:
        t.add([exact(3)], "I.set", [1])
    assert err.value.code == "RESOURCE_EXHAUSTED"


def test_struct_and_header_list_initialisers(write_p4):
    decls = "struct pair_t { bit<8> x; bit<16> y; }"
    body = ("pair_t p = {8w3, 16w0x1234}; hdr.h = {p.x + 1, 8w9, p.y}; "
            "sm.egress_spec = 2;")
    sw = Switch.from_file(write_p4(body=body, decls=decls))
    out = sw.process(1, bytes(4) + b"tail")
    assert out[0].data == bytes([4, 9, 0x12, 0x34]) + b"tail"


def test_list_initialiser_with_wrong_arity_is_an_error(write_p4):
    from p4target.frontend import load_program
    from p4target.frontend.errors import P4Error

    with pytest.raises(P4Error, match=r"3 fields, the list has 2"):
        load_program(write_p4(body="hdr.h = {8w1, 8w2};"))


def test_entries_are_found_and_deleted_by_the_match_they_were_added_with():
    sw = Switch.from_file(P4_DIR / "basic.p4")
    t = sw.tables["MyIngress.ipv4_lpm"]
    t.add([lpm(0x0A000000, 8, 32)], "MyIngress.drop")
    assert t.find([lpm(0x0A000000, 8, 32)]) is not None
    t.delete([lpm(0x0A000000, 8, 32)])
    with pytest.raises(TableError) as err:
        t.delete([lpm(0x0A000000, 8, 32)])
    assert err.value.code == "NOT_FOUND"
