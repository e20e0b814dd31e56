"""P4Info of v1model's externs as p4c's P4RuntimeSerializer writes it: meters, direct
meters (table links both ways), digests (the struct's name, a type_info entry) and
value sets (bit<W>, struct with @match, @id)."""

from __future__ import annotations

from p4.config.v1 import p4info_pb2

from p4target.frontend import load_program
from p4target.p4info import DIGEST, DIRECT_METER, METER, VALUE_SET, build_p4info, jenkins_hash

from .conftest import P4_DIR

INFO = build_p4info(load_program(P4_DIR / "runtime_externs.p4"))
MatchField = p4info_pb2.MatchField


def hashed(prefix: int, name: str) -> int:
    return (prefix << 24) | (jenkins_hash(name) & 0xFFFFFF)


def test_meters() -> None:
    (m,) = INFO.meters
    assert (m.preamble.id, m.preamble.name, m.preamble.alias) == (hashed(METER, "I.mt"), "I.mt", "mt")
    assert (m.spec.unit, m.size) == (p4info_pb2.MeterSpec.PACKETS, 4)


def test_direct_meter_and_its_table() -> None:
    (dm,) = INFO.direct_meters
    (table,) = [t for t in INFO.tables if t.preamble.name == "I.t_fwd"]
    assert dm.preamble.id == hashed(DIRECT_METER, "I.dm") and dm.preamble.name == "I.dm"
    assert dm.direct_table_id == table.preamble.id
    assert list(table.direct_resource_ids) == [dm.preamble.id]
    assert dm.spec.unit == p4info_pb2.MeterSpec.PACKETS


def test_digest_is_named_after_its_struct() -> None:
    (d,) = INFO.digests
    assert (d.preamble.id, d.preamble.name, d.preamble.alias) == (hashed(DIGEST, "learn_t"), "learn_t", "learn_t")
    assert d.type_spec.struct.name == "learn_t"
    members = INFO.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("a", 8), ("t", 16)]


def test_value_sets() -> None:
    types, pairs = INFO.value_sets
    assert (types.preamble.id, types.preamble.name, types.size) == (hashed(VALUE_SET, "P.types"), "P.types", 2)
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in types.match] == [(1, "", 16, MatchField.EXACT)]
    assert [(f.id, f.name, f.bitwidth, f.match_type) for f in pairs.match] == [
        (1, "op", 8, MatchField.EXACT), (2, "a", 8, MatchField.TERNARY)]


def test_value_set_id_annotation(tmp_path) -> None:
    src = (P4_DIR / "runtime_externs.p4").read_text().replace("value_set<bit<16>>(2) types;",
                                                              "@id(0x77) value_set<bit<16>>(2) types;")
    path = tmp_path / "vs.p4"
    path.write_text(src)
    assert build_p4info(load_program(path)).value_sets[0].preamble.id == 0x03000077
