"""A P4Runtime client in the switch's own process: the controller's calls handled by the built-in
target's P4RuntimeServer directly, with no socket and no thread, so a simulated fabric runs the
real controller against real switches in its one thread.

The server's request handling runs unchanged: each RPC method is called with a small servicer
context whose ``abort`` raises what gRPC would have carried back (status code, details,
trailers), and the stream is the server's own (``open_stream``), read from its outbox whenever
the client is asked (``alive``, ``ports_down``) instead of by a reader thread.  Errors are
SwitchClient's (controller/p4runtime_client.py), read from the same trailers by the same code.
"""

from __future__ import annotations

import queue
from collections.abc import Iterable, Iterator, Sequence
from typing import NoReturn

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from controller.p4runtime_client import SwitchError, WriteError, describe, port_status, write_error
from p4target.runtime.requests import RpcError
from p4target.runtime.service import P4RuntimeServer, Stream

Pipeline = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetPipeline = p4runtime_pb2.GetForwardingPipelineConfigRequest
_REQUESTS: dict[int, tuple[p4runtime_pb2.ForwardingPipelineConfig, Pipeline]] = {}


def _pipeline_request(config: p4runtime_pb2.ForwardingPipelineConfig) -> Pipeline:
    """One request per config, its ids set per call: building it copies the P4Info, which in
    pure-Python protobuf costs tens of ms, and a fabric pushes one config to hundreds of switches.
    The server only reads the request (one thread: no two calls share it at once)."""
    kept = _REQUESTS.get(id(config))
    if kept is None or kept[0] is not config:
        if len(_REQUESTS) > 16:
            _REQUESTS.clear()
        kept = _REQUESTS[id(config)] = config, Pipeline(action=Pipeline.VERIFY_AND_COMMIT, config=config)
    return kept[1]
Metadata = Sequence[tuple[str, bytes | str]]


class CallError(grpc.RpcError):
    """An in-process call the server aborted: the status code, details and trailers a gRPC client
    would have received (``code()``, ``details()``, ``trailing_metadata()``, as on grpc.RpcError)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailers: Metadata = ()) -> None:
        super().__init__(f"{code.name} {details}")
        self._code, self._details, self._trailers = code, details, tuple(trailers)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Metadata:
        return self._trailers


class _Context:
    """The servicer context of one in-process call: the two things the server does with one."""

    def __init__(self) -> None:
        self.trailers: Metadata = ()

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self.trailers = tuple(metadata)

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise CallError(code, details, self.trailers)


class LocalSwitchClient:
    """Primary controller of one device served in this process (``SwitchConnection``): arbitrates on
    creation and raises SwitchError when it cannot, like SwitchClient.

    With ``election_id=None`` it is a read-only observer without a stream.  Once the server is
    stopped (the simulated switch was killed) the client is not ``alive`` and every call raises
    SwitchError (a Write: WriteError, every update UNAVAILABLE), as a dead switch's gRPC calls do.
    """

    def __init__(self, server: P4RuntimeServer, device_id: int, election_id: int | None = 1,
                 name: str | None = None) -> None:
        self.server, self.device_id = server, device_id
        self.name = name or f"device {device_id}"
        self.election_id = p4runtime_pb2.Uint128(high=0, low=election_id or 0)
        self._ports_down: set[int] = set()  # as the switch reports them on the stream
        self._stream: Stream | None = None
        self._ended = False  # the stream ended: the switch stopped, or refused us
        self._closed = False
        self._arbitration: p4runtime_pb2.StreamMessageResponse | RpcError | None = None
        self._check_reachable("connect")
        if election_id is None:
            return
        self._stream = server.open_stream()
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = device_id
        request.arbitration.election_id.CopyFrom(self.election_id)
        server.stream_message(self._stream, request)
        self._drain()  # the server answers arbitration at once
        self._arbitrated()

    # --- stream ----------------------------------------------------------------------------

    def _arbitrated(self) -> None:
        reply = self._arbitration
        if reply is None:
            self.close()
            raise SwitchError(f"{self.name}: no arbitration answer")
        if isinstance(reply, RpcError):
            self.close()
            raise SwitchError(f"{self.name}: stream failed: {reply.code.name} {reply}")
        if reply.arbitration.status.code != code_pb2.OK:
            self.close()
            raise SwitchError(f"{self.name}: not primary for device {self.device_id} "
                              f"({reply.arbitration.status.message or 'another controller has a higher election id'})")

    def _drain(self) -> None:
        """Take what the server sent on the stream since: arbitration answers, port status, its end."""
        if self._stream is None:
            return
        while not self._ended:
            try:
                msg = self._stream.outbox.get_nowait()
            except queue.Empty:
                return
            if msg is None:
                self._ended = True
            elif isinstance(msg, RpcError):
                self._arbitration, self._ended = msg, True
            elif msg.HasField("arbitration"):
                self._arbitration = msg
            elif msg.HasField("other"):
                status = port_status(msg.other)
                if status is not None:
                    port, up = status
                    (self._ports_down.discard if up else self._ports_down.add)(port)

    @property
    def alive(self) -> bool:
        """False once the switch went away (its server stopped), or this client closed."""
        self._drain()
        return self.server.running and not self._ended and not self._closed

    @property
    def ports_down(self) -> set[int]:
        """The ports the switch reports down (p4target/runtime/port_status.py)."""
        self._drain()
        return self._ports_down

    def close(self) -> None:
        """Leave the server's streams, so our election id is free again."""
        if self._stream is not None and not self._closed:
            self.server.close_stream(self._stream)
        self._closed = True

    def _check_reachable(self, what: str) -> None:
        if self._closed:
            raise SwitchError(f"{self.name}: {what}: the connection is closed")
        if not self.server.running:
            raise SwitchError(f"{self.name}: {what}: not reachable (the switch is down)")

    # --- pipeline ------------------------------------------------------------------------------

    def set_pipeline(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        request = _pipeline_request(config)
        request.device_id = self.device_id
        request.election_id.CopyFrom(self.election_id)
        self._check_reachable("SetForwardingPipelineConfig")
        try:
            self.server.SetForwardingPipelineConfig(request, _Context())
        except CallError as e:
            raise SwitchError(f"{self.name}: SetForwardingPipelineConfig: {describe(e)}") from None

    def pipeline_cookie(self, timeout: float | None = None) -> int | None:
        """The running pipeline's cookie; None when the switch has no pipeline (a fresh start).  In process
        the answer is at once: ``timeout`` (SwitchClient's deadline) has nothing to bound."""
        request = GetPipeline(device_id=self.device_id, response_type=GetPipeline.COOKIE_ONLY)
        self._check_reachable("GetForwardingPipelineConfig")
        try:
            reply = self.server.GetForwardingPipelineConfig(request, _Context())
        except CallError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise SwitchError(f"{self.name}: GetForwardingPipelineConfig: {describe(e)}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    # --- entities ------------------------------------------------------------------------------

    def write(self, updates: list[p4runtime_pb2.Update]) -> None:
        if not updates:
            return
        try:
            self._check_reachable("Write")
        except SwitchError as e:
            raise WriteError(str(e), ["UNAVAILABLE"] * len(updates)) from None
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self.election_id, updates=updates,
                                             atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
        try:
            self.server.Write(request, _Context())
        except CallError as e:
            raise write_error(self.name, e, len(updates)) from None

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> Iterator[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=list(entities))
        self._check_reachable("Read")
        try:
            for reply in self.server.Read(request, _Context()):
                yield from reply.entities
        except CallError as e:
            raise SwitchError(f"{self.name}: Read: {describe(e)}") from None
