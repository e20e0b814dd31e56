"""The P4Runtime v1 gRPC service of the built-in target (one device per server).

Arbitration follows the spec for the default role: the connected client with the highest
election id is primary; only it may Write, set the pipeline, and send or receive packets.
Per-update Write errors travel the P4Runtime way: status UNKNOWN with a ``google.rpc.Status``
in the ``grpc-status-details-bin`` trailer holding one ``p4.v1.Error`` per update.

The servicer methods need no socket: an in-process client (virtual_fabric.p4runtime_local)
calls them with its own context, and opens its stream with ``open_stream``, feeds it with
``stream_message`` and reads the stream's ``outbox``, as the gRPC StreamChannel does.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from ..dataplane import Dataplane
from ..executor.switch import Switch
from .cpu_port import packet_in_message, packet_out_frame
from .device_config import DeviceConfigError, compile_device_config
from .digests import DigestManager
from .entities import PipelineState
from .environment import MACHINE, Environment
from .extern_entities import ExternEntities
from .port_status import port_status_message
from .requests import RpcError, rpc_error

log = logging.getLogger(__name__)

API_VERSION = "1.4.1"
Pipeline = p4runtime_pb2.SetForwardingPipelineConfigRequest
_OK = p4runtime_pb2.Error(canonical_code=code_pb2.OK)

# The entities a read fills by asking one object of the pipeline, by the Entity field they are in.
_READERS: dict[str, Callable[[PipelineState, Any], Iterable[Any]]] = {
    "meter_entry": lambda p, e: p.externs.read_meters(e),
    "direct_meter_entry": lambda p, e: p.externs.read_direct_meters(e),
    "value_set_entry": lambda p, e: p.externs.read_value_sets(e),
    "digest_entry": lambda p, e: p.digests.read(e),
    "counter_entry": lambda p, e: p.read_counters(e),
    "direct_counter_entry": lambda p, e: p.read_direct_counters(e),
    "register_entry": lambda p, e: p.read_registers(e),
    "action_profile_member": lambda p, e: p.profiles.read_members(e),
    "action_profile_group": lambda p, e: p.profiles.read_groups(e),
}


@dataclass(eq=False)
class Stream:
    """One StreamChannel: its election id once arbitrated, and its outgoing messages (responses,
    an RpcError that ends the stream, then None when it ended)."""

    outbox: queue.Queue = field(default_factory=queue.Queue)
    election_id: tuple[int, int] | None = None


def p4info_mismatch(given: p4info_pb2.P4Info, expected: p4info_pb2.P4Info) -> str | None:
    """Compare what a controller relies on: ids, names, key and parameter layouts."""

    def shape(info: p4info_pb2.P4Info) -> dict[str, set]:
        return {
            "tables": {(t.preamble.id, t.preamble.name, tuple((f.id, f.name, f.bitwidth, f.match_type)
                                                              for f in t.match_fields), t.implementation_id)
                       for t in info.tables},
            "action profiles": {(a.preamble.id, a.preamble.name, a.with_selector, a.size, a.max_group_size,
                                 tuple(sorted(a.table_ids))) for a in info.action_profiles},
            "actions": {(a.preamble.id, a.preamble.name, tuple((p.id, p.name, p.bitwidth) for p in a.params))
                        for a in info.actions},
            "counters": {(c.preamble.id, c.preamble.name, c.size) for c in info.counters},
            "direct counters": {(c.preamble.id, c.preamble.name) for c in info.direct_counters},
            "registers": {(r.preamble.id, r.preamble.name, r.size) for r in info.registers},
            "meters": {(m.preamble.id, m.preamble.name, m.size) for m in info.meters},
            "direct meters": {(m.preamble.id, m.preamble.name, m.direct_table_id) for m in info.direct_meters},
            "value sets": {(v.preamble.id, v.preamble.name, v.size,
                            tuple((f.id, f.bitwidth, f.match_type) for f in v.match)) for v in info.value_sets},
            "digests": {(d.preamble.id, d.preamble.name) for d in info.digests},
            "controller headers": {(m.preamble.id, m.preamble.name,
                                    tuple((f.id, f.name, f.bitwidth) for f in m.metadata))
                                   for m in info.controller_packet_metadata},
        }

    a, b = shape(given), shape(expected)
    for kind in a:
        if a[kind] != b[kind]:
            extra, missing = sorted(a[kind] - b[kind])[:2], sorted(b[kind] - a[kind])[:2]
            return f"P4Info {kind} differ from the program's: given {extra}, program has {missing}"
    return None


class P4RuntimeServer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, dataplane: Dataplane, device_id: int = 0,
                 compile: Callable[[bytes], tuple[Switch, p4info_pb2.P4Info]] = compile_device_config,
                 environment: Environment = MACHINE) -> None:
        """``compile`` turns a device config into a new switch and its P4Info (raising
        DeviceConfigError): a simulated fabric passes a ``DeviceConfigCache``, and an
        ``environment`` of virtual time and a seeded generator, which every committed pipeline
        gets (the machine's clock, threads and an unseeded generator otherwise)."""
        self.dataplane = dataplane
        self.environment = environment
        self.device_id = device_id
        self.compile = compile
        self.running = True  # False once stop() ended the switch
        self.pipeline: PipelineState | None = None
        self.saved: PipelineState | None = None
        self.streams: list[Stream] = []
        self.lock = threading.RLock()
        self.ports_down: dict[int, str] = {}  # port: interface, for clients that arbitrate later
        dataplane.packet_in = self._packet_in

    # ------------------------------------------------------------------ helpers
    def _check_device(self, device_id: int) -> None:
        if device_id != self.device_id:
            raise rpc_error("NOT_FOUND", f"this server is device {self.device_id}, not {device_id}")

    def _primary(self) -> Stream | None:
        live = [s for s in self.streams if s.election_id is not None]
        return max(live, key=lambda s: s.election_id, default=None)

    def _check_primary(self, election_id: p4runtime_pb2.Uint128) -> None:
        primary = self._primary()
        if primary is None or primary.election_id != (election_id.high, election_id.low):
            raise rpc_error("PERMISSION_DENIED", "only the primary client may do this")

    def _running(self) -> PipelineState:
        if self.pipeline is None:
            raise rpc_error("FAILED_PRECONDITION", "no forwarding pipeline config has been set")
        return self.pipeline

    @staticmethod
    def _abort(context: grpc.ServicerContext, err: RpcError) -> None:
        context.abort(err.code, str(err))

    # ------------------------------------------------------------------ RPCs
    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        try:
            with self.lock:
                self._check_device(request.device_id)
                self._check_primary(request.election_id)
                self._set_pipeline(request)
        except RpcError as err:
            self._abort(context, err)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def _set_pipeline(self, request: Pipeline) -> None:
        action = request.action
        if action == Pipeline.COMMIT:
            if self.saved is None:
                raise rpc_error("FAILED_PRECONDITION", "COMMIT with no saved pipeline config")
            self.commit(self.saved)
            return
        if action not in (Pipeline.VERIFY, Pipeline.VERIFY_AND_SAVE, Pipeline.VERIFY_AND_COMMIT):
            raise rpc_error("UNIMPLEMENTED" if action == Pipeline.RECONCILE_AND_COMMIT else "INVALID_ARGUMENT",
                            f"pipeline action {Pipeline.Action.Name(action)} is not supported")
        if not request.HasField("config"):
            raise rpc_error("INVALID_ARGUMENT", "no config given")
        try:
            switch, p4info = self.compile(request.config.p4_device_config)
        except DeviceConfigError as err:
            raise rpc_error("INVALID_ARGUMENT", str(err)) from None
        problem = p4info_mismatch(request.config.p4info, p4info)
        if problem:
            raise rpc_error("INVALID_ARGUMENT", problem)
        state = PipelineState(switch, request.config.p4info, request.config)
        state.externs = ExternEntities(state)
        if action == Pipeline.VERIFY_AND_SAVE:
            self.saved = state
        elif action == Pipeline.VERIFY_AND_COMMIT:
            self.commit(state)

    def commit(self, state: PipelineState) -> None:
        if self.pipeline is not None:
            self.pipeline.digests.close()
        env = self.environment
        state.digests = DigestManager(state.p4info, self._send_digest, env)
        state.switch.hooks.digest_sink = state.digests.learn
        state.switch.set_clock(env.clock)  # the meters count from the commit, as BMv2's from its start
        if env.rng is not None:
            state.switch.hooks.rng = env.rng
        self.pipeline, self.saved = state, None
        self.dataplane.switch = state.switch  # the dataplane picks it up on its next frame
        log.info("pipeline committed: %d tables", len(state.switch.tables))

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            running = self._running()
        except RpcError as err:
            self._abort(context, err)
        Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
        config = p4runtime_pb2.ForwardingPipelineConfig(cookie=running.config.cookie)
        if request.response_type in (Get.ALL, Get.P4INFO_AND_COOKIE):
            config.p4info.CopyFrom(running.config.p4info)
        if request.response_type in (Get.ALL, Get.DEVICE_CONFIG_AND_COOKIE):
            config.p4_device_config = running.config.p4_device_config
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    def Write(self, request, context):
        try:
            with self.lock:
                self._check_device(request.device_id)
                self._check_primary(request.election_id)
                pipeline = self._running()
                if request.atomicity != p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR:
                    raise rpc_error("UNIMPLEMENTED", "only CONTINUE_ON_ERROR atomicity is supported")
        except RpcError as err:
            self._abort(context, err)
        results = []
        with pipeline.switch.lock:  # a batch is atomic with respect to packets
            for update in request.updates:
                try:
                    self._write_one(pipeline, update)
                    results.append(_OK)
                except RpcError as err:
                    results.append(p4runtime_pb2.Error(canonical_code=err.code.value[0], message=str(err)))
        failed = [e for e in results if e.canonical_code != code_pb2.OK]
        if failed:
            status = status_pb2.Status(code=code_pb2.UNKNOWN, message=f"{len(failed)} of {len(results)} updates failed")
            for e in results:
                status.details.add().Pack(e)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
            context.abort(grpc.StatusCode.UNKNOWN, status.message + ": " + failed[0].message)
        return p4runtime_pb2.WriteResponse()

    @staticmethod
    def _write_one(p: PipelineState, update: p4runtime_pb2.Update) -> None:
        if update.type not in (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE):
            raise rpc_error("INVALID_ARGUMENT", "update type is UNSPECIFIED")
        entity = update.entity
        kind = entity.WhichOneof("entity")
        if kind == "table_entry":
            p.write_table_entry(update.type, entity.table_entry)
        elif kind == "packet_replication_engine_entry":
            pre = entity.packet_replication_engine_entry
            which = pre.WhichOneof("type")
            if which == "clone_session_entry":
                p.externs.write_clone_session(update.type, pre.clone_session_entry)
            elif which == "multicast_group_entry":
                p.write_multicast_group(update.type, pre.multicast_group_entry)
            else:
                raise rpc_error("INVALID_ARGUMENT", "a packet replication engine entry without its entry")
        elif kind == "meter_entry":
            p.externs.write_meter(update.type, entity.meter_entry)
        elif kind == "direct_meter_entry":
            p.externs.write_direct_meter(update.type, entity.direct_meter_entry)
        elif kind == "value_set_entry":
            p.externs.write_value_set(update.type, entity.value_set_entry)
        elif kind == "digest_entry":
            p.digests.write(update.type, entity.digest_entry)
        elif kind == "counter_entry":
            p.write_counter(update.type, entity.counter_entry)
        elif kind == "direct_counter_entry":
            p.write_direct_counter(update.type, entity.direct_counter_entry)
        elif kind == "action_profile_member":
            p.profiles.write_member(update.type, entity.action_profile_member)
        elif kind == "action_profile_group":
            p.profiles.write_group(update.type, entity.action_profile_group)
        else:
            raise rpc_error("UNIMPLEMENTED" if kind else "INVALID_ARGUMENT",
                            f"writing {kind} is not supported" if kind else "update without an entity")

    def Read(self, request, context):
        try:
            self._check_device(request.device_id)
            pipeline = self._running()
            with pipeline.switch.lock:
                entities = [e for entity in request.entities for e in self._read_one(pipeline, entity)]
        except RpcError as err:
            self._abort(context, err)
        for start in range(0, len(entities), 1000):
            yield p4runtime_pb2.ReadResponse(entities=entities[start:start + 1000])
        if not entities:
            yield p4runtime_pb2.ReadResponse()

    @staticmethod
    def _read_one(p: PipelineState, entity: p4runtime_pb2.Entity) -> Iterator[p4runtime_pb2.Entity]:
        kind = entity.WhichOneof("entity")
        if kind == "table_entry":
            for e in p.read_table_entries(entity.table_entry):
                yield p4runtime_pb2.Entity(table_entry=e)
        elif kind == "packet_replication_engine_entry":
            pre = entity.packet_replication_engine_entry
            which = pre.WhichOneof("type")
            if which == "clone_session_entry":
                for c in p.externs.read_clone_sessions(pre.clone_session_entry):
                    yield p4runtime_pb2.Entity(packet_replication_engine_entry={"clone_session_entry": c})
            elif which == "multicast_group_entry":
                for g in p.read_multicast_groups(pre.multicast_group_entry):
                    yield p4runtime_pb2.Entity(packet_replication_engine_entry={"multicast_group_entry": g})
            else:
                raise rpc_error("INVALID_ARGUMENT", "a packet replication engine read without its entry")
        elif kind in _READERS:
            for found in _READERS[kind](p, getattr(entity, kind)):
                yield p4runtime_pb2.Entity(**{kind: found})
        else:
            raise rpc_error("UNIMPLEMENTED" if kind else "INVALID_ARGUMENT",
                            f"reading {kind} is not supported" if kind else "read of an empty entity")

    # ------------------------------------------------------------------ stream channel
    def StreamChannel(self, request_iterator, context):
        stream = self.open_stream()
        reader = threading.Thread(target=self._read_stream, args=(stream, request_iterator, context), daemon=True)
        reader.start()
        try:
            while True:
                msg = stream.outbox.get()
                if msg is None:
                    break
                if isinstance(msg, RpcError):
                    context.abort(msg.code, str(msg))
                yield msg
        finally:
            self.close_stream(stream)

    def _read_stream(self, stream: Stream, requests, context) -> None:
        try:
            for req in requests:
                if not self.stream_message(stream, req):
                    return
        except grpc.RpcError:
            pass  # the client went away
        finally:
            stream.outbox.put(None)

    def open_stream(self) -> Stream:
        """A client's stream, not yet arbitrated: what StreamChannel opens for a gRPC client."""
        stream = Stream()
        with self.lock:
            self.streams.append(stream)
        return stream

    def stream_message(self, stream: Stream, req: p4runtime_pb2.StreamMessageRequest) -> bool:
        """Handle one message the client sent; what it answers goes to ``stream.outbox``.  False when
        the stream must end (a refused arbitration: its RpcError is in the outbox)."""
        kind = req.WhichOneof("update")
        try:
            if kind == "arbitration":
                self._arbitrate(stream, req.arbitration)
            elif kind == "packet":
                self._packet_out(stream, req.packet)
            elif kind == "digest_ack":
                self._digest_ack(stream, req.digest_ack)
            else:
                raise rpc_error("UNIMPLEMENTED", f"stream message {kind} is not supported")
        except RpcError as err:
            if kind == "arbitration":
                stream.outbox.put(err)  # fatal for the stream
                return False
            error = p4runtime_pb2.StreamError(canonical_code=err.code.value[0], message=str(err))
            if kind == "packet":
                error.packet_out.packet_out.CopyFrom(req.packet)
            elif kind == "digest_ack":
                error.digest_list_ack.digest_list_ack.CopyFrom(req.digest_ack)
            stream.outbox.put(p4runtime_pb2.StreamMessageResponse(error=error))
        return True

    def stop(self) -> None:
        """The switch went away (a simulated fabric killed it): every stream ends, as a dead
        process's connections do, and ``running`` turns False for in-process clients to see."""
        with self.lock:
            self.running = False
            for s in self.streams:
                s.outbox.put(None)

    def _arbitrate(self, stream: Stream, arb: p4runtime_pb2.MasterArbitrationUpdate) -> None:
        if stream.election_id is not None and arb.device_id != self.device_id:
            raise rpc_error("FAILED_PRECONDITION", f"this stream is for device {self.device_id}, not {arb.device_id}")
        self._check_device(arb.device_id)
        if arb.role.name or arb.role.id:
            raise rpc_error("UNIMPLEMENTED", "only the default role is supported")
        election = (arb.election_id.high, arb.election_id.low)
        with self.lock:
            if any(s is not stream and s.election_id == election for s in self.streams):
                raise rpc_error("INVALID_ARGUMENT", f"election id {election} is used by another client")
            old = self._primary()
            first = stream.election_id is None
            stream.election_id = election
            self._announce(only=None if self._primary() is not old else stream)
            if first:
                for port, interface in sorted(self.ports_down.items()):
                    stream.outbox.put(port_status_message(port, False, interface))

    def port_status(self, port: int, up: bool, interface: str) -> None:
        """A port went up or down: every arbitrated client hears of it (``port_status``)."""
        with self.lock:
            known_down = port in self.ports_down
            if up:
                self.ports_down.pop(port, None)
            else:
                self.ports_down[port] = interface
            if up != known_down:
                return  # no change (the first report of every port that is up, for one)
            for s in self.streams:
                if s.election_id is not None:
                    s.outbox.put(port_status_message(port, up, interface))

    def _announce(self, only: Stream | None) -> None:
        """Tell clients who is primary (everyone when that changed, else the asking one)."""
        primary = self._primary()
        for s in self.streams:
            if s.election_id is None or (only is not None and s is not only):
                continue
            code = code_pb2.OK if s is primary else code_pb2.ALREADY_EXISTS
            high, low = primary.election_id if primary else (0, 0)
            s.outbox.put(p4runtime_pb2.StreamMessageResponse(arbitration=p4runtime_pb2.MasterArbitrationUpdate(
                device_id=self.device_id, election_id=p4runtime_pb2.Uint128(high=high, low=low),
                status=status_pb2.Status(code=code))))

    def close_stream(self, stream: Stream) -> None:
        """The client is gone: another client may become primary (everyone hears who)."""
        with self.lock:
            if stream not in self.streams:
                return
            was_primary = self._primary() is stream
            self.streams.remove(stream)
            if was_primary:
                self._announce(only=None)

    def _packet_out(self, stream: Stream, packet: p4runtime_pb2.PacketOut) -> None:
        with self.lock:
            if stream.election_id is None or self._primary() is not stream:
                raise rpc_error("PERMISSION_DENIED", "only the primary client may send packets")
            pipeline = self._running()
        if self.dataplane.cpu_port is None:
            raise rpc_error("FAILED_PRECONDITION", "the switch was started without --cpu-port")
        frame = packet_out_frame(pipeline.cpu_metadata.get("packet_out"), packet)
        self.dataplane.inject(self.dataplane.cpu_port, frame)

    def _digest_ack(self, stream: Stream, ack: p4runtime_pb2.DigestListAck) -> None:
        with self.lock:
            if stream.election_id is None or self._primary() is not stream:
                raise rpc_error("PERMISSION_DENIED", "only the primary client may acknowledge digests")
            pipeline = self._running()
        pipeline.digests.ack(ack)

    def _send_digest(self, msg: p4runtime_pb2.DigestList) -> bool:
        """A DigestList goes to the primary client only; without one it is dropped."""
        with self.lock:
            primary = self._primary()
        if primary is None:
            return False
        primary.outbox.put(p4runtime_pb2.StreamMessageResponse(digest=msg))
        return True

    def _packet_in(self, frame: bytes) -> None:
        with self.lock:  # streams come and go in other threads
            pipeline, primary = self.pipeline, self._primary()
        if pipeline is None or primary is None:
            self.dataplane.stats["packet_in_no_client"] += 1
            return
        try:
            msg = packet_in_message(pipeline.cpu_metadata.get("packet_in"), frame)
        except RpcError:
            self.dataplane.stats["packet_in_malformed"] += 1
            return
        primary.outbox.put(p4runtime_pb2.StreamMessageResponse(packet=msg))


def serve(service: P4RuntimeServer, address: str) -> grpc.Server:
    """Start the gRPC server on ``address`` (HOST:PORT); raises RuntimeError if it cannot bind."""
    # No SO_REUSEPORT (gRPC's default): a second switch on a taken address must fail, not share it.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="p4rt"),
                         options=[("grpc.so_reuseport", 0)])
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(service, server)
    if server.add_insecure_port(address) == 0:
        raise RuntimeError(f"cannot listen on {address}")
    server.start()
    return server
