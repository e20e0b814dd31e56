"""TNA (Tofino Native Architecture) on the built-in target: what tests/p4/tna/*.stf cannot
show (counters, statistics, P4Info names, the architecture choice) and the constructs that
are refused by name when the program loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from p4target.executor.switch import Switch
from p4target.executor.tables import exact
from p4target.executor.tna_switch import TnaSwitch, load_switch
from p4target.frontend import P4Error, load_program
from p4target.p4info import build_p4info

from .conftest import P4_DIR

TNA = P4_DIR / "tna"

# A minimal TNA program; {decls}, {locals}, {body} and {parser} are filled per case.
TEMPLATE = """#include <core.p4>
#include <tna.p4>
header h_t {{ bit<16> a; bit<16> b; }}
struct H {{ h_t h; }}
struct M {{ bit<16> x; }}
{decls}
parser IP(packet_in pkt, out H hdr, out M md, out ingress_intrinsic_metadata_t ig_intr_md) {{
    {plocals}
    state start {{ pkt.extract(ig_intr_md); pkt.advance(PORT_METADATA_SIZE); pkt.extract(hdr.h); {parser}
                   transition accept; }}
}}
control I(inout H hdr, inout M md, in ingress_intrinsic_metadata_t ig_intr_md,
          in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
          inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
          inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {{
    {locals}
    apply {{ ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port; {body} }}
}}
control ID(packet_out pkt, inout H hdr, in M md) {{ apply {{ pkt.emit(hdr); }} }}
parser EP(packet_in pkt, out H hdr, out M md, out egress_intrinsic_metadata_t eg_intr_md) {{
    state start {{ pkt.extract(eg_intr_md); pkt.extract(hdr.h); transition accept; }}
}}
control E(inout H hdr, inout M md) {{ apply {{ }} }}
control ED(packet_out pkt, inout H hdr, in M md) {{ apply {{ pkt.emit(hdr); }} }}
{pipeline}
"""
PIPELINE = "Pipeline(IP(), I(), ID(), EP(), E(), ED()) pipe;\nSwitch(pipe) main;"


def program(tmp_path, decls="", locals="", body="", parser="", plocals="", pipeline=PIPELINE):
    path = tmp_path / "prog.p4"
    path.write_text(TEMPLATE.format(decls=decls, locals=locals, body=body, parser=parser, plocals=plocals,
                                    pipeline=pipeline))
    return path


def test_architecture_chooses_the_switch():
    assert isinstance(load_switch(TNA / "tna_forward.p4"), TnaSwitch)
    assert isinstance(load_switch(P4_DIR / "basic.p4"), Switch)


def test_minimal_program_echoes(tmp_path):
    sw = TnaSwitch.from_file(program(tmp_path))
    assert sw.process(7, bytes.fromhex("12345678ff")) == [(7, bytes.fromhex("12345678ff"))]


def test_counter_counts_packets_and_bytes():
    sw = TnaSwitch.from_file(TNA / "tna_hash_checksum.p4")
    ipv4 = bytes.fromhex("000000000001000000000002" "0800" "45000073000040004011b861c0a80001c0a800c7" "abcd")
    other = bytes.fromhex("000000000001000000000002" "86dd" "0102")
    sw.process(2, ipv4)
    sw.process(2, ipv4)
    sw.process(2, other)
    c = sw.counters["Ig.by_proto"]
    assert c.packets == [0, 2, 0, 1]
    assert c.bytes == [0, 2 * len(ipv4), 0, len(other)]


def test_register_conflict_is_dropped_and_counted(tmp_path):
    """A second access to one register in a packet: the fit check refuses the program (Tofino runs a
    register in one stage), and with the check off the switch drops the packet at run time."""
    source = (TNA / "tna_register.p4").read_text().replace("""            touch.execute(hdr.req.index);
        }""", """            touch.execute(hdr.req.index);
        } else if (hdr.req.op == 6) {
            do_bump();  // and a second access to cnt: dropped
            hdr.req.result = hdr.req.result + bump.execute(hdr.req.index);
        }""")
    path = tmp_path / "conflict.p4"
    path.write_text(source)
    with pytest.raises(P4Error, match=r"tofino: register Ig.cnt is used by two dependent tables"):
        TnaSwitch(load_program(path))
    sw = TnaSwitch(load_program(path), check_fit=False)
    req = bytes.fromhex("000000000001000000000002" "1234" "06" "0001" + "00" * 12)
    assert sw.process(4, req) == []
    assert sw.stats["register_conflicts"] == 1 and sw.stats["dropped"] == 1
    assert sw.registers["Ig.cnt"].cells[1] == 1  # the first execution had run
    assert sw.registers["Ig.pairs"].cells[0] == (10, 20)  # the constructor's initial value


def test_parser_error_drops_unless_parser_err_is_read(tmp_path):
    sw = TnaSwitch.from_file(program(tmp_path))
    assert sw.process(1, b"\x01") == []  # too short for h_t: Tofino's parser drops it
    assert sw.stats["parser_drops"] == 1
    sw = TnaSwitch.from_file(program(tmp_path, body="hdr.h.setValid(); hdr.h.a = ig_prsr_md.parser_err;"))
    assert sw.process(1, b"\x01") == [(1, bytes.fromhex("0002000001"))]  # PARTIAL_HDR, then the byte


def test_p4info_names_are_qualified_by_the_pipeline():
    info = build_p4info(load_program(TNA / "tna_forward.p4"))
    assert info.pkg_info.arch == "tna"
    assert [t.preamble.name for t in info.tables] == ["SwitchIngress.fwd"]
    assert "SwitchIngress.forward" in [a.preamble.name for a in info.actions]
    info = build_p4info(load_program(TNA / "tna_register.p4"))
    regs = {r.preamble.name: r for r in info.registers}
    assert set(regs) == {"Ig.pairs", "Ig.cnt"}
    assert regs["Ig.cnt"].size == 8 and regs["Ig.cnt"].type_spec.bitstring.bit.bitwidth == 32
    assert regs["Ig.pairs"].type_spec.struct.name == "pair_t"
    info = build_p4info(load_program(TNA / "tna_hash_checksum.p4"))
    (counter,) = info.counters
    assert counter.preamble.name == "Ig.by_proto" and counter.size == 4
    assert counter.spec.unit == counter.spec.BOTH


def test_direct_counter_counts_table_hits(tmp_path):
    locals = ("DirectCounter<bit<32>>(CounterType_t.PACKETS) dc; action hit() { dc.count(); } "
              "table t { key = { hdr.h.a : exact; } actions = { hit; NoAction; } counters = dc; "
              "const default_action = NoAction(); }")
    sw = TnaSwitch.from_file(program(tmp_path, locals=locals, body="t.apply();"))
    table = sw.tables["I.t"]
    table.add([exact(0x0102)], "I.hit", [])
    sw.process(1, bytes.fromhex("01020000"))
    sw.process(1, bytes.fromhex("01030000"))
    (entry,) = table.entries()
    assert entry.counter[0] == 1
    info = build_p4info(load_program(tmp_path / "prog.p4"))
    assert [d.preamble.name for d in info.direct_counters] == ["I.dc"]


REFUSED = {
    "Mirror": dict(locals="Mirror() m;"),
    "Resubmit": dict(locals="Resubmit() r;"),
    "Digest": dict(locals="Digest<M>() d;"),
    "Meter": dict(locals="Meter<bit<8>>(4, MeterType_t.PACKETS) m;"),
    "Lpf": dict(locals="Lpf<bit<16>, bit<8>>(4) f;"),
    "Wred": dict(locals="Wred<bit<16>, bit<8>>(4, 1, 0) w;"),
    "RegisterParam": dict(locals="RegisterParam<bit<16>>(3) p;"),
    "MathUnit": dict(locals="MathUnit<bit<16>>(MathOp_t.MUL, 2) u;"),
    "Random": dict(locals="Random<bit<16>>() r;"),
    "ParserCounter": dict(plocals="ParserCounter() pc;"),
    "Hash algorithm CRC8": dict(locals="Hash<bit<8>>(HashAlgorithm_t.CRC8) h;"),
    "Register.read": dict(locals="Register<bit<16>, bit<8>>(4) r;", body="hdr.h.a = r.read(0);"),
    "RegisterAction.predicate": dict(
        locals="Register<bit<16>, bit<8>>(4) r; RegisterAction<bit<16>, bit<8>, bit<16>>(r) ra = "
               "{ void apply(inout bit<16> v) { v = 1; } };", body="hdr.h.a = ra.predicate();"),
    "Checksum.subtract_all_and_deposit": dict(plocals="Checksum() c;", parser="c.subtract_all_and_deposit(hdr.h.a);"),
    "extern function 'max'": dict(body="hdr.h.a = max(hdr.h.a, hdr.h.b);"),
    "more than one Pipeline": dict(pipeline="Pipeline(IP(), I(), ID(), EP(), E(), ED()) pipe;\n"
                                            "Switch(pipe, pipe) main;"),
}


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_refused_by_name(tmp_path, case):
    with pytest.raises(P4Error) as err:
        TnaSwitch.from_file(program(tmp_path, **REFUSED[case]))
    text = str(err.value)
    assert "not supported by the built-in target" in text
    assert case in text  # the construct, by name
    assert re.search(r"prog\.p4:\d+:\d+:", text)


ERRORS = {
    "a RegisterAction without apply": (
        "Register<bit<16>, bit<8>>(4) r; RegisterAction<bit<16>, bit<8>, bit<16>>(r) ra;", "must implement apply"),
    "apply with the wrong value type": (
        "Register<bit<16>, bit<8>>(4) r; RegisterAction<bit<16>, bit<8>, bit<16>>(r) ra = "
        "{ void apply(inout bit<8> v) { } };", "must be 'inout bit<16>'"),
    "an unknown abstract method": (
        "Register<bit<16>, bit<8>>(4) r; RegisterAction<bit<16>, bit<8>, bit<16>>(r) ra = "
        "{ void run(inout bit<16> v) { } };", "no abstract method 'run'"),
    "a register of headers": ("Register<h_t, bit<8>>(4) r;", "Register<h_t> is not supported"),
}


@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
def test_bad_initialisers(tmp_path, case):
    locals, message = ERRORS[case]
    with pytest.raises(P4Error, match=re.escape(message)):
        TnaSwitch.from_file(program(tmp_path, locals=locals))


def test_block_parameters_are_checked(tmp_path):
    path = program(tmp_path)
    path.write_text(path.read_text().replace("control E(inout H hdr, inout M md)",
                                             "control E(inout H hdr, in M md)"))
    with pytest.raises(P4Error, match="must be 'inout M' for TNA's EgressT"):
        load_program(path)


def test_recirculation_is_bounded():
    """A frame that would loop through port 68 some 256 times is dropped after MAX_PASSES."""
    from p4target.executor.switch import MAX_PASSES
    from p4target.executor.tna_switch import TnaSwitch

    sw = TnaSwitch.from_file(Path(__file__).parent / "p4" / "tna" / "tna_recirculate.p4")
    frame = bytes.fromhex("030000000001" "aaaaaaaaaaaa" "0800" "c0ffee00")  # top byte 3: 4, 5, ... wraps before 3 again
    assert sw.process(5, frame) == [] and sw.stats["loop_drops"] == 1
    assert MAX_PASSES < 256


def test_native_recirculation_matches_python():
    """The C packet path (tna.h) takes its recirculation ports and pass limit from tna_switch's constants:
    a frame going round port 68 five times leaves with the same bytes as in Python, and one going round
    for ever is dropped in both."""
    from p4target.executor.tna_switch import load_switch

    path = Path(__file__).parent / "p4" / "tna" / "tna_recirculate.p4"
    native, reference = load_switch(path), load_switch(path, use_native=False)
    assert native.native_status == "native"
    frame = bytes.fromhex("fe0000000001" "aaaaaaaaaaaa" "0800" "c0ffee00")  # fe, ff, 0, 1, 2, 3: out
    out = native.process(5, frame)
    assert out == reference.process(5, frame) and [o.port for o in out] == [1] and out[0].data[0] == 3
    looping = bytes.fromhex("030000000001" "aaaaaaaaaaaa" "0800" "c0ffee00")
    assert native.process(5, looping) == reference.process(5, looping) == []
    assert native.stats["loop_drops"] == reference.stats["loop_drops"] == 1
