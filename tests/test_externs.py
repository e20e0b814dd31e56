"""v1model externs on the built-in target: packet paths, meters, digests, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from p4target.executor.externs import MeterCell
from p4target.executor.switch import MAX_PASSES, Switch
from p4target.frontend import P4Error, load_program

STF = Path(__file__).parent / "p4" / "stf"

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct headers_t { h_t h; }
struct meta_t { @field_list(1) bit<8> x; }
parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t m) { apply { } }
control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    INGRESS_LOCALS
    apply { sm.egress_spec = 1; INGRESS }
}
control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) { apply { EGRESS } }
control CC(inout headers_t hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers_t hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def program(tmp_path: Path, ingress: str = "", egress: str = "", locals_: str = "") -> Path:
    path = tmp_path / "prog.p4"
    path.write_text(TEMPLATE.replace("INGRESS_LOCALS", locals_).replace("INGRESS", ingress)
                    .replace("EGRESS", egress))
    return path


def test_recirculation_loop_is_bounded(tmp_path: Path) -> None:
    sw = Switch.from_file(program(tmp_path, egress="recirculate_preserving_field_list(1);"))
    assert sw.process(0, b"\x01\x02") == []
    assert sw.stats["loop_drops"] == 1
    assert sw.stats["internal_errors"] == 0


def test_resubmit_loop_is_bounded(tmp_path: Path) -> None:
    sw = Switch.from_file(program(tmp_path, ingress="m.x = m.x + 1; resubmit_preserving_field_list(1);"))
    assert sw.process(0, b"\x01\x02") == []
    assert sw.stats["loop_drops"] == 1
    assert MAX_PASSES > 2


def test_failed_assert_drops_and_counts(tmp_path: Path) -> None:
    sw = Switch.from_file(program(tmp_path, ingress="assert(hdr.h.a == 1);"))
    assert sw.process(0, b"\x01\x02") == [(1, b"\x01\x02")]
    assert sw.process(0, b"\x02\x02") == []
    assert sw.stats["assert_failures"] == 1
    assert sw.stats["internal_errors"] == 0


def test_clone_session_replicas_set_egress_rid(tmp_path: Path) -> None:
    sw = Switch.from_file(program(tmp_path, ingress="clone(CloneType.I2E, 7);",
                                  egress="hdr.h.b = (bit<8>)sm.egress_rid;"))
    sw.set_clone_session(7, [(3, 10), (4, 11)], packet_length_bytes=1)
    out = sw.process(0, b"\x01\x02")
    assert sorted(out) == [(1, b"\x01\x00"), (3, b"\x01"), (4, b"\x01")]  # clones truncated to 1 byte


def test_digest_is_queued(tmp_path: Path) -> None:
    locals_ = "meta_t d;"
    sw = Switch.from_file(program(tmp_path, locals_=locals_, ingress="d.x = hdr.h.a; digest(5, d);"))
    sw.process(0, b"\x09\x02")
    assert sw.hooks.digests == [("meta_t", 5, (9,))]


def test_meter_colours_with_a_fake_clock(tmp_path: Path) -> None:
    sw = Switch.from_file(program(
        tmp_path, locals_="meter(2, MeterType.packets) mt;",
        ingress="mt.execute_meter((bit<32>)0, hdr.h.b);"))
    now = [0.0]
    sw.set_clock(lambda: now[0])
    assert sw.process(0, b"\x01\xff")[0].data == b"\x01\x00"  # unconfigured: GREEN
    # 1 packet/s committed with burst 1, 2 packets/s peak with burst 2
    sw.meters["I.mt"].cells[0].configure(1, 1, 2, 2)
    colours = [sw.process(0, b"\x01\xff")[0].data[1] for _ in range(3)]
    assert colours == [0, 1, 2]  # green (both buckets), yellow (committed empty), red (peak empty)
    now[0] = 1.0  # one second refills 1 committed and 2 peak tokens
    assert sw.process(0, b"\x01\xff")[0].data[1] == 0


def test_meter_cell_peak_checked_first() -> None:
    cell = MeterCell()
    cell.configure(cir=0, cburst=0, pir=0, pburst=1)
    assert cell.execute(0, 1) == 1  # peak has the token, committed has none: YELLOW
    assert cell.execute(0, 1) == 2
    assert cell.config() == (0, 0, 0, 1)


@pytest.mark.parametrize("stmt, what, why", [
    ("clone3(CloneType.I2E, 1, {hdr.h.a});", "clone3", "unknown extern function"),  # as p4c refuses them
    ("resubmit({hdr.h.a});", "resubmit", "unknown extern function"),
    ("bit<8> z; hash(z, HashAlgorithm.random, 8w0, {hdr.h.a}, 8w4);", "random", "not supported by the built-in target"),
])
def test_refused_cleanly(tmp_path: Path, stmt: str, what: str, why: str) -> None:
    with pytest.raises(P4Error, match=why) as err:
        load_program(program(tmp_path, ingress=stmt))
    assert what in str(err.value)


@pytest.mark.parametrize("decl, select, message", [
    ("value_set<bool>(4) vs;", "hdr.h.a", "value_set<bool> is not supported by the built-in target"),
    ("value_set<bit<8>>(4) vs;", "hdr.h.a, hdr.h.b", "does not match the select keys"),
    ("value_set<bit<16>>(4) vs;", "hdr.h.a", "does not match the select keys"),
])
def test_value_set_misuse_refused_cleanly(tmp_path: Path, decl: str, select: str, message: str) -> None:
    path = tmp_path / "vs.p4"
    state = (f"{decl} state start {{ pk.extract(hdr.h); "
             f"transition select({select}) {{ vs: accept; default: accept; }} }}")
    path.write_text(TEMPLATE.replace("state start { pk.extract(hdr.h); transition accept; }", state)
                    .replace("INGRESS_LOCALS", "").replace("INGRESS", "").replace("EGRESS", ""))
    with pytest.raises(P4Error, match=message):
        load_program(path)


def test_stf_programs_pass() -> None:
    from p4target.stf import run_stf_file

    for name in ("clone", "resubmit_recirculate", "meter_misc"):
        result = run_stf_file(STF / f"{name}.p4")
        assert result.passed, result.failures
