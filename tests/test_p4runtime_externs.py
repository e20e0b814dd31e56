"""P4Runtime entities of v1model's externs, through a real gRPC channel, against
tests/p4/runtime_externs.p4: clone sessions, meters, direct meters, value sets, digests.

The packet is t(16) op a b c r (one byte each); see the program for what each op does.
Uses the server fixtures of tests/test_p4runtime.py.
"""

from __future__ import annotations

import queue
import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.runtime.device_config import build_device_config

from . import test_p4runtime
from .conftest import P4_DIR
from .test_p4runtime import Client, Switch, p4_errors

switch = test_p4runtime.switch  # the same server fixture: a fresh server per test
PROGRAM = P4_DIR / "runtime_externs.p4"
P4INFO = build_p4info(load_program(PROGRAM))
CONFIG = build_device_config(PROGRAM)
TABLE = {t.preamble.alias: t.preamble.id for t in P4INFO.tables}
ACTION = {a.preamble.alias: a.preamble.id for a in P4INFO.actions}
METER = P4INFO.meters[0].preamble.id
VALUE_SET = {v.preamble.alias: v.preamble.id for v in P4INFO.value_sets}
DIGEST = P4INFO.digests[0].preamble.id
U = p4runtime_pb2.Update
Code = grpc.StatusCode
TIMEOUT = 5.0


def pkt(op: int, a: int = 0, t: int = 0x0800, b: int = 0, c: int = 0) -> bytes:
    return t.to_bytes(2, "big") + bytes([op, a, b, c, 0])


@pytest.fixture
def ctl(switch: Switch) -> Client:
    client = switch.connect()
    assert client.arbitrate(1).arbitration.status.code == code_pb2.OK
    client.set_pipeline(p4info=P4INFO, device_config=CONFIG)
    return client


def update(kind: int, **entity) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=kind, entity=p4runtime_pb2.Entity(**entity))


def codes(client: Client, *updates: p4runtime_pb2.Update) -> list[str]:
    try:
        client.write(*updates)
    except grpc.RpcError as err:
        return [code_pb2.Code.Name(e.canonical_code) for e in p4_errors(err)]
    return ["OK"] * len(updates)


def read(client: Client, **entity) -> list[p4runtime_pb2.Entity]:
    request = p4runtime_pb2.ReadRequest(device_id=0, entities=[p4runtime_pb2.Entity(**entity)])
    return [e for r in client.stub.Read(request, timeout=TIMEOUT) for e in r.entities]


def read_code(client: Client, **entity) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        read(client, **entity)
    return info.value.code()


# --- clone sessions ---------------------------------------------------------------------------


def session(sid: int, *ports: int, cos: int = 0, length: int = 0) -> dict:
    c = p4runtime_pb2.CloneSessionEntry(session_id=sid, class_of_service=cos, packet_length_bytes=length)
    for port in ports:
        c.replicas.add(egress_port=port, instance=1)
    return {"packet_replication_engine_entry": {"clone_session_entry": c}}


def test_clone_session_insert_modify_delete_read(switch: Switch, ctl: Client) -> None:
    assert switch.send(1, pkt(5)) == {1: [pkt(5)]}  # no session 5 yet: no clone
    ctl.write(update(U.INSERT, **session(5, 2, length=3)))
    assert switch.send(1, pkt(5)) == {1: [pkt(5)], 2: [pkt(5)[:3]]}
    (got,) = read(ctl, **session(5))
    c = got.packet_replication_engine_entry.clone_session_entry
    assert (c.session_id, [(r.egress_port, r.instance) for r in c.replicas], c.packet_length_bytes) == (5, [(2, 1)], 3)

    ctl.write(update(U.MODIFY, **session(5, 3)))
    assert switch.send(1, pkt(5)) == {1: [pkt(5)], 3: [pkt(5)]}
    assert len(read(ctl, **session(0))) == 1  # session 0 reads them all
    ctl.write(update(U.DELETE, **session(5)))
    assert switch.send(1, pkt(5)) == {1: [pkt(5)]}
    assert read(ctl, **session(0)) == []


def test_clone_session_errors(ctl: Client) -> None:
    ctl.write(update(U.INSERT, **session(5, 2)))
    bad_replicas = session(6, 2)
    bad_replicas["packet_replication_engine_entry"]["clone_session_entry"].replicas.add(egress_port=2, instance=1)
    assert codes(ctl, update(U.INSERT, **session(5, 2)), update(U.MODIFY, **session(9, 2)),
                 update(U.DELETE, **session(9)), update(U.INSERT, **session(0, 2)),
                 update(U.INSERT, **session(7, 2, cos=1)), update(U.INSERT, **bad_replicas),
                 update(U.INSERT, **session(8, 600))) == [
        "ALREADY_EXISTS", "NOT_FOUND", "NOT_FOUND", "OUT_OF_RANGE", "UNIMPLEMENTED", "INVALID_ARGUMENT",
        "OUT_OF_RANGE"]
    assert read_code(ctl, **session(9)) == Code.NOT_FOUND


# --- meters -----------------------------------------------------------------------------------


def meter(index: int | None = None, meter_id: int = METER, **config: int) -> dict:
    m = p4runtime_pb2.MeterEntry(meter_id=meter_id)
    if index is not None:
        m.index.index = index
    if config:
        m.config.CopyFrom(p4runtime_pb2.MeterConfig(**config))
    return {"meter_entry": m}


ONE_PER_SECOND = {"cir": 1, "cburst": 1, "pir": 1, "pburst": 1}


def test_meter_entries_colour_packets(switch: Switch, ctl: Client) -> None:
    def colour(index: int) -> int:
        return switch.send(1, pkt(3, a=index))[1][0][5]

    assert [colour(0), colour(0)] == [0, 0]  # unconfigured: GREEN
    ctl.write(update(U.MODIFY, **meter(0, **ONE_PER_SECOND)))
    assert [colour(0), colour(0)] == [0, 2]  # a burst of one packet, then RED
    assert colour(1) == 0  # other cells untouched
    (got,) = read(ctl, **meter(0))
    assert got.meter_entry.config == p4runtime_pb2.MeterConfig(**ONE_PER_SECOND)
    assert not read(ctl, **meter(1))[0].meter_entry.HasField("config")  # default config: unset
    assert len(read(ctl, **meter())) == 4

    ctl.write(update(U.MODIFY, **meter(0)))  # no config: back to the default
    assert [colour(0), colour(0)] == [0, 0]
    ctl.write(update(U.MODIFY, **meter(None, **ONE_PER_SECOND)))  # no index: every cell
    assert all(e.meter_entry.HasField("config") for e in read(ctl, **meter()))


def test_meter_entry_errors(ctl: Client) -> None:
    assert codes(ctl, update(U.INSERT, **meter(0, **ONE_PER_SECOND)), update(U.MODIFY, **meter(4, **ONE_PER_SECOND)),
                 update(U.MODIFY, **meter(0, meter_id=0x13000999, **ONE_PER_SECOND)),
                 update(U.MODIFY, **meter(0, cir=5, cburst=1, pir=1, pburst=1)),
                 update(U.MODIFY, **meter(0, cir=-1, cburst=1, pir=1, pburst=1)),
                 update(U.MODIFY, **meter(0, eburst=1, **ONE_PER_SECOND))) == [
        "INVALID_ARGUMENT", "OUT_OF_RANGE", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
        "UNIMPLEMENTED"]
    assert read_code(ctl, **meter(4)) == Code.OUT_OF_RANGE
    assert not read(ctl, **meter(0))[0].meter_entry.HasField("config")  # nothing was applied


# --- direct meters ----------------------------------------------------------------------------


def fwd_entry(a: int, port: int = 2) -> p4runtime_pb2.TableEntry:
    te = p4runtime_pb2.TableEntry(table_id=TABLE["t_fwd"])
    te.match.add(field_id=1, exact={"value": bytes([a])})
    te.action.action.action_id = ACTION["fwd"]
    te.action.action.params.add(param_id=1, value=bytes([port]))
    return te


def direct(a: int | None, **config: int) -> dict:
    te = p4runtime_pb2.TableEntry(table_id=TABLE["t_fwd"])
    if a is not None:
        te.match.add(field_id=1, exact={"value": bytes([a])})
    m = p4runtime_pb2.DirectMeterEntry(table_entry=te)
    if config:
        m.config.CopyFrom(p4runtime_pb2.MeterConfig(**config))
    return {"direct_meter_entry": m}


def test_direct_meter_entries(switch: Switch, ctl: Client) -> None:
    ctl.write(update(U.INSERT, table_entry=fwd_entry(1)), update(U.INSERT, table_entry=fwd_entry(2)))

    def colour(a: int) -> int:
        return switch.send(1, pkt(2, a=a, b=9))[2][0][4]

    assert [colour(1), colour(1)] == [0, 0]
    ctl.write(update(U.MODIFY, **direct(1, **ONE_PER_SECOND)))
    assert [colour(1), colour(1), colour(2)] == [0, 2, 0]
    (got,) = read(ctl, **direct(1))
    assert got.direct_meter_entry.config == p4runtime_pb2.MeterConfig(**ONE_PER_SECOND)
    assert got.direct_meter_entry.table_entry.match == fwd_entry(1).match
    assert len(read(ctl, **direct(None))) == 2

    with_config = fwd_entry(3)
    with_config.meter_config.CopyFrom(p4runtime_pb2.MeterConfig(**ONE_PER_SECOND))
    ctl.write(update(U.INSERT, table_entry=with_config))  # TableEntry.meter_config
    assert [colour(3), colour(3)] == [0, 2]

    assert codes(ctl, update(U.MODIFY, **direct(9, **ONE_PER_SECOND)),
                 update(U.INSERT, **direct(1, **ONE_PER_SECOND))) == ["NOT_FOUND", "INVALID_ARGUMENT"]
    assert read_code(ctl, **direct(9)) == Code.NOT_FOUND


def test_table_read_returns_meter_config_when_asked(ctl: Client) -> None:
    """A TableEntry read with ``meter_config`` set returns each entry's direct meter config (unset while an
    entry's meter has the default config); without it, none."""
    configured = fwd_entry(1)
    configured.meter_config.CopyFrom(p4runtime_pb2.MeterConfig(**ONE_PER_SECOND))
    ctl.write(update(U.INSERT, table_entry=configured), update(U.INSERT, table_entry=fwd_entry(2)))
    asking = p4runtime_pb2.TableEntry(table_id=TABLE["t_fwd"], meter_config=p4runtime_pb2.MeterConfig())
    got = [e.table_entry for e in read(ctl, table_entry=asking)]
    assert [e.match for e in got] == [fwd_entry(1).match, fwd_entry(2).match]
    assert got[0].meter_config == p4runtime_pb2.MeterConfig(**ONE_PER_SECOND)
    assert not got[1].HasField("meter_config")  # the default config
    plain = read(ctl, table_entry=p4runtime_pb2.TableEntry(table_id=TABLE["t_fwd"]))
    assert [e.table_entry.HasField("meter_config") for e in plain] == [False, False]
    ctl.write(update(U.MODIFY, **direct(2, cir=5, cburst=2, pir=10, pburst=4)))
    everything = p4runtime_pb2.TableEntry(meter_config=p4runtime_pb2.MeterConfig())  # every table: some have no meter
    configs = {e.table_entry.match[0].exact.value: e.table_entry.meter_config
               for e in read(ctl, table_entry=everything) if e.table_entry.table_id == TABLE["t_fwd"]}
    assert configs == {b"\x01": p4runtime_pb2.MeterConfig(**ONE_PER_SECOND),
                       b"\x02": p4runtime_pb2.MeterConfig(cir=5, cburst=2, pir=10, pburst=4)}


# --- value sets -------------------------------------------------------------------------------


def value_set(name: str, *members: list[p4runtime_pb2.FieldMatch]) -> dict:
    v = p4runtime_pb2.ValueSetEntry(value_set_id=VALUE_SET[name])
    for m in members:
        v.members.add(match=m)
    return {"value_set_entry": v}


def ex(fid: int, value: bytes) -> p4runtime_pb2.FieldMatch:
    return p4runtime_pb2.FieldMatch(field_id=fid, exact={"value": value})


def tern(fid: int, value: bytes, mask: bytes) -> p4runtime_pb2.FieldMatch:
    return p4runtime_pb2.FieldMatch(field_id=fid, ternary={"value": value, "mask": mask})


def test_value_set_members(switch: Switch, ctl: Client) -> None:
    def r(data: bytes) -> int:
        return switch.send(1, data)[1][0][6]

    assert [r(pkt(0, t=0x86DD)), r(pkt(7, a=0x15, t=0x86DD))] == [0, 0]  # empty sets match nothing
    ctl.write(update(U.MODIFY, **value_set("types", [ex(1, b"\x86\xdd")], [ex(1, b"\x08\x06")])))
    assert [r(pkt(0, t=0x86DD)), r(pkt(0, t=0x0806)), r(pkt(0, t=0x0800))] == [1, 1, 0]
    ctl.write(update(U.MODIFY, **value_set("pairs", [ex(1, b"\x07"), tern(2, b"\x10", b"\xf0")])))
    assert [r(pkt(7, a=0x15)), r(pkt(7, a=0x25)), r(pkt(8, a=0x15))] == [2, 0, 0]
    ctl.write(update(U.MODIFY, **value_set("pairs", [ex(1, b"\x08")])))  # ternary omitted: don't care
    assert [r(pkt(8, a=0x99)), r(pkt(7, a=0x15))] == [2, 0]

    (got,) = read(ctl, **value_set("types"))
    assert [list(m.match) for m in got.value_set_entry.members] == [[ex(1, b"\x86\xdd")], [ex(1, b"\x08\x06")]]
    assert len(read(ctl, value_set_entry=p4runtime_pb2.ValueSetEntry())) == 2  # id 0: every value set
    ctl.write(update(U.MODIFY, **value_set("types")))  # no members: empty again
    assert r(pkt(0, t=0x86DD)) == 0


def test_value_set_errors(ctl: Client) -> None:
    unknown = value_set("types")
    unknown["value_set_entry"].value_set_id = 0x03000999
    assert codes(ctl, update(U.INSERT, **value_set("types", [ex(1, b"\x86\xdd")])),
                 update(U.MODIFY, **value_set("types", [ex(1, b"\x01")], [ex(1, b"\x02")], [ex(1, b"\x03")])),
                 update(U.MODIFY, **value_set("types", [ex(1, b"\x01\x00\x00")])),
                 update(U.MODIFY, **value_set("pairs", [tern(2, b"\x10", b"\xf0")])),
                 update(U.MODIFY, **value_set("pairs", [ex(1, b"\x07"), tern(2, b"\x11", b"\xf0")])),
                 update(U.MODIFY, **unknown)) == [
        "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "OUT_OF_RANGE", "INVALID_ARGUMENT", "INVALID_ARGUMENT",
        "INVALID_ARGUMENT"]
    assert len(read(ctl, **value_set("types"))[0].value_set_entry.members) == 0


# --- digests ----------------------------------------------------------------------------------


def digest_entry(max_timeout_ns: int = 0, max_list_size: int = 1, ack_timeout_ns: int = 0,
                 digest_id: int = DIGEST) -> dict:
    return {"digest_entry": p4runtime_pb2.DigestEntry(digest_id=digest_id, config={
        "max_timeout_ns": max_timeout_ns, "max_list_size": max_list_size, "ack_timeout_ns": ack_timeout_ns})}


def next_digest(client: Client, timeout: float = TIMEOUT) -> p4runtime_pb2.DigestList:
    while True:
        msg = client.receive(timeout)
        if msg.WhichOneof("update") == "digest":
            return msg.digest


def no_digest(client: Client, wait: float = 0.2) -> bool:
    try:
        while True:
            if client.receive(wait).WhichOneof("update") == "digest":
                return False
    except queue.Empty:
        return True


def learned(d: p4runtime_pb2.DigestList) -> list[tuple[bytes, bytes]]:
    return [(m.struct.members[0].bitstring, m.struct.members[1].bitstring) for m in d.data]


def test_digest_lists_batching_filter_and_ack(switch: Switch, ctl: Client) -> None:
    switch.send(1, pkt(4, a=1))  # not configured yet: dropped
    ctl.write(update(U.INSERT, **digest_entry(max_timeout_ns=10**10, max_list_size=2, ack_timeout_ns=10**10)))
    switch.send(1, pkt(4, a=1))
    switch.send(1, pkt(4, a=1))  # already waiting: filtered
    assert no_digest(ctl)
    switch.send(1, pkt(4, a=2, t=0x1234))
    d = next_digest(ctl)
    assert (d.digest_id, d.list_id, learned(d)) == (DIGEST, 1, [(b"\x01", b"\x08\x00"), (b"\x02", b"\x12\x34")])
    assert d.timestamp > 0

    switch.send(1, pkt(4, a=1))  # in list 1, not acknowledged: filtered
    switch.send(1, pkt(4, a=3))
    assert no_digest(ctl)
    ctl.send(digest_ack={"digest_id": DIGEST, "list_id": 1})
    time.sleep(0.1)  # the ack travels on the stream
    switch.send(1, pkt(4, a=1))  # learned again after the ack
    d = next_digest(ctl)
    assert (d.list_id, learned(d)) == (2, [(b"\x03", b"\x08\x00"), (b"\x01", b"\x08\x00")])


def test_digest_max_timeout_and_ack_timeout(switch: Switch, ctl: Client) -> None:
    ctl.write(update(U.INSERT, **digest_entry(max_timeout_ns=50_000_000, max_list_size=100,
                                              ack_timeout_ns=100_000_000)))
    start = time.monotonic()
    switch.send(1, pkt(4, a=7))
    d = next_digest(ctl)
    assert learned(d) == [(b"\x07", b"\x08\x00")] and time.monotonic() - start >= 0.04
    time.sleep(0.3)  # list 1 was never acknowledged: forgotten after ack_timeout_ns
    switch.send(1, pkt(4, a=7))
    assert next_digest(ctl).list_id == 2


def test_digest_entry_config_and_errors(switch: Switch, ctl: Client) -> None:
    ctl.write(update(U.INSERT, **digest_entry(max_list_size=1)))
    (got,) = read(ctl, **digest_entry())
    assert got.digest_entry.config.max_list_size == 1
    switch.send(1, pkt(4, a=5))
    assert learned(next_digest(ctl)) == [(b"\x05", b"\x08\x00")]  # max_timeout 0: at once

    ctl.write(update(U.MODIFY, **digest_entry(max_timeout_ns=10**10, max_list_size=3)))
    assert read(ctl, **digest_entry())[0].digest_entry.config.max_list_size == 3
    assert codes(ctl, update(U.INSERT, **digest_entry()), update(U.MODIFY, **digest_entry(digest_id=0x17000999)),
                 update(U.MODIFY, **digest_entry(max_list_size=-1))) == [
        "ALREADY_EXISTS", "NOT_FOUND", "INVALID_ARGUMENT"]
    ctl.write(update(U.DELETE, **digest_entry()))
    assert read_code(ctl, **digest_entry()) == Code.NOT_FOUND
    assert codes(ctl, update(U.MODIFY, **digest_entry()), update(U.DELETE, **digest_entry())) == [
        "NOT_FOUND", "NOT_FOUND"]
    switch.send(1, pkt(4, a=6))  # deleted: not learned
    assert no_digest(ctl)


def test_digests_reach_the_primary_only(switch: Switch, ctl: Client) -> None:
    backup = switch.connect()
    assert backup.arbitrate(0).arbitration.status.code == code_pb2.ALREADY_EXISTS
    ctl.write(update(U.INSERT, **digest_entry()))
    switch.send(1, pkt(4, a=9))
    assert learned(next_digest(ctl)) == [(b"\x09", b"\x08\x00")]
    assert no_digest(backup)
    backup.send(digest_ack={"digest_id": DIGEST, "list_id": 1})  # a backup may not ack
    msg = backup.receive()
    while msg.WhichOneof("update") != "error":
        msg = backup.receive()
    assert msg.error.canonical_code == code_pb2.PERMISSION_DENIED
    assert msg.error.digest_list_ack.digest_list_ack.list_id == 1
