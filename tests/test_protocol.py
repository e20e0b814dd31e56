"""worker/protocol.py reads p4src/protocol.p4 (through the generated worker/wire_facts.py, which is current
and agrees with the frontend); lanes.p4 is current; ina.p4's INA_VALUES guard."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from p4target.executor.switch import Switch
from p4target.frontend import P4Error, load_declarations
from worker import gen_wire, protocol
from worker.scapy_ina import INA, InaValues, ina_values

P4SRC = Path(__file__).resolve().parents[1] / "p4src"


def test_header_layout():
    P = protocol.load()
    assert P.header_bytes == 16
    assert sum(w for _, w, _ in P.fields) == 128
    assert [n for n, _, _ in P.fields][:3] == ["msg_type", "flags", "job_id"]
    assert dict((n, s) for n, _, s in P.fields)["exponent"] is True
    assert (P.values, P.packet_bytes) == (256, 16 + 1024)  # the default: the most a packet carries
    assert protocol.load(values=64).packet_bytes == 16 + 256
    assert protocol.load(udp_port=5000).INA_UDP_PORT == 5000
    assert P.INA_UDP_PORT == 48864 and P.MSG_DATA != P.MSG_RESULT


@pytest.mark.parametrize("V", [1, 64, 256])
def test_scapy_dissects_packed_payload(V):
    P = protocol.load(values=V)
    rng = np.random.default_rng(V)
    fields = {}
    for name, width, signed in P.fields:  # a distinct, in-range value per field, extremes included
        lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
        fields[name] = int(rng.choice([lo, hi, (lo + hi) // 3]))
    fields["exponent"] = -7
    values = rng.integers(-(1 << 31), (1 << 31) - 1, size=V, dtype=np.int32)
    payload = P.pack(values, **fields)
    assert len(payload) == P.packet_bytes
    pkt = INA(payload)
    assert {n: getattr(pkt, n) for n, _, _ in P.fields} == fields
    assert len(pkt[InaValues].values) == V
    np.testing.assert_array_equal(ina_values(pkt), values)
    assert bytes(INA(**fields) / InaValues(values=[int(x) for x in values])) == payload
    head, back = P.unpack(payload)
    assert head == fields
    np.testing.assert_array_equal(back, values)
    assert back.dtype == np.int32


def test_pack_defaults_and_unpack_extremes():
    P = protocol.load(values=4)
    head, values = P.unpack(P.pack())
    assert set(head.values()) == {0} and values.tolist() == [0, 0, 0, 0]
    ext = np.array([-(1 << 31), (1 << 31) - 1, -1, 0], dtype=np.int32)
    head, values = P.unpack(P.pack(ext, exponent=-128, seq=(1 << 32) - 1) + b"trailing")
    assert (head["exponent"], head["seq"]) == (-128, (1 << 32) - 1)
    assert values.tolist() == ext.tolist()


@pytest.mark.parametrize("fields", [
    {"exponent": 128}, {"exponent": -129}, {"msg_type": 256}, {"msg_type": -1}, {"set": 2},
    {"reserved": 128}, {"seq": 1 << 32}, {"job_id": 1 << 16}, {"no_such_field": 1},
])
def test_pack_rejects_bad_fields(fields):
    with pytest.raises(ValueError):
        protocol.load(values=4).pack(**fields)


@pytest.mark.parametrize("values", [
    np.zeros(3, dtype=np.int32), np.zeros(5, dtype=np.int32), np.zeros((2, 2), dtype=np.int32),
    np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.float32), [0, 0, 0, 0],
])
def test_pack_rejects_bad_values(values):
    with pytest.raises(ValueError):
        protocol.load(values=4).pack(values)


def test_unpack_rejects_short_payload():
    P = protocol.load(values=4)
    with pytest.raises(ValueError):
        P.unpack(P.pack()[:-1])


def test_wire_facts_are_current():
    """worker/wire_facts.py is what worker/gen_wire.py writes from protocol.p4 now (``make wire``)."""
    assert (Path(protocol.__file__).with_name("wire_facts.py")).read_text() == gen_wire.render()


@pytest.mark.parametrize(("values", "port"), [(None, None), (64, None), (1, 5000), (256, 48864), (None, 0),
                                              (7, 65535)])
def test_generated_protocol_matches_the_frontend(values, port):
    """load() gives what the frontend reads from protocol.p4 with the same -D: every constant, the header."""
    defines = {} if values is None else {"INA_VALUES": str(values)}
    if port is not None:
        defines["INA_UDP_PORT_NUMBER"] = str(port)
    decls = load_declarations(protocol.PROTOCOL_P4, defines)
    P = protocol.load(values, port)
    assert P.constants == decls.constants
    assert P.fields == gen_wire.header_fields(decls.types)
    assert (P.values, P.INA_UDP_PORT) == (values or 256, 48864 if port is None else port)


@pytest.mark.parametrize("values", [0, 257, -1])
def test_values_out_of_range_are_refused_as_the_frontend_refuses_them(values):
    with pytest.raises(P4Error, match="INA_VALUES must be between 1 and 256"):
        load_declarations(protocol.PROTOCOL_P4, {"INA_VALUES": str(values)})
    with pytest.raises(ValueError, match=f"INA_VALUES must be between 1 and 256, not {values}"):
        protocol.load(values)


@pytest.mark.parametrize(("values", "port"), [(True, None), ("64", None), (2.5, None), (None, 1 << 16),
                                              (None, -1), (None, "48864")])
def test_bad_knobs_are_a_clear_error(values, port):
    """Not an int in range (the frontend would wrap a port of 70000 into bit<16>): refused, naming the knob."""
    knob = "INA_VALUES" if port is None else "INA_UDP_PORT_NUMBER"
    with pytest.raises(ValueError, match=f"{knob} must be between"):
        protocol.load(values, port)


def test_default_values():
    assert protocol.default_values() == 256
    assert protocol.default_values(P4SRC / "tofino" / "values.p4") == 64  # another file: read by the frontend


def test_lanes_p4_is_current():
    spec = importlib.util.spec_from_file_location("gen_lanes", P4SRC / "gen_lanes.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (P4SRC / "lanes.p4").read_text() == gen.render()


@pytest.mark.parametrize("values", ["0", "300"])
def test_ina_values_out_of_range_is_an_error(values):
    with pytest.raises(P4Error, match="INA_VALUES must be between 1 and 256"):
        Switch.from_file(P4SRC / "ina.p4", {"INA_VALUES": values})
