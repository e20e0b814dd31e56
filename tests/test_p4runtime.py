"""The P4Runtime server through a real gRPC channel, against tests/p4/runtime.p4.

Each test gets a fresh server (127.0.0.1, a free port) whose dataplane has MemoryPorts 1-3
and CPU port 255.  ``Client`` is a controller: a StreamChannel fed from a queue (its
responses land in another queue) plus helpers for the unary RPCs.  Frames are run with
``Switch.send`` (``Dataplane.inject``: synchronous, as if received on a port); tests that
go through ``MemoryPort.inject`` start the dataplane's port thread first (``poll_ports``:
only those pay the 0.2 s it takes to stop).
"""

from __future__ import annotations

import importlib.metadata
import queue
import re
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4target.dataplane import Dataplane
from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.ports import MemoryPort
from p4target.runtime.device_config import build_device_config
from p4target.runtime.service import P4RuntimeServer

from .conftest import P4_DIR

PROGRAM = P4_DIR / "runtime.p4"
P4INFO = build_p4info(load_program(PROGRAM))
DEVICE_CONFIG = build_device_config(PROGRAM)
TABLE = {t.preamble.alias: t.preamble.id for t in P4INFO.tables}
ACTION = {a.preamble.alias: a.preamble.id for a in P4INFO.actions}
COUNTER = P4INFO.counters[0].preamble.id  # port_counter, 512 cells
CPU_PORT = 255
TIMEOUT = 5.0
Code = grpc.StatusCode
Pipeline = p4runtime_pb2.SetForwardingPipelineConfigRequest
Get = p4runtime_pb2.GetForwardingPipelineConfigRequest

ETH = bytes.fromhex("020000000002" "020000000001" "88b5")  # dst, src, the etherType that has a tag


def frame(a: int, b: int = 0, c: int = 0, d: int = 0) -> bytes:
    return ETH + bytes([a, b, c, d])


# --- messages ---------------------------------------------------------------------------------


def exact(value: bytes, field_id: int = 1) -> p4runtime_pb2.FieldMatch:
    return p4runtime_pb2.FieldMatch(field_id=field_id, exact={"value": value})


def ternary(value: bytes, mask: bytes) -> p4runtime_pb2.FieldMatch:
    return p4runtime_pb2.FieldMatch(field_id=1, ternary={"value": value, "mask": mask})


def lpm(value: bytes, prefix_len: int) -> p4runtime_pb2.FieldMatch:
    return p4runtime_pb2.FieldMatch(field_id=1, lpm={"value": value, "prefix_len": prefix_len})


def entry(table: str, *match: p4runtime_pb2.FieldMatch, action: str | None = None, params: tuple[bytes, ...] = (),
          priority: int = 0, default: bool = False, table_id: int | None = None) -> p4runtime_pb2.TableEntry:
    """A TableEntry; ``action`` is an alias (or a numeric id, as text); params get ids 1, 2, ... in order."""
    te = p4runtime_pb2.TableEntry(table_id=TABLE[table] if table_id is None else table_id, match=match,
                                  priority=priority, is_default_action=default)
    if action is not None:
        te.action.action.action_id = ACTION.get(action, 0) or int(action, 0)
        for i, value in enumerate(params, 1):
            te.action.action.params.add(param_id=i, value=value)
    return te


def forward(a: int, port: bytes) -> p4runtime_pb2.TableEntry:
    return entry("t_exact", exact(bytes([a])), action="forward", params=(port,))


def group(gid: int, *ports: int | bytes) -> p4runtime_pb2.MulticastGroupEntry:
    """A multicast group; an int port uses ``egress_port``, a bytes port the ``port`` bytestring."""
    g = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=gid)
    for port in ports:
        g.replicas.add(instance=1, **({"egress_port": port} if isinstance(port, int) else {"port": port}))
    return g


def replica_ports(g: p4runtime_pb2.MulticastGroupEntry) -> list[int]:
    return [r.egress_port if r.WhichOneof("port_kind") != "port" else int.from_bytes(r.port, "big")
            for r in g.replicas]


def counter(index: int | None = None, packets: int = 0, octets: int = 0) -> p4runtime_pb2.CounterEntry:
    c = p4runtime_pb2.CounterEntry(counter_id=COUNTER, data={"packet_count": packets, "byte_count": octets})
    if index is not None:
        c.index.index = index
    return c


def as_entity(msg) -> p4runtime_pb2.Entity:
    if isinstance(msg, p4runtime_pb2.TableEntry):
        return p4runtime_pb2.Entity(table_entry=msg)
    if isinstance(msg, p4runtime_pb2.MulticastGroupEntry):
        return p4runtime_pb2.Entity(packet_replication_engine_entry={"multicast_group_entry": msg})
    if isinstance(msg, p4runtime_pb2.CounterEntry):
        return p4runtime_pb2.Entity(counter_entry=msg)
    if isinstance(msg, p4runtime_pb2.DirectCounterEntry):
        return p4runtime_pb2.Entity(direct_counter_entry=msg)
    raise TypeError(msg)


def insert(msg) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.INSERT, entity=as_entity(msg))


def modify(msg) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.MODIFY, entity=as_entity(msg))


def delete(msg) -> p4runtime_pb2.Update:
    return p4runtime_pb2.Update(type=p4runtime_pb2.Update.DELETE, entity=as_entity(msg))


def p4_errors(err: grpc.RpcError) -> list[p4runtime_pb2.Error]:
    """The per-update errors of a failed Write: status UNKNOWN, details in the trailer."""
    assert err.code() == Code.UNKNOWN, err
    trailer = dict(err.trailing_metadata())["grpc-status-details-bin"]
    status = status_pb2.Status.FromString(trailer)
    assert status.code == code_pb2.UNKNOWN
    errors = []
    for detail in status.details:
        e = p4runtime_pb2.Error()
        assert detail.Unpack(e), detail.type_url
        errors.append(e)
    return errors


def rpc_error(call, *args, **kwargs) -> grpc.RpcError:
    """The error an RPC fails with (the test fails if it succeeds)."""
    with pytest.raises(grpc.RpcError) as info:
        call(*args, **kwargs)
    return info.value


# --- the switch and its controllers -----------------------------------------------------------


class Client:
    """One controller: a StreamChannel fed by a queue, and the unary RPCs with its election id."""

    def __init__(self, channel: grpc.Channel, device_id: int = 0) -> None:
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
        self.device_id = device_id
        self.election_id = 0
        self._requests: queue.Queue = queue.Queue()
        self.messages: queue.Queue = queue.Queue()  # StreamMessageResponses, then the stream's RpcError
        self.stream = self.stub.StreamChannel(iter(self._requests.get, None))
        threading.Thread(target=self._receive, daemon=True).start()

    def _receive(self) -> None:
        try:
            for msg in self.stream:
                self.messages.put(msg)
        except grpc.RpcError as err:
            self.messages.put(err)

    def send(self, **fields) -> None:
        self._requests.put(p4runtime_pb2.StreamMessageRequest(**fields))

    def receive(self, timeout: float = TIMEOUT) -> p4runtime_pb2.StreamMessageResponse | grpc.RpcError:
        return self.messages.get(timeout=timeout)

    def arbitrate(self, election_id: int, device_id: int | None = None):
        """Send a MasterArbitrationUpdate; return the server's first answer."""
        self.election_id = election_id
        self.send(arbitration={"device_id": self.device_id if device_id is None else device_id,
                               "election_id": {"low": election_id}})
        return self.receive()

    def close(self) -> None:
        self._requests.put(None)
        self.stream.cancel()

    def _election(self) -> p4runtime_pb2.Uint128:
        return p4runtime_pb2.Uint128(low=self.election_id)

    def set_pipeline(self, action: str = "VERIFY_AND_COMMIT", p4info: p4info_pb2.P4Info = P4INFO,
                     device_config: bytes = DEVICE_CONFIG, cookie: int = 0, device_id: int | None = None) -> None:
        self.stub.SetForwardingPipelineConfig(Pipeline(
            device_id=self.device_id if device_id is None else device_id, election_id=self._election(),
            action=Pipeline.Action.Value(action),
            config={"p4info": p4info, "p4_device_config": device_config, "cookie": {"cookie": cookie}}),
            timeout=TIMEOUT)

    def get_pipeline(self, response_type: str = "ALL") -> p4runtime_pb2.ForwardingPipelineConfig:
        return self.stub.GetForwardingPipelineConfig(Get(
            device_id=self.device_id, response_type=Get.ResponseType.Value(response_type)), timeout=TIMEOUT).config

    def write(self, *updates: p4runtime_pb2.Update, device_id: int | None = None) -> None:
        self.stub.Write(p4runtime_pb2.WriteRequest(
            device_id=self.device_id if device_id is None else device_id, election_id=self._election(),
            updates=updates), timeout=TIMEOUT)

    def write_codes(self, *updates: p4runtime_pb2.Update) -> list[str]:
        """Write a batch; the code of each update by name ("OK", "ALREADY_EXISTS", ...)."""
        try:
            self.write(*updates)
        except grpc.RpcError as err:
            errors = p4_errors(err)
            assert len(errors) == len(updates)
            return [code_pb2.Code.Name(e.canonical_code) for e in errors]
        return ["OK"] * len(updates)

    def read(self, *msgs, device_id: int | None = None) -> list:
        """Read entities; return the entries themselves (TableEntry, CounterEntry, ...)."""
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id if device_id is None else device_id,
                                            entities=[as_entity(m) for m in msgs])
        out = []
        for response in self.stub.Read(request, timeout=TIMEOUT):
            for e in response.entities:
                kind = e.WhichOneof("entity")
                if kind == "packet_replication_engine_entry":
                    out.append(e.packet_replication_engine_entry.multicast_group_entry)
                else:
                    out.append(getattr(e, kind))
        return out


@dataclass
class Switch:
    dataplane: Dataplane
    ports: dict[int, MemoryPort]
    channel: grpc.Channel
    clients: list[Client] = field(default_factory=list)
    polling: bool = False

    def poll_ports(self) -> None:
        """Start the dataplane's thread, which serves frames injected on the MemoryPorts."""
        self.dataplane.start()
        self.polling = True

    def connect(self, device_id: int = 0) -> Client:
        client = Client(self.channel, device_id)
        self.clients.append(client)
        return client

    def send(self, port: int, data: bytes) -> dict[int, list[bytes]]:
        """Run one frame as received on ``port``; what each port sent for it (ports that sent nothing left out)."""
        before = {n: len(p.sent) for n, p in self.ports.items()}
        self.dataplane.inject(port, data)
        return {n: p.sent[before[n]:] for n, p in self.ports.items() if len(p.sent) > before[n]}


@pytest.fixture
def switch() -> Iterator[Switch]:
    ports = {n: MemoryPort(n) for n in (1, 2, 3)}
    dataplane = Dataplane(list(ports.values()), cpu_port=CPU_PORT)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(P4RuntimeServer(dataplane), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sw = Switch(dataplane, ports, grpc.insecure_channel(f"127.0.0.1:{port}"))
    yield sw
    for client in sw.clients:
        client.close()
    sw.channel.close()
    server.stop(grace=None)
    if sw.polling:
        dataplane.stop()
    for p in ports.values():
        p.close()


@pytest.fixture
def primary(switch: Switch) -> Client:
    """A primary controller (election id 1) that has committed runtime.p4."""
    client = switch.connect()
    assert client.arbitrate(1).arbitration.status.code == code_pb2.OK
    client.set_pipeline()
    return client


# --- Capabilities and arbitration -------------------------------------------------------------


def test_capabilities_returns_the_api_version(switch: Switch) -> None:
    stub = p4runtime_pb2_grpc.P4RuntimeStub(switch.channel)
    version = stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=TIMEOUT).p4runtime_api_version
    assert version == importlib.metadata.version("p4runtime") == "1.4.1"


def test_arbitration_primary_backup_and_failover(switch: Switch) -> None:
    first, second = switch.connect(), switch.connect()
    answer = first.arbitrate(1).arbitration
    assert (answer.status.code, answer.election_id.low, answer.device_id) == (code_pb2.OK, 1, 0)

    answer = second.arbitrate(2).arbitration  # a higher id takes over, and both are told
    assert (answer.status.code, answer.election_id.low) == (code_pb2.OK, 2)
    notice = first.receive().arbitration
    assert (notice.status.code, notice.election_id.low) == (code_pb2.ALREADY_EXISTS, 2)

    second.set_pipeline()
    assert rpc_error(first.write, insert(forward(1, b"\x02"))).code() == Code.PERMISSION_DENIED
    assert rpc_error(first.set_pipeline).code() == Code.PERMISSION_DENIED
    assert first.read(entry("t_exact")) == []
    second.write(insert(forward(1, b"\x02")))

    second.close()  # the primary goes away: the backup takes over
    notice = first.receive().arbitration
    assert (notice.status.code, notice.election_id.low) == (code_pb2.OK, 1)
    first.write(delete(forward(1, b"\x02")))
    assert first.read(entry("t_exact")) == []


def test_arbitration_rejects_a_duplicate_election_id(switch: Switch) -> None:
    first, second, third = switch.connect(), switch.connect(), switch.connect()
    assert first.arbitrate(1).arbitration.status.code == code_pb2.OK
    err = second.arbitrate(1)
    assert isinstance(err, grpc.RpcError) and err.code() == Code.INVALID_ARGUMENT
    assert third.arbitrate(3).arbitration.status.code == code_pb2.OK
    assert first.receive().arbitration.status.code == code_pb2.ALREADY_EXISTS
    err = third.arbitrate(1)  # a live controller switching to an id another one holds
    assert isinstance(err, grpc.RpcError) and err.code() == Code.INVALID_ARGUMENT
    notice = first.receive().arbitration  # the primary's stream ended: the first is primary again
    assert (notice.status.code, notice.election_id.low) == (code_pb2.OK, 1)


def test_wrong_device_id_is_not_found(switch: Switch, primary: Client) -> None:
    err = switch.connect().arbitrate(1, device_id=7)
    assert isinstance(err, grpc.RpcError) and err.code() == Code.NOT_FOUND
    assert rpc_error(primary.write, insert(forward(1, b"\x02")), device_id=7).code() == Code.NOT_FOUND
    assert rpc_error(primary.read, entry("t_exact"), device_id=7).code() == Code.NOT_FOUND
    assert rpc_error(primary.set_pipeline, device_id=7).code() == Code.NOT_FOUND
    err = primary.arbitrate(1, device_id=7)  # a live controller may not change its device
    assert isinstance(err, grpc.RpcError) and err.code() == Code.FAILED_PRECONDITION


# --- the forwarding pipeline ------------------------------------------------------------------


def test_verify_commits_nothing(switch: Switch) -> None:
    client = switch.connect()
    client.arbitrate(1)
    client.set_pipeline("VERIFY")
    assert rpc_error(client.read, entry("t_exact")).code() == Code.FAILED_PRECONDITION
    assert rpc_error(client.get_pipeline).code() == Code.FAILED_PRECONDITION
    assert rpc_error(client.write, insert(forward(1, b"\x02"))).code() == Code.FAILED_PRECONDITION
    assert switch.send(1, frame(1)) == {}


def test_verify_and_save_then_commit(switch: Switch) -> None:
    client = switch.connect()
    client.arbitrate(1)
    assert rpc_error(client.set_pipeline, "COMMIT").code() == Code.FAILED_PRECONDITION  # nothing saved
    client.set_pipeline("VERIFY_AND_SAVE", cookie=5)
    assert rpc_error(client.read, entry("t_exact")).code() == Code.FAILED_PRECONDITION
    client.set_pipeline("COMMIT")
    assert client.get_pipeline("COOKIE_ONLY").cookie.cookie == 5
    client.write(insert(forward(1, b"\x02")))
    assert switch.send(1, frame(1)) == {2: [frame(1)]}


def test_verify_and_commit_and_get_pipeline(switch: Switch) -> None:
    client = switch.connect()
    client.arbitrate(1)
    assert rpc_error(client.get_pipeline).code() == Code.FAILED_PRECONDITION
    client.set_pipeline("VERIFY_AND_COMMIT", cookie=42)
    config = client.get_pipeline("ALL")
    assert (config.p4info, config.p4_device_config, config.cookie.cookie) == (P4INFO, DEVICE_CONFIG, 42)
    config = client.get_pipeline("COOKIE_ONLY")
    assert not config.HasField("p4info") and config.p4_device_config == b"" and config.cookie.cookie == 42
    config = client.get_pipeline("P4INFO_AND_COOKIE")
    assert config.p4info == P4INFO and config.p4_device_config == b""
    config = client.get_pipeline("DEVICE_CONFIG_AND_COOKIE")
    assert not config.HasField("p4info") and config.p4_device_config == DEVICE_CONFIG


def _p4info_with_changed_table_id() -> p4info_pb2.P4Info:
    info = p4info_pb2.P4Info()
    info.CopyFrom(P4INFO)
    info.tables[0].preamble.id += 1
    return info


@pytest.mark.parametrize("config", [
    pytest.param({"p4info": _p4info_with_changed_table_id()}, id="table-id-changed"),
    pytest.param({"device_config": b"\x00\xffnot a device config"}, id="garbage-device-config"),
    pytest.param({"device_config": b'{"format": "bmv2-json"}'}, id="wrong-format"),
    pytest.param({"action": "UNSPECIFIED"}, id="no-action"),
])
def test_bad_pipeline_config_is_invalid_argument(switch: Switch, config: dict) -> None:
    client = switch.connect()
    client.arbitrate(1)
    assert rpc_error(client.set_pipeline, **config).code() == Code.INVALID_ARGUMENT
    assert rpc_error(client.get_pipeline).code() == Code.FAILED_PRECONDITION  # nothing committed


@pytest.mark.parametrize(("line", "replacement", "error_at"), [
    pytest.param("struct metadata", "struct metadata { bit<8> }", "struct metadata", id="syntax"),
    pytest.param("struct metadata", "struct metadata { no_such_t x; }", "struct metadata", id="unknown-type"),
    pytest.param("header tag_t", "header tag_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<4> e; }",
                 "    state parse_tag", id="header-not-whole-bytes"),  # rejected by the code generator
])
def test_program_that_does_not_compile_reports_file_line_col(switch: Switch, write_p4, line: str,
                                                              replacement: str, error_at: str) -> None:
    lines = [replacement if text.startswith(line) else text for text in PROGRAM.read_text().splitlines()]
    path = write_p4(text="\n".join(lines) + "\n", name="broken.p4")
    expected_line = 1 + next(i for i, text in enumerate(lines) if text.startswith(error_at))
    client = switch.connect()
    client.arbitrate(1)
    err = rpc_error(client.set_pipeline, device_config=build_device_config(path))
    assert err.code() == Code.INVALID_ARGUMENT
    assert re.search(rf"(?<![\w/])broken\.p4:{expected_line}:\d+: ", err.details()), err.details()
    assert "p4target-" not in err.details()  # the server's temporary folder is no business of the client


# --- table entries ----------------------------------------------------------------------------


def test_write_before_any_pipeline_is_failed_precondition(switch: Switch) -> None:
    client = switch.connect()
    client.arbitrate(1)
    assert rpc_error(client.write, insert(forward(1, b"\x02"))).code() == Code.FAILED_PRECONDITION


def test_table_entry_insert_modify_delete(switch: Switch, primary: Client) -> None:
    assert switch.send(1, frame(1)) == {}  # default action: drop
    primary.write(insert(forward(1, b"\x02")))
    assert switch.send(1, frame(1)) == {2: [frame(1)]}
    assert switch.send(1, frame(2)) == {}
    primary.write(modify(forward(1, b"\x03")))
    assert switch.send(1, frame(1)) == {3: [frame(1)]}
    primary.write(delete(entry("t_exact", exact(b"\x01"))))  # a delete needs the key only
    assert switch.send(1, frame(1)) == {}


def test_table_entry_through_the_dataplane_thread(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(7, b"\x03")))
    switch.poll_ports()
    switch.ports[1].inject(frame(7, 1, 2, 3))
    assert switch.ports[3].wait_sent(1) == [frame(7, 1, 2, 3)]


def test_table_entry_existence_and_capacity_errors(primary: Client) -> None:
    primary.write(insert(forward(1, b"\x02")))
    assert primary.write_codes(insert(forward(1, b"\x03"))) == ["ALREADY_EXISTS"]
    assert primary.write_codes(modify(forward(9, b"\x03"))) == ["NOT_FOUND"]
    assert primary.write_codes(delete(forward(9, b"\x03"))) == ["NOT_FOUND"]
    # t_exact holds 4 entries
    assert primary.write_codes(*(insert(forward(a, b"\x02")) for a in (2, 3, 4, 5))) == ["OK"] * 3 + [
        "RESOURCE_EXHAUSTED"]
    assert len(primary.read(entry("t_exact"))) == 4
    assert primary.read(entry("t_exact", exact(b"\x01")))[0].action.action.params[0].value == b"\x02"  # unchanged


def test_default_entry(switch: Switch, primary: Client) -> None:
    assert switch.send(1, frame(1)) == {}
    primary.write(modify(entry("t_exact", action="forward", params=(b"\x03",), default=True)))
    assert switch.send(1, frame(1)) == {3: [frame(1)]}
    (default,) = primary.read(entry("t_exact", default=True))
    assert default.is_default_action and default.action.action.action_id == ACTION["forward"]
    assert default.action.action.params[0].value == b"\x03"

    primary.write(modify(entry("t_exact", default=True)))  # no action: back to the program's default
    assert switch.send(1, frame(1)) == {}
    (default,) = primary.read(entry("t_exact", default=True))
    assert default.action.action.action_id == ACTION["drop"]

    assert primary.write_codes(insert(entry("t_exact", action="drop", default=True)),
                               delete(entry("t_exact", default=True))) == ["INVALID_ARGUMENT"] * 2


def test_const_default_action_and_const_table(switch: Switch, primary: Client) -> None:
    assert primary.write_codes(
        modify(entry("t_const", action="const_mark", params=(b"\x01",), default=True)),
        modify(entry("t_const", default=True)),
        insert(entry("t_const", exact(b"\x05"), action="const_mark", params=(b"\x01",))),
        delete(entry("t_const", exact(b"\x77"))),
    ) == ["PERMISSION_DENIED"] * 4
    (const,) = primary.read(entry("t_const"))
    assert const.is_const and const.match[0].exact.value == b"\x77"
    assert const.action.action.params[0].value == b"\x66"
    primary.write(insert(forward(1, b"\x02")))
    assert switch.send(1, frame(1, 0, 0x77)) == {2: [frame(1, 0x66, 0x77)]}  # the const entry still works


def test_ternary_priorities(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(1, b"\x02")))
    wide = entry("t_tern", ternary(b"\x10", b"\xf0"), action="set_c", params=(b"\xaa",), priority=10)
    narrow = entry("t_tern", ternary(b"\x12", b"\xff"), action="set_c", params=(b"\xbb",), priority=20)
    assert primary.write_codes(insert(entry("t_tern", ternary(b"\x12", b"\xff"), action="set_c", params=(b"\x01",)))
                               ) == ["INVALID_ARGUMENT"]  # priority 0
    primary.write(insert(wide), insert(narrow))
    assert switch.send(1, frame(1, 0x12)) == {2: [frame(1, 0x12, 0xBB)]}  # both match: 20 wins
    assert switch.send(1, frame(1, 0x13)) == {2: [frame(1, 0x13, 0xAA)]}
    assert switch.send(1, frame(1, 0x23)) == {2: [frame(1, 0x23, 0x00)]}
    narrow.priority = 5
    primary.write(delete(entry("t_tern", ternary(b"\x12", b"\xff"), priority=20)), insert(narrow))
    assert switch.send(1, frame(1, 0x12)) == {2: [frame(1, 0x12, 0xAA)]}  # now 10 wins


@pytest.mark.parametrize("match", [
    pytest.param(entry("t_tern", ternary(b"\x00", b"\x00"), action="NoAction", priority=1), id="ternary-mask-0"),
    pytest.param(entry("t_lpm", lpm(b"\x00", 0), action="NoAction"), id="lpm-prefix-0"),
    pytest.param(entry("t_lpm", lpm(b"\x11", 4), action="NoAction"), id="lpm-bits-beyond-prefix"),
    pytest.param(entry("t_tern", ternary(b"\x11", b"\xf0"), action="NoAction", priority=1), id="bits-beyond-mask"),
])
def test_explicit_dont_care_and_stray_bits_are_invalid(primary: Client, match: p4runtime_pb2.TableEntry) -> None:
    assert primary.write_codes(insert(match)) == ["INVALID_ARGUMENT"]
    assert primary.read(entry("t_tern"), entry("t_lpm")) == []


def test_omitted_fields_are_dont_care_and_read_back_omitted(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(1, b"\x02")),
                  insert(entry("t_tern", action="set_c", params=(b"\x05",), priority=1)),
                  insert(entry("t_lpm", action="mark_d", params=(b"\x09",))))
    assert switch.send(1, frame(1, 0x33, 0, 0x44)) == {2: [frame(1, 0x33, 0x05, 0x09)]}
    tern, lpm_entry = primary.read(entry("t_tern"), entry("t_lpm"))
    assert list(tern.match) == [] and tern.priority == 1
    assert list(lpm_entry.match) == []


def test_canonical_and_padded_bytestrings(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(1, b"\x00\x02")))  # port is bit<9>: two bytes padded
    assert primary.write_codes(insert(entry("t_exact", exact(b"\x00\x01"), action="forward", params=(b"\x03",)))
                               ) == ["ALREADY_EXISTS"]  # the same key, padded
    assert switch.send(1, frame(1)) == {2: [frame(1)]}
    (read,) = primary.read(entry("t_exact", exact(b"\x00\x00\x01")))  # found by a padded key too
    assert read.match[0].exact.value == b"\x01" and read.action.action.params[0].value == b"\x02"  # canonical
    primary.write(insert(entry("t_exact", exact(b"\x00"), action="flood", params=(b"\x00\x00\x07",))))
    (zero,) = primary.read(entry("t_exact", exact(b"\x00")))
    assert zero.match[0].exact.value == b"\x00" and zero.action.action.params[0].value == b"\x07"


@pytest.mark.parametrize(("bad", "code"), [
    pytest.param(entry("t_exact", exact(b"\x01\x00"), action="drop"), "OUT_OF_RANGE", id="key-too-wide"),
    pytest.param(forward(1, b"\x02\x00"), "OUT_OF_RANGE", id="param-too-wide"),
    pytest.param(entry("t_exact", exact(b""), action="drop"), "INVALID_ARGUMENT", id="empty-bytestring"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="drop", table_id=0x02000999), "INVALID_ARGUMENT",
                 id="unknown-table"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="0x01000999"), "INVALID_ARGUMENT", id="unknown-action"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="set_c", params=(b"\x01",)), "INVALID_ARGUMENT",
                 id="action-not-of-table"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="forward", params=(b"\x01", b"\x02")), "INVALID_ARGUMENT",
                 id="unknown-param"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="forward"), "INVALID_ARGUMENT", id="missing-param"),
    pytest.param(entry("t_exact", exact(b"\x01", field_id=9), action="drop"), "INVALID_ARGUMENT",
                 id="unknown-field"),
    pytest.param(entry("t_exact", action="drop"), "INVALID_ARGUMENT", id="missing-exact-field"),
    pytest.param(entry("t_exact", lpm(b"\x01", 8), action="drop"), "INVALID_ARGUMENT", id="wrong-match-kind"),
    pytest.param(entry("t_exact", exact(b"\x01")), "INVALID_ARGUMENT", id="no-action"),
    pytest.param(entry("t_exact", exact(b"\x01"), action="drop", priority=3), "INVALID_ARGUMENT",
                 id="priority-on-exact-table"),
])
def test_malformed_table_entry(primary: Client, bad: p4runtime_pb2.TableEntry, code: str) -> None:
    assert primary.write_codes(insert(bad)) == [code]
    assert primary.read(entry("t_exact")) == []


def test_batch_reports_one_error_per_update_in_order(switch: Switch, primary: Client) -> None:
    updates = [
        insert(forward(1, b"\x02")),
        insert(forward(1, b"\x03")),
        insert(forward(2, b"\x03")),
        delete(forward(9, b"\x02")),
        insert(entry("t_exact", exact(b"\x03"), action="drop", table_id=1)),
        insert(group(7, 1)),
    ]
    with pytest.raises(grpc.RpcError) as info:
        primary.write(*updates)
    errors = p4_errors(info.value)
    assert [code_pb2.Code.Name(e.canonical_code) for e in errors] == [
        "OK", "ALREADY_EXISTS", "OK", "NOT_FOUND", "INVALID_ARGUMENT", "OK"]
    assert all(bool(e.message) == (e.canonical_code != code_pb2.OK) for e in errors)
    assert "3 of 6" in info.value.details()
    assert switch.send(1, frame(1)) == {2: [frame(1)]}
    assert switch.send(1, frame(2)) == {3: [frame(2)]}
    assert [g.multicast_group_id for g in primary.read(group(0))] == [7]


# --- Read -------------------------------------------------------------------------------------


def test_read_table_entries(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(1, b"\x00\x02")),
                  insert(forward(2, b"\x03")),
                  insert(entry("t_tern", ternary(b"\x00\x12", b"\x00\xff"), action="set_c", params=(b"\x01",),
                               priority=7)),
                  insert(entry("t_lpm", lpm(b"\x10", 4), action="mark_d", params=(b"\x00\x01",))))
    everything = primary.read(entry("t_exact", table_id=0))
    assert sorted(e.table_id for e in everything) == sorted(
        [TABLE["t_exact"]] * 2 + [TABLE["t_tern"], TABLE["t_lpm"], TABLE["t_const"]])
    assert not any(e.is_default_action for e in everything)

    assert [e.match[0].exact.value for e in primary.read(entry("t_exact"))] == [b"\x01", b"\x02"]
    (tern,) = primary.read(entry("t_tern"))
    assert (tern.priority, tern.match[0].ternary.value, tern.match[0].ternary.mask) == (7, b"\x12", b"\xff")
    (lpm_entry,) = primary.read(entry("t_lpm"))
    assert (lpm_entry.match[0].lpm.value, lpm_entry.match[0].lpm.prefix_len) == (b"\x10", 4)
    assert lpm_entry.action.action.params[0].value == b"\x01"

    (one,) = primary.read(entry("t_exact", exact(b"\x02")))
    assert one.action.action.params[0].value == b"\x03"
    assert primary.read(entry("t_exact", exact(b"\x05"))) == []
    assert rpc_error(primary.read, entry("t_exact", table_id=0x02000999)).code() == Code.INVALID_ARGUMENT
    (tern_by_key,) = primary.read(entry("t_tern", ternary(b"\x12", b"\xff"), priority=7))
    assert tern_by_key == tern

    (default,) = primary.read(entry("t_lpm", default=True))
    assert default.is_default_action and default.action.action.action_id == ACTION["NoAction"]


def test_read_table_entries_with_counter_data(switch: Switch, primary: Client) -> None:
    primary.write(insert(forward(1, b"\x02")), insert(entry("t_lpm", lpm(b"\x10", 4), action="NoAction")))
    for d in (0x11, 0x1F, 0x20):
        switch.send(1, frame(1, 0, 0, d))
    request = entry("t_lpm")
    request.counter_data.SetInParent()
    (hit,) = primary.read(request)
    assert (hit.counter_data.packet_count, hit.counter_data.byte_count) == (2, 2 * len(frame(1)))
    (plain,) = primary.read(entry("t_lpm"))
    assert not plain.HasField("counter_data")


# --- multicast --------------------------------------------------------------------------------


def test_multicast_groups(switch: Switch, primary: Client) -> None:
    primary.write(insert(entry("t_exact", exact(b"\x02"), action="flood", params=(b"\x07",))),
                  insert(group(7, 1, b"\x03")))  # one egress_port replica, one bytestring port
    assert switch.send(2, frame(2)) == {1: [frame(2)], 3: [frame(2)]}
    (read,) = primary.read(group(7))
    assert replica_ports(read) == [1, 3] and [r.instance for r in read.replicas] == [1, 1]

    primary.write(modify(group(7, 2, 3)))
    assert switch.send(1, frame(2)) == {2: [frame(2)], 3: [frame(2)]}
    assert [replica_ports(g) for g in primary.read(group(0))] == [[2, 3]]

    primary.write(delete(group(7)))
    assert switch.send(1, frame(2)) == {}
    assert primary.read(group(0)) == []


def test_multicast_group_errors(primary: Client) -> None:
    primary.write(insert(group(7, 1)))
    assert primary.write_codes(insert(group(7, 2)), modify(group(8, 1)), delete(group(8)), insert(group(0, 1)),
                               insert(group(9, 1, 1))) == [
        "ALREADY_EXISTS", "NOT_FOUND", "NOT_FOUND", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
    assert [replica_ports(g) for g in primary.read(group(0))] == [[1]]
    assert rpc_error(primary.read, group(8)).code() == Code.NOT_FOUND


# --- counters ---------------------------------------------------------------------------------


def test_counter_entries(switch: Switch, primary: Client) -> None:
    for port in (1, 1, 1, 2):
        switch.send(port, frame(9))
    (one,) = primary.read(counter(1))
    assert (one.index.index, one.data.packet_count, one.data.byte_count) == (1, 3, 3 * len(frame(9)))
    cells = primary.read(counter())
    assert len(cells) == 512 and [c.index.index for c in cells] == list(range(512))
    assert {c.index.index: c.data.packet_count for c in cells if c.data.packet_count} == {1: 3, 2: 1}

    primary.write(modify(counter(1, packets=5, octets=500)))
    assert (primary.read(counter(1))[0].data.packet_count, primary.read(counter(1))[0].data.byte_count) == (5, 500)
    primary.write(modify(counter(1)))  # reset one cell
    assert primary.read(counter(1))[0].data.packet_count == 0
    assert primary.read(counter(2))[0].data.packet_count == 1

    assert rpc_error(primary.read, counter(512)).code() == Code.OUT_OF_RANGE
    assert primary.write_codes(modify(counter(512))) == ["OUT_OF_RANGE"]
    wildcard, unknown = counter(2), counter(2)
    wildcard.counter_id, unknown.counter_id = 0, 0x12000999
    assert primary.write_codes(modify(wildcard), modify(unknown), insert(counter(2))) == ["INVALID_ARGUMENT"] * 3
    assert rpc_error(primary.read, unknown).code() == Code.INVALID_ARGUMENT
    assert primary.read(counter(2))[0].data.packet_count == 1


def test_direct_counter_entries(switch: Switch, primary: Client) -> None:
    hit = entry("t_lpm", lpm(b"\x10", 4), action="mark_d", params=(b"\x10",))
    primary.write(insert(forward(1, b"\x02")), insert(hit))
    for d in (0x12, 0x1F, 0x20):
        switch.send(1, frame(1, 0, 0, d))
    key = p4runtime_pb2.DirectCounterEntry(table_entry=entry("t_lpm", lpm(b"\x10", 4)))
    (read,) = primary.read(key)
    assert (read.data.packet_count, read.data.byte_count) == (2, 2 * len(frame(1)))
    assert read.table_entry.match == key.table_entry.match

    primary.write(modify(p4runtime_pb2.DirectCounterEntry(table_entry=key.table_entry)))  # zero data: reset
    (read,) = primary.read(key)
    assert (read.data.packet_count, read.data.byte_count) == (0, 0)
    switch.send(1, frame(1, 0, 0, 0x10))
    assert primary.read(key)[0].data.packet_count == 1


# --- packet I/O -------------------------------------------------------------------------------


def test_packet_out_leaves_on_the_port_in_its_metadata(switch: Switch, primary: Client) -> None:
    payload = frame(0x42, 1, 2, 3)
    primary.send(packet={"payload": payload, "metadata": [{"metadata_id": 1, "value": b"\x02"}]})
    assert switch.ports[2].wait_sent(1) == [payload]  # the packet_out header is gone
    assert switch.ports[1].sent == switch.ports[3].sent == []


def test_packet_in_reaches_the_primary_only(switch: Switch, primary: Client) -> None:
    backup = switch.connect()
    assert backup.arbitrate(0).arbitration.status.code == code_pb2.ALREADY_EXISTS
    data = frame(0xFF, 1, 2, 3)
    switch.poll_ports()
    switch.ports[3].inject(data)  # through the dataplane thread
    msg = primary.receive()
    assert msg.WhichOneof("update") == "packet"
    assert msg.packet.payload == data  # the packet_in header is stripped
    assert {m.metadata_id: m.value for m in msg.packet.metadata} == {1: b"\x03", 2: b"\x00"}
    with pytest.raises(queue.Empty):
        backup.receive(timeout=0.2)


def test_backup_packet_out_gets_a_stream_error(switch: Switch, primary: Client) -> None:
    backup = switch.connect()
    backup.arbitrate(0)
    packet = p4runtime_pb2.PacketOut(payload=frame(1), metadata=[{"metadata_id": 1, "value": b"\x02"}])
    backup.send(packet=packet)
    msg = backup.receive()
    assert msg.WhichOneof("update") == "error"
    assert msg.error.canonical_code == code_pb2.PERMISSION_DENIED
    assert msg.error.packet_out.packet_out == packet
    assert switch.ports[2].sent == []
    primary.send(packet=packet)  # the stream of the primary works as before
    assert switch.ports[2].wait_sent(1) == [frame(1)]


# --- robustness -------------------------------------------------------------------------------


def test_garbage_request_body_gets_an_error_and_the_server_keeps_serving(switch: Switch) -> None:
    raw_write = switch.channel.unary_unary("/p4.v1.P4Runtime/Write")  # bytes in, bytes out
    err = rpc_error(raw_write, b"\xff\xfe\x00garbage, not a WriteRequest", timeout=TIMEOUT)
    assert err.code() not in (Code.OK, Code.DEADLINE_EXCEEDED)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(switch.channel)
    assert stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=TIMEOUT).p4runtime_api_version


def test_writes_and_packets_from_concurrent_threads(switch: Switch, primary: Client) -> None:
    """Entry present: the frame leaves on port 2; absent: the default sends it to port 3."""
    primary.write(modify(entry("t_exact", action="forward", params=(b"\x03",), default=True)))
    errors: list[BaseException] = []
    writing = threading.Event()
    outcomes: list[dict[int, list[bytes]]] = []

    def writer() -> None:
        try:
            for _ in range(100):
                primary.write(insert(forward(1, b"\x02")))
                primary.write(delete(forward(1, b"\x02")))
        except BaseException as err:  # reported by the main thread
            errors.append(err)
        finally:
            writing.clear()

    def injector() -> None:
        try:
            while writing.is_set():
                outcomes.append(switch.send(1, frame(1)))
                time.sleep(0)  # let the gRPC threads have the GIL too
        except BaseException as err:
            errors.append(err)

    writing.set()
    threads = [threading.Thread(target=writer), threading.Thread(target=injector)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and not any(t.is_alive() for t in threads)
    assert outcomes and all(out in ({2: [frame(1)]}, {3: [frame(1)]}) for out in outcomes)
    assert {port for out in outcomes for port in out} == {2, 3}  # the two really interleaved
    assert switch.dataplane.switch.stats["internal_errors"] == 0
    assert primary.read(entry("t_exact")) == []


def test_entries_for_type_keys_and_for_tables_without_actions() -> None:
    """A `type` key and parameter are written at the underlying width (the P4Info bitwidth); a
    table that declares no actions takes no entry (its NoAction is @defaultonly), only its default."""
    from p4target.executor.switch import Switch as Executor
    from p4target.runtime.entities import PipelineState
    from p4target.runtime.requests import INSERT, MODIFY, RpcError

    stf = P4_DIR / "stf"
    sw = Executor.from_file(stf / "typedef_fields.p4")
    info = build_p4info(load_program(stf / "typedef_fields.p4"))
    state = PipelineState(sw, info, p4runtime_pb2.ForwardingPipelineConfig())
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.by_p")
    te = p4runtime_pb2.TableEntry(table_id=table.preamble.id, match=[exact(b"\x12\x34")])
    te.action.action.action_id = next(a.preamble.id for a in info.actions if a.preamble.name == "MyIngress.set_p")
    te.action.action.params.add(param_id=1, value=b"\x43\x21")
    state.write_table_entry(INSERT, te)
    out = sw.process(0, bytes.fromhex("01 00 1234 0000 0000 0000"))
    assert out[0].data == bytes.fromhex("02 00 4321 1234 1334 1234")

    sw = Executor.from_file(stf / "table_no_actions.p4")
    info = build_p4info(load_program(stf / "table_no_actions.p4"))
    state = PipelineState(sw, info, p4runtime_pb2.ForwardingPipelineConfig())
    lone = next(t for t in info.tables if t.preamble.name == "MyIngress.lone")
    te = p4runtime_pb2.TableEntry(table_id=lone.preamble.id, match=[exact(b"\x01")])
    te.action.action.action_id = 21257015  # NoAction
    with pytest.raises(RpcError):
        state.write_table_entry(INSERT, te)
    default = p4runtime_pb2.TableEntry(table_id=lone.preamble.id, is_default_action=True)
    default.action.action.action_id = 21257015
    state.write_table_entry(MODIFY, default)
