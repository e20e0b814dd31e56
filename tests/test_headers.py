"""Headers, unions, stacks and varbit on the built-in target: corners the STF programs
(validity, header_union, stack_ops, varbit) do not reach, and clean refusals."""

from __future__ import annotations

import pytest

from p4target.executor.headers import shift_order
from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_program

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header ctl_t {{ bit<8> op; bit<8> idx; bit<8> res; bit<8> err; }}
header item_t {{ bit<8> v; }}
header w_t {{ bit<16> w; }}
header_union u_t {{ item_t a; w_t b; }}
header opt_t {{ bit<8> k; varbit<16> data; }}
struct headers {{ ctl_t ctl; item_t[3] items; u_t[2] us; opt_t o; }}
struct metadata {{ bit<32> li; }}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.ctl); {parser} transition accept; }}
}}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    apply {{ sm.egress_spec = 1; {ingress} }}
}}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr); }} }}
V1Switch(P(), C(), I(), E(), C(), D()) main;
"""


def _switch(tmp_path, parser: str = "", ingress: str = "") -> Switch:
    path = tmp_path / "prog.p4"
    path.write_text(PROGRAM.format(parser=parser, ingress=ingress))
    return Switch.from_file(path)


def _refused(tmp_path, parser: str = "", ingress: str = "") -> str:
    path = tmp_path / "prog.p4"
    path.write_text(PROGRAM.format(parser=parser, ingress=ingress))
    with pytest.raises(P4Error) as info:
        Switch(load_program(path))
    assert info.value.loc.file == str(path)
    return info.value.message


def test_shift_order_follows_bmv2_swaps():
    # push_front(2) on [a b c d e]: swaps (4,2) (3,1) (2,0) give [e d a b c]; 0 and 1 invalid
    assert shift_order(5, 2, push=True) == ([4, 3, 0, 1, 2], [0, 1])
    # pop_front(1) on [a b c d]: swaps (0,1) (1,2) (2,3) give [b c d a]; 3 invalid
    assert shift_order(4, 1, push=False) == ([1, 2, 3, 0], [3])
    # counts at least the size: nothing moves, everything becomes invalid
    assert shift_order(3, 3, push=False) == ([0, 1, 2], [0, 1, 2])
    assert shift_order(3, 5, push=True) == ([0, 1, 2], [0, 1, 2])
    assert shift_order(3, 0, push=True) == ([0, 1, 2], [])


def test_runtime_index_out_of_bounds_skips_the_statement(tmp_path):
    """BMv2 aborts there (tests/p4/builtin_only/stack_index_range.p4); the built-in target skips the
    statement and the packet goes on."""
    sw = _switch(tmp_path, parser="pkt.extract(hdr.items.next);",
                 ingress="hdr.items[hdr.ctl.idx].v = 0xEE; hdr.ctl.res = hdr.items[hdr.ctl.idx].v;")
    assert sw.process(0, bytes([0, 2, 0, 0, 0x0A])) == [(1, bytes([0, 2, 0xEE, 0, 0x0A]))]
    assert sw.process(0, bytes([0, 3, 0, 0, 0x0A])) == [(1, bytes([0, 3, 0, 0, 0x0A]))]
    assert sw.process(0, bytes([0, 255, 7, 0, 0x0A])) == [(1, bytes([0, 255, 7, 0, 0x0A]))]
    assert sw.stats["internal_errors"] == 0
    assert sw.stats["dropped"] == 0


def test_last_index_and_last_in_the_parser(tmp_path):
    parser = ("pkt.extract(hdr.items.next); pkt.extract(hdr.items.next); "
              "meta.li = hdr.items.lastIndex; hdr.ctl.res = hdr.items.last.v;")
    sw = _switch(tmp_path, parser=parser, ingress="hdr.ctl.idx = (bit<8>)meta.li;")
    # two items parsed: lastIndex 1, last.v = 0B
    assert sw.process(0, bytes([0, 0, 0, 0, 0x0A, 0x0B])) == [(1, bytes([0, 1, 0x0B, 0, 0x0A, 0x0B]))]


def test_last_of_an_empty_stack_drops_the_packet(tmp_path):
    sw = _switch(tmp_path, parser="hdr.ctl.res = hdr.items.last.v;")
    assert sw.process(0, bytes([0, 0, 0, 0])) == []
    assert sw.stats["internal_errors"] == 0


def test_extract_into_a_union_stack_member_through_next(tmp_path):
    sw = _switch(tmp_path, parser="pkt.extract(hdr.us.next.b); pkt.extract(hdr.us.next.a);",
                 ingress="hdr.us[1].b.setValid(); hdr.us[1].b.w = 0x1234;")
    # us[0].b = 0102, us[1].a = 03; then us[1].b valid invalidates us[1].a
    assert sw.process(0, bytes([0, 0, 0, 0, 1, 2, 3])) == [(1, bytes([0, 0, 0, 0, 1, 2, 0x12, 0x34]))]


def test_stack_out_of_bounds_in_the_parser(tmp_path):
    sw = _switch(tmp_path, parser="pkt.extract(hdr.items.next); pkt.extract(hdr.items.next); "
                                  "pkt.extract(hdr.items.next); pkt.extract(hdr.items.next);",
                 ingress="if (sm.parser_error == error.StackOutOfBounds) { hdr.ctl.err = 1; }")
    assert sw.process(0, bytes([0, 0, 0, 0, 1, 2, 3, 4])) == [(1, bytes([0, 0, 0, 1, 1, 2, 3, 4]))]


def test_varbit_extract_length_not_whole_bytes(tmp_path):
    sw = _switch(tmp_path, parser="pkt.extract(hdr.o, (bit<32>)hdr.ctl.idx);",
                 ingress="if (sm.parser_error == error.ParserInvalidArgument) { hdr.ctl.err = 1; }")
    assert sw.process(0, bytes([0, 8, 0, 0, 7, 9])) == [(1, bytes([0, 8, 0, 0, 7, 9]))]
    assert sw.process(0, bytes([0, 4, 0, 0, 7, 9])) == [(1, bytes([0, 4, 0, 1, 7, 9]))]


def test_header_sizes_are_constants(tmp_path):
    sw = _switch(tmp_path, ingress="hdr.ctl.res = (bit<8>)hdr.o.maxSizeInBits(); "
                                   "hdr.ctl.err = (bit<8>)hdr.o.minSizeInBytes();")
    assert sw.process(0, bytes([0, 0, 0, 0])) == [(1, bytes([0, 0, 24, 1]))]


@pytest.mark.parametrize("parser, ingress, message", [
    ("", "hdr.items.next.setValid();", "can only be used in a parser"),
    ("", "hdr.us.push_front(1);", "push_front on a stack of header unions is not supported by the built-in target"),
    ("pkt.extract(hdr.o);", "", "needs two arguments"),
    ("pkt.extract(hdr.items[0], 8);", "", "needs one argument"),
    ("hdr.items.next.v = 1;", "", "'.next' outside extract is not supported by the built-in target"),
    ("", "hdr.items.lastIndex = 1;", "can only be used in a parser"),
])
def test_refusals(tmp_path, parser, ingress, message):
    assert message in _refused(tmp_path, parser, ingress)
