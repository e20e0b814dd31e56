"""The Tofino 1 fit check (p4target/tofino_fit): one small TNA program per rule, breaking only that
rule, refused with the resource, the count and the place; the TNA program before issue 59 refused;
p4src/tofino/ina_tna.p4 placed, pass by pass.  The sources of the numbers are in p4target/tofino_fit/limits.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4target.cli import main as check_main
from p4target.executor.tna_switch import TnaSwitch
from p4target.frontend import P4Error, load_program
from p4target.tofino_fit import check, render
from p4target.tofino_fit.salu import check_register_action

from .test_tna import program

ROOT = Path(__file__).resolve().parent.parent
INA_TNA = ROOT / "tests" / "p4" / "tna" / "before_issue59" / "tofino" / "ina_tna.p4"  # as before issue 59

COUNTER_RA = """RegisterAction<bit<16>, bit<16>, bit<16>>({reg}) {name} = {{
        void apply(inout bit<16> v, out bit<16> rv) {{ rv = v; v = v + 1; }}
    }};"""


def register(reg: str, *actions: str) -> str:
    """A 16-bit register and counting RegisterActions on it (a shape one SALU runs)."""
    return f"Register<bit<16>, bit<16>>(16) {reg};\n    " + "\n    ".join(
        COUNTER_RA.format(reg=reg, name=a) for a in actions)


def chain(n: int) -> tuple[str, str]:
    """Locals v0..vn and n assignments each reading the one before: n dependent units."""
    decls = " ".join(f"bit<16> v{i};" for i in range(n + 1))
    body = "\n        ".join(f"v{i} = v{i - 1} + 1;" for i in range(1, n + 1))
    return decls, body


def where(path: Path, snippet: str, nth: int = 1) -> tuple[int, int]:
    """(line, column) of the nth occurrence of ``snippet`` in the file."""
    seen = 0
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        col = line.find(snippet)
        while col >= 0:
            seen += 1
            if seen == nth:
                return line_no, col + 1
            col = line.find(snippet, col + 1)
    raise AssertionError(f"{snippet!r} is not in {path}")


def refusal(path: Path) -> P4Error:
    with pytest.raises(P4Error) as info:
        check(load_program(path))
    return info.value


def assert_refused(path: Path, message: str, snippet: str, nth: int = 1) -> None:
    err = refusal(path)
    assert err.message == message
    assert (err.loc.line, err.loc.col) == where(path, snippet, nth)


# --------------------------------------------------------------------------- what fits
def test_a_program_that_fits_reports_its_stages(tmp_path):
    """A chain of 3 dependent units in each branch of an if: the branches exclude each other, so
    3 stages, not 6; two registers run in their own stages."""
    locals_, body = chain(3)
    path = program(tmp_path, locals=f"{locals_}\n    {register('r0', 'ra0')}\n    {register('r1', 'ra1')}",
                   body=f"if (hdr.h.a == 1) {{ {body} }} else {{ {body.replace('+ 1', '+ 2')} }}\n"
                        "        hdr.h.b = ra0.execute(v3);\n        md.x = ra1.execute(hdr.h.a);")
    report = check(load_program(path))
    assert report.stages == {"ingress": 4, "egress": 0}  # v1, v2, v3, then ra0 reads v3
    assert report.salus == 2 and report.tables == 9
    assert report.per_stage["ingress"][0].salus == ["I.r1"]  # ra1 reads only the header
    assert report.per_stage["ingress"][3].salus == ["I.r0"]
    text = render(report)
    assert "stage | units | SALUs" in text and "stateful ALUs: 2 of 48" in text


def test_a_table_run_on_another_s_hit_may_share_its_stage(tmp_path):
    """Control dependence (a gateway on a table's result) needs no later stage, as a Tofino stage
    predicates its logical tables on the earlier ones'; a field the first table writes does."""
    tables = "\n    ".join(f"table t{i} {{ key = {{ hdr.h.a: exact; }} actions = {{ NoAction; }} }}" for i in (1, 2))
    prog = load_program(program(tmp_path, locals=tables, body="if (t1.apply().hit) { t2.apply(); }"))
    assert check(prog).stages["ingress"] == 1
    prog = load_program(program(tmp_path, locals=tables, body="if (t1.apply().hit) { hdr.h.a = 1; } t2.apply();"))
    assert check(prog).stages["ingress"] == 2  # t1 with the assignment under its gateway; t2 matches on hdr.h.a


def test_the_cli_prints_the_report_or_the_refusal(tmp_path, capsys):
    assert check_main(["--target", "tofino", str(program(tmp_path))]) == 0
    assert "ingress: 1 of 12 stages" in capsys.readouterr().out
    assert check_main(["--target", "tofino", str(INA_TNA)]) == 1
    assert "tofino: stateful ALUs: 70 > 48" in capsys.readouterr().err


# --------------------------------------------------------------------------- stages and tables
def in_the_last_stage(tmp_path, decls: str, uses: str):
    """A program whose ``uses`` read v11, written in stage 10 by a chain: they can only go in stage 11."""
    locals_, body = chain(11)
    return program(tmp_path, locals=f"{locals_}\n    {decls}", body=f"{body}\n        {uses}")


def test_a_dependency_chain_of_13_needs_13_stages(tmp_path):
    # 12 match-action stages per pipe: bf-p4c/device.h TofinoDevice::getNumStages()
    locals_, body = chain(13)
    path = program(tmp_path, locals=locals_, body=body)
    assert_refused(path, "tofino: ingress stages: 13 > 12 (I.v13 is in stage 12 of a dependency chain)",
                   "v13 = v12 + 1;")


def test_17_tables_that_must_share_the_last_stage(tmp_path):
    # 16 logical tables per stage: bf-p4c/specs/mau_spec.h StageUse::MAX_LOGICAL_IDS
    tables = "\n    ".join(f"table t{i} {{ key = {{ v11: exact; }} actions = {{ NoAction; }} }}" for i in range(17))
    path = in_the_last_stage(tmp_path, tables, " ".join(f"t{i}.apply();" for i in range(17)))
    assert_refused(path, "tofino: logical tables in stage 11: 17 > 16 (I.t16 cannot move to a later stage)",
                   "t16.apply()")


def test_193_tables_are_more_than_the_pipe_has(tmp_path):
    # 16 logical tables x 12 stages = 192 per pipe (mau_spec.h, device.h)
    tables = "\n    ".join(f"table t{i} {{ key = {{ hdr.h.a: exact; }} actions = {{ NoAction; }} }}"
                           for i in range(193))
    path = program(tmp_path, locals=tables, body=" ".join(f"t{i}.apply();" for i in range(193)))
    assert_refused(path, "tofino: logical tables: 194 > 192 (I.t191 is number 193)", "t191.apply()")


# --------------------------------------------------------------------------- stateful ALUs
def test_5_registers_that_must_share_the_last_stage(tmp_path):
    # 4 stateful ALUs per stage: bf-p4c/mau/resource_estimate.h StageUseEstimate::MAX_METER_ALUS
    regs = "\n    ".join(register(f"r{i}", f"ra{i}") for i in range(5))
    outs = " ".join(f"bit<16> w{i};" for i in range(5))
    path = in_the_last_stage(tmp_path, f"{outs}\n    {regs}", " ".join(f"w{i} = ra{i}.execute(v11);" for i in range(5)))
    assert_refused(path, "tofino: stateful ALUs in stage 11: 5 > 4 (I.w4 cannot move to a later stage)",
                   "w4 = ra4.execute(v11);")


def test_49_registers_are_more_than_the_pipe_has(tmp_path):
    # 4 stateful ALUs x 12 stages = 48 per pipe, one per register
    regs = "\n    ".join(register(f"r{i}", f"ra{i}") for i in range(49))
    outs = " ".join(f"bit<16> w{i};" for i in range(49))
    runs = " ".join(f"w{i} = ra{i}.execute(hdr.h.a);" for i in range(49))
    path = program(tmp_path, locals=f"{outs}\n    {regs}", body=runs)
    assert_refused(path, "tofino: stateful ALUs: 49 > 48 (one per register with RegisterActions; I.r48 is number 49)",
                   "Register<bit<16>, bit<16>>(16) r48;")


def test_a_register_used_by_two_dependent_tables(tmp_path):
    # one register = one stateful ALU in one stage (resource_estimate.h): a unit that needs another's
    # result cannot share its stage
    path = program(tmp_path, locals=register("r", "first", "second"),
                   body="md.x = first.execute(hdr.h.a); hdr.h.b = second.execute(md.x);")
    assert_refused(path, "tofino: register I.r is used by two dependent tables (I.md.x at line "
                   f"{where(path, 'md.x = first')[0]} and I.hdr.h.b)", "hdr.h.b = second")


@pytest.mark.parametrize("default, fits", [("nop", True), ("bump_a", False)])
def test_a_table_on_another_s_miss_may_share_its_register(tmp_path, default, fits):
    """t2 runs only when t1 missed, so only when t1 ran its const default action: if that action
    does not execute r, t1 (on a hit) and t2 share r's stateful ALU in one stage, as bf-p4c
    compiles bf-p4c p4-tests stf/shared_stateful1.p4; if it does, a packet could run r twice."""
    locals_ = register("r", "ra_a", "ra_b") + f"""
    action nop() {{}}
    action bump_a() {{ ra_a.execute(hdr.h.a); }}
    action bump_b() {{ md.x = ra_b.execute(hdr.h.a); }}
    table t1 {{ key = {{ hdr.h.b: exact; }} actions = {{ nop; bump_a; }} const default_action = {default}(); }}
    table t2 {{ key = {{ hdr.h.b: ternary; }} actions = {{ nop; bump_b; }} const default_action = nop(); }}"""
    path = program(tmp_path, locals=locals_, body="if (t1.apply().miss) { t2.apply(); }")
    if fits:
        report = check(load_program(path))
        assert report.stages["ingress"] == 1 and report.salus == 1
    else:
        assert_refused(path, "tofino: register I.r is used by two dependent tables (I.t1 at line 28 and I.t2)",
                       "t2.apply()")


def test_5_register_actions_on_one_register(tmp_path):
    # a stateful ALU holds 4 instructions: at most 4 RegisterActions per register (limits.py)
    names = [f"ra{i}" for i in range(5)]
    body = " else ".join(f"if (hdr.h.a == {i}) {{ md.x = ra{i}.execute(hdr.h.b); }}" for i in range(5))
    path = program(tmp_path, locals=register("r", *names), body=body)
    assert_refused(path, "tofino: RegisterActions on register I.r: 5 > 4",
                   "RegisterAction<bit<16>, bit<16>, bit<16>>(r) ra4")


def ra_program(tmp_path: Path, cell: str, apply_body: str, reg_decl: str = "") -> Path:
    """One register ``r`` of ``cell`` and one RegisterAction ``ra`` with ``apply_body``, executed once."""
    ra = (f"Register<{cell}, bit<16>>(16) r;\n    RegisterAction<{cell}, bit<16>, bit<16>>(r) ra = {{\n"
          f"        void apply(inout {cell} v, out bit<16> rv) {{ {apply_body} }}\n    }};")
    return program(tmp_path, decls=reg_decl, locals=ra, body="md.x = ra.execute(hdr.h.a);")


def test_a_pair_cell_over_64_bits(tmp_path):
    # a cell is one value <= 32 bits or a pair of halves <= 32 bits each (Chipmunk's Tofino SALU: 2 ALUs
    # per 32-bit half; limits.py)
    path = ra_program(tmp_path, "pair_t", "rv = (bit<16>)v.lo;",
                      "struct pair_t { bit<40> lo; bit<40> hi; }")
    assert_refused(path, "tofino: register I.r cell bits: 80 > 64", "Register<pair_t, bit<16>>(16) r;")


def test_three_comparisons(tmp_path):
    # 2 conditions per SALU on Tofino 1 (Chipmunk's Tofino SALU description)
    path = ra_program(tmp_path, "bit<16>", "if (v > hdr.h.a) { v = 0; } else if (v == 5) { v = v + 1; } "
                      "else if (v < hdr.h.b) { v = 0; } rv = v;")
    assert_refused(path, "tofino: comparisons in RegisterAction ra: 3 > 2 (v > hdr.h.a; v == 5; v < hdr.h.b)",
                   "RegisterAction")


def test_a_cast_wider_than_32_bits(tmp_path):
    # SALU operands are at most 32 bits (Chipmunk's Tofino SALU; today's lane.p4 casts to int<34>)
    path = ra_program(tmp_path, "bit<16>", "if ((bit<34>)v + (bit<34>)hdr.h.a > 65535) { v = 0; } rv = v;")
    assert_refused(path, "tofino: cast width in RegisterAction ra: 34 > 32 ((bit<34>)v)", "RegisterAction")


def test_three_constants_returned(tmp_path):
    # one output word, one source (Chipmunk's Tofino SALU; today's round_check.p4 check_seq)
    path = ra_program(tmp_path, "bit<16>", "if (v == hdr.h.a) { rv = 1; } else if (v > hdr.h.a) { rv = 2; } "
                      "else { rv = 3; }")
    assert_refused(path, "tofino: output word sources of RegisterAction ra: 3 > 1 (1, 2, 3)", "RegisterAction")


@pytest.mark.parametrize("body, fits", [
    ("if (v == 0) { rv = 1; } else if (hdr.h.a > v) { rv = 2; } v = v + 1;", True),  # bf-p4c p4c-1548
    ("if (hdr.h.a > 2) { rv = 2; } else { rv = v; }", True),  # bf-p4c p4c-5004
    ("if (hdr.h.a > 2) { rv = hdr.h.b; } else { rv = v; }", False),  # both output directly
    ("v = v + 1; if (hdr.h.a > 2) { rv = 2; } else { rv = v; }", False),  # the low ALUs' result
    ("bit<16> t = hdr.h.b; if (hdr.h.a > 2) { rv = 2; } else { rv = v; }", False),  # a local
])
def test_two_output_sources_through_the_high_alus(tmp_path, body, fits):
    """A one-value register leaves its high ALU pair idle: bf-p4c computes the output word there, one
    source under each high ALU's predicate (stateful_alu.cpp outputAluHi; bf-p4c p4-tests
    internal/stf/p4c-1548.p4 and p4c-5004.p4 compile). Not when a register field and a PHV operand
    would both be output directly, nor the register's new value, nor with a local to hold."""
    path = ra_program(tmp_path, "bit<16>", body)
    if fits:
        assert check(load_program(path)).salus == 1
    else:
        assert refusal(path).message.startswith("tofino: output word sources of RegisterAction ra: 2 > 1")


def test_a_field_assigned_itself_is_no_update(tmp_path):
    """``value.f = value.f`` leaves the field as it is (SwitchML's rdma_receiver.p4 writes its next
    sequence number back unchanged in the error branch, next to a wrap to 0 and an increment), so it
    is not a third update expression; a third real one still is."""
    body = "if (hdr.h.a == v) { if (v == 255) { v = 0; } else { v = v + 1; } } else { v = v; } rv = 0;"
    assert check(load_program(ra_program(tmp_path, "bit<16>", body))).salus == 1
    path = ra_program(tmp_path, "bit<16>", body.replace("v = v;", "v = hdr.h.b;"))
    assert refusal(path).message.startswith(
        "tofino: update expressions of register field v in RegisterAction ra: 3 > 2")


def test_a_comparison_returned_and_a_copy_of_the_cell(tmp_path):
    """``rv = (v == 0)`` is ``if (v == 0) rv = 1`` (stateful_alu.cpp: "output a boolean condition
    directly"; bf-p4c p4-tests internal/p4c-2479.p4), and a local copy of a pair cell reads the
    register's fields (a Princeton program in bf-p4c p4-tests internal/customer, p4c-1981.p4)."""
    path = ra_program(tmp_path, "bit<16>", "rv = (bit<16>)(bit<1>)(v == 0 || (v > hdr.h.a && v < hdr.h.b));")
    assert refusal(path).message.startswith("tofino: comparisons in RegisterAction ra: 3 > 2")  # still counted
    ras = """Register<bit<8>, bit<16>>(16) seen;
    RegisterAction<bit<8>, bit<16>, bool>(seen) first = {
        void apply(inout bit<8> v, out bool rv) { rv = (v == 0); v = 1; }
    };
    Register<pair_t, bit<16>>(16) slots;
    RegisterAction<pair_t, bit<16>, bit<32>>(slots) claim = {
        void apply(inout pair_t value, out bit<32> rv) {
            rv = 0;
            pair_t old;
            old = value;
            bool stale = (bit<32>)hdr.h.a - old.stamp > 1000;
            if (stale || old.key == 0) { value.key = (bit<32>)hdr.h.b; value.stamp = (bit<32>)hdr.h.a; rv = 1; }
        }
    };"""
    body = "if (first.execute(hdr.h.a)) { md.x = (bit<16>)claim.execute(hdr.h.b); }"
    path = program(tmp_path, decls="struct pair_t { bit<32> key; bit<32> stamp; }", locals=ras, body=body)
    assert check(load_program(path)).salus == 2


@pytest.mark.parametrize("decls, fits", [("enum level_t { IDLE, LOW, HIGH }", True),
                                         ("enum bit<8> level_t { IDLE = 1, LOW = 2, HIGH = 3 }", False)])
def test_a_plain_enum_output_is_the_predicate(tmp_path, decls, fits):
    """A RegisterAction returning a plain enum may return a different member in each branch: bf-p4c
    encodes them in the predicate output (stateful_alu.cpp outputEnumAsPredicate; bf-p4c p4-tests
    stf/sful_enum_out1.p4 compiles). A serializable enum's members are constants, 3 sources here."""
    ras = """Register<bit<16>, bit<16>>(16) r;
    RegisterAction<bit<16>, bit<16>, level_t>(r) ra = {
        void apply(inout bit<16> v, out level_t level) {
            if (v > hdr.h.a) { level = level_t.HIGH; } else if (v > 10) { level = level_t.LOW; }
            else { level = level_t.IDLE; }
            v = v + 1;
        }
    };"""
    body = "if (ra.execute(hdr.h.b) == level_t.HIGH) { hdr.h.a = 0; }"
    path = program(tmp_path, decls=decls, locals=ras, body=body)
    if fits:
        assert check(load_program(path)).salus == 1
    else:
        assert_refused(path, "tofino: output word sources of RegisterAction ra: 3 > 1 "
                       "(level_t.HIGH, level_t.LOW, level_t.IDLE)", "RegisterAction")


def test_common_stateful_shapes_fit(tmp_path):
    """What published Tofino programs run in one SALU (SwitchML's pair sums, a saturating counter,
    a two-condition threshold, a swap) passes the shape rules."""
    decls = "struct pair_t { bit<32> first; bit<32> second; }"
    ras = """Register<pair_t, bit<16>>(16) sums;
    RegisterAction<pair_t, bit<16>, bit<32>>(sums) sum_read = {
        void apply(inout pair_t value, out bit<32> rv) {
            value.first = value.first + (bit<32>)hdr.h.a; value.second = value.second + (bit<32>)hdr.h.b;
            rv = value.second;
        }
    };
    RegisterAction<pair_t, bit<16>, bit<32>>(sums) write_read = {
        void apply(inout pair_t value, out bit<32> rv) {
            value.first = (bit<32>)hdr.h.a; value.second = (bit<32>)hdr.h.b; rv = value.first;
        }
    };
    Register<bit<16>, bit<16>>(16) counts;
    RegisterAction<bit<16>, bit<16>, bit<16>>(counts) saturate = {
        void apply(inout bit<16> v, out bit<16> rv) { rv = v; v = v |+| 1; }
    };
    RegisterAction<bit<16>, bit<16>, bit<16>>(counts) threshold = {
        void apply(inout bit<16> v, out bit<16> rv) {
            rv = 0;
            if (v > hdr.h.a && v - hdr.h.b < 100) { v = 0; rv = 1; } else { v = v + hdr.h.b; }
        }
    };
    RegisterAction<bit<16>, bit<16>, bit<16>>(counts) swap = {
        void apply(inout bit<16> v, out bit<16> rv) { rv = v; v = hdr.h.a; }
    };"""
    body = """if (hdr.h.a == 0) { md.x = (bit<16>)sum_read.execute(hdr.h.b); }
        else { md.x = (bit<16>)write_read.execute(hdr.h.b); }
        if (hdr.h.b == 0) { hdr.h.a = saturate.execute(md.x); } else if (hdr.h.b == 1) { hdr.h.a = swap.execute(md.x); }
        else { hdr.h.a = threshold.execute(md.x); }"""
    report = check(load_program(program(tmp_path, decls=decls, locals=ras, body=body)))
    assert report.salus == 2 and report.stages["ingress"] == 2


# --------------------------------------------------------------------------- PHV
def test_phv_over_4096_normal_bits(tmp_path):
    # 4,096 bits of normal PHV containers on Tofino 1: bf-asm/tofino/phv.h (64x32 + 96x16 + 64x8)
    path = program(tmp_path, locals="bit<2048> wide0; bit<2048> wide1;", body="wide0 = wide1;")
    err = refusal(path)
    # wide0 + wide1, ingress_port (9 of ig_intr_md's 64 parsed bits), ucast_egress_port (9); h (32 bits)
    # and the rest of ig_intr_md only pass through (tag-along); egress: eg_intr_md and h, tag-along
    assert err.message == ("tofino: PHV normal bits: 4114 > 4096 (ingress: 4114 normal + 87 tag-along, "
                           "egress: 0 normal + 248 tag-along)")


@pytest.mark.parametrize("also, fits", [("", True), ("hdr.y.setValid();", False)])
def test_headers_no_parser_path_extracts_together(tmp_path, also, fits):
    """Two wide headers on different parser paths (SwitchML's p4app-switchML dev_root/p4 parses its
    RDMA and UDP forms, or ARP and IPv4, on different paths) are never live at once: the widest
    path counts, 2,200 bits, not 4,400. A header the control may make valid counts on every path."""
    parser = "transition select(hdr.h.a) { 1: px; default: py; } } state px { pkt.extract(hdr.x); " \
             "transition accept; } state py { pkt.extract(hdr.y);"
    path = program(tmp_path, parser=parser, body=f"hdr.x.p = hdr.x.q; hdr.y.p = hdr.y.q; {also}")
    path.write_text(path.read_text().replace(
        "struct H { h_t h; }", "header w_t { bit<1100> p; bit<1100> q; }\nstruct H { h_t h; w_t x; w_t y; }"))
    if fits:
        assert check(load_program(path)).phv["ingress"].normal == 18 + 2200
    else:
        assert refusal(path).message.startswith("tofino: PHV normal bits: 4418 > 4096")


def test_a_varbit_header_counts_its_longest(tmp_path):
    """A parsed varbit options header (bf-p4c's p4-tests stf/varbit_constant.p4, compile_only/
    simple_l3_acl_varbit_middle.p4 and p4c testgen's tna_varbit_extract.p4 compile) is counted at its
    maximum width, not refused: only parsed and deparsed, its 320 bits may be tag-along."""
    path = program(tmp_path, parser="pkt.extract(hdr.opt, (bit<32>)hdr.h.a);")
    path.write_text(path.read_text().replace(
        "struct H { h_t h; }", "header opt_t { varbit<320> data; }\nstruct H { h_t h; opt_t opt; }"))
    phv = check(load_program(path)).phv
    assert (phv["ingress"].normal, phv["ingress"].tagalong) == (18, 87 + 320)  # 87 as in the test above
    assert phv["egress"].tagalong == 248  # the egress parser does not extract opt


# --------------------------------------------------------------------------- the aggregation program
def test_the_tna_aggregation_program_fits_with_its_passes_apart():
    """p4src/tofino/ina_tna.p4: 38 stateful ALUs of 48, within 12 stages, and its passes as the
    report gives them (p4src/tofino/README.md's stage plan): the aggregation CHECK path uses the
    four round registers; LO every lane and round_flags; HI those and the count-down; harvests
    the lanes only."""
    report = check(load_program(ROOT / "p4src" / "tofino" / "ina_tna.p4"))
    assert report.salus == 38 and report.stages["ingress"] <= 12 and report.tables <= 192
    assert report.phv_normal <= 4096
    by_last = {p.conditions[-1]: p for p in report.passes["ingress"]}
    assert sum(by_last["!(ig_prsr_md.parser_err != 0)"].salus) == 4
    assert sum(by_last["(hdr.bridge.pass == PASS_LO)"].salus) == 33
    assert sum(by_last["!(hdr.bridge.pass == PASS_LO)"].salus) == 34
    assert sum(by_last["(hdr.bridge.pass == PASS_HARVEST_LO)"].salus) == 32
    assert all(p.chain <= 12 and p.stages <= 12 for p in report.passes["ingress"])
    assert "8 paths (passes) through ingress" in render(report)


# --------------------------------------------------------------------------- the program before issue 59
@pytest.fixture(scope="module")
def ina_tna():
    return load_program(INA_TNA)


def test_the_program_before_issue59_needs_70_stateful_alus(ina_tna):
    # 64 lanes + 6 other registers, one SALU each; 48 per pipe
    with pytest.raises(P4Error) as info:
        check(ina_tna)
    assert info.value.message == ("tofino: stateful ALUs: 70 > 48 (one per register with RegisterActions; "
                                  "TnaEgress.lane_42.sums is number 49)")
    assert Path(info.value.loc.file).name == "lane.p4"


def _register_action(prog, name: str):
    found = [d for d in _instances(prog.program) if d.name == name]
    assert found, name
    return found[0]


def _instances(node):
    from p4target.frontend import ast

    if isinstance(node, ast.Instantiation):
        yield node
    for c in ast.children(node):
        yield from _instances(c)


@pytest.mark.parametrize("name, message", [
    ("check_seq", "tofino: output word sources of RegisterAction check_seq: 3 > 1 "
                  "(ROUND_SAME, ROUND_STALE, ROUND_NEW)"),
    ("add_value", "tofino: cast width in RegisterAction add_value: 34 > 32 ((int<34>)(int<32>)stored.sum)"),
])
def test_register_actions_before_issue59_that_one_salu_cannot_run(ina_tna, name, message):
    with pytest.raises(P4Error) as info:
        check_register_action(_register_action(ina_tna, name))
    assert info.value.message == message


def test_loading_a_switch_runs_the_check_unless_told_not_to(tmp_path, monkeypatch):
    locals_, body = chain(13)
    prog = load_program(program(tmp_path, locals=locals_, body=body))
    with pytest.raises(P4Error, match="ingress stages: 13 > 12"):
        TnaSwitch(prog)
    assert TnaSwitch(prog, check_fit=False).process(1, bytes(4))
    monkeypatch.setenv("P4TARGET_TOFINO_FIT", "0")
    assert TnaSwitch(prog).process(1, bytes(4))
