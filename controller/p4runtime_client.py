"""One P4Runtime connection to one switch: arbitration, pipeline, writes and reads.

Built on the ``p4runtime`` protobufs and grpcio directly, one object per switch (no module
globals, unlike p4runtime-shell), and a write error always comes back as ``WriteError`` with
the status of every update, so a batch with an OK before an error never hangs.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Protocol

import grpc
from google.protobuf import any_pb2, struct_pb2
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

PORT_STATUS = "port_status"  # the key of the built-in target's port status message (a Struct in `other`)
Update = p4runtime_pb2.Update
Pipeline = p4runtime_pb2.SetForwardingPipelineConfigRequest
GetPipeline = p4runtime_pb2.GetForwardingPipelineConfigRequest


class SwitchError(RuntimeError):
    """A switch that cannot be reached or refuses a request."""


class WriteError(SwitchError):
    """Some updates of a Write failed; ``codes`` holds one grpc status code name per update."""

    def __init__(self, message: str, codes: list[str]) -> None:
        super().__init__(message)
        self.codes = codes


class SwitchConnection(Protocol):
    """What the controller needs of one switch's connection: ``SwitchClient`` over gRPC, or an
    in-process one (virtual_fabric.p4runtime_local) with the same calls and the same errors."""

    @property
    def alive(self) -> bool: ...

    @property
    def ports_down(self) -> set[int]: ...

    def close(self) -> None: ...

    def set_pipeline(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None: ...

    def pipeline_cookie(self, timeout: float | None = None) -> int | None: ...

    def write(self, updates: list[p4runtime_pb2.Update]) -> None: ...

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> Iterator[p4runtime_pb2.Entity]: ...


class SwitchClient:
    """Primary controller of one device: opens the stream and wins arbitration on creation.

    With ``election_id=None`` it is a read-only observer (Read and GetForwardingPipelineConfig
    need no arbitration), so it never takes the primary role from a running controller.
    """

    def __init__(self, address: str, device_id: int, election_id: int | None = 1, timeout: float = 10.0,
                 connect_timeout: float = 3.0, wake: threading.Event | None = None) -> None:
        """``wake`` is set when the switch reports a port going down or up, and when the stream ends, so
        a watch acts at once rather than at its next round."""
        self.address, self.device_id, self.timeout = address, device_id, timeout
        self._wake = wake
        self.election_id = p4runtime_pb2.Uint128(high=0, low=election_id or 0)
        self._channel = grpc.insecure_channel(address)
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        self._requests: queue.Queue[p4runtime_pb2.StreamMessageRequest | None] = queue.Queue()
        self._arbitration: queue.Queue[p4runtime_pb2.StreamMessageResponse | Exception] = queue.Queue()
        self._broken = threading.Event()
        self.ports_down: set[int] = set()  # as the switch reports them (the built-in target does; BMv2 does not)
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise SwitchError(f"no P4Runtime server answers at {address}") from None
        if election_id is None:
            return
        self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
        threading.Thread(target=self._read_stream, daemon=True, name=f"p4rt-{address}").start()
        self._arbitrate()

    # --- stream ----------------------------------------------------------------------------

    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                if msg.HasField("arbitration"):
                    self._arbitration.put(msg)
                elif msg.HasField("other"):
                    self._other(msg.other)
        except grpc.RpcError as e:
            self._arbitration.put(e)
        finally:
            self._broken.set()
            self._woken()

    def _other(self, message: any_pb2.Any) -> None:
        status = port_status(message)
        if status is not None:
            port, up = status
            if up == (port in self.ports_down):  # a change
                (self.ports_down.discard if up else self.ports_down.add)(port)
                self._woken()

    def _woken(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _arbitrate(self) -> None:
        request = p4runtime_pb2.StreamMessageRequest()
        request.arbitration.device_id = self.device_id
        request.arbitration.election_id.CopyFrom(self.election_id)
        self._requests.put(request)
        try:
            reply = self._arbitration.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise SwitchError(f"{self.address}: no arbitration answer within {self.timeout} s") from None
        if isinstance(reply, Exception):
            self.close()
            raise SwitchError(f"{self.address}: stream failed: {describe(reply)}")
        if reply.arbitration.status.code != code_pb2.OK:
            self.close()
            raise SwitchError(f"{self.address}: not primary for device {self.device_id} "
                              f"({reply.arbitration.status.message or 'another controller has a higher election id'})")

    @property
    def alive(self) -> bool:
        """False once the stream ended: the switch went away (or restarted)."""
        return not self._broken.is_set()

    def close(self) -> None:
        """End the stream and wait for the switch to see it, so our election id is free again."""
        if self.election_id.low:
            self._requests.put(None)
            self._broken.wait(timeout=2.0)
        self._channel.close()

    # --- pipeline ------------------------------------------------------------------------------

    def set_pipeline(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        request = Pipeline(device_id=self.device_id, election_id=self.election_id, action=Pipeline.VERIFY_AND_COMMIT,
                           config=config)
        self._call(self._stub.SetForwardingPipelineConfig, request, "SetForwardingPipelineConfig")

    def pipeline_cookie(self, timeout: float | None = None) -> int | None:
        """The running pipeline's cookie; None when the switch has no pipeline (a fresh start).  ``timeout``:
        a deadline shorter than the client's (a probe of a switch reported stalled)."""
        request = GetPipeline(device_id=self.device_id, response_type=GetPipeline.COOKIE_ONLY)
        try:
            reply = self._stub.GetForwardingPipelineConfig(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise SwitchError(f"{self.address}: GetForwardingPipelineConfig: {describe(e)}") from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    # --- entities ------------------------------------------------------------------------------

    def write(self, updates: list[p4runtime_pb2.Update]) -> None:
        if not updates:
            return
        request = p4runtime_pb2.WriteRequest(device_id=self.device_id, election_id=self.election_id, updates=updates,
                                             atomicity=p4runtime_pb2.WriteRequest.CONTINUE_ON_ERROR)
        try:
            self._stub.Write(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise write_error(self.address, e, len(updates)) from None

    def read(self, entities: Iterable[p4runtime_pb2.Entity]) -> Iterator[p4runtime_pb2.Entity]:
        request = p4runtime_pb2.ReadRequest(device_id=self.device_id, entities=list(entities))
        try:
            for reply in self._stub.Read(request, timeout=self.timeout):
                yield from reply.entities
        except grpc.RpcError as e:
            raise SwitchError(f"{self.address}: Read: {describe(e)}") from None

    def _call(self, rpc, request, what: str):
        try:
            return rpc(request, timeout=self.timeout)
        except grpc.RpcError as e:
            raise SwitchError(f"{self.address}: {what}: {describe(e)}") from None


def port_status(message: any_pb2.Any) -> tuple[int, bool] | None:
    """(port, up) from the built-in target's port status (p4target/runtime/port_status.py); None
    for any other ``other`` message, which a client ignores."""
    body = struct_pb2.Struct()
    if not message.Unpack(body) or PORT_STATUS not in body.fields:
        return None
    fields = body.fields[PORT_STATUS].struct_value.fields
    if "port" not in fields or "up" not in fields:
        return None
    return int(fields["port"].number_value), fields["up"].bool_value


def describe(e: grpc.RpcError) -> str:
    code = e.code().name if hasattr(e, "code") and e.code() else "UNKNOWN"
    details = e.details() if hasattr(e, "details") else str(e)
    return f"{code} {details}"


def write_error(where: str, e: grpc.RpcError, count: int) -> WriteError:
    """A failed Write of ``count`` updates as WriteError: each update's code, the failed ones named."""
    codes = update_codes(e, count)
    failed = [f"#{i} {c}" for i, c in enumerate(codes) if c != "OK"]
    return WriteError(f"{where}: Write failed ({', '.join(failed) or describe(e)}): {describe(e)}", codes)


def update_codes(e: grpc.RpcError, count: int) -> list[str]:
    """Per-update status codes from the p4.v1.Error details of a failed Write (P4Runtime spec 12.3)."""
    for key, value in (e.trailing_metadata() or ()):
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            codes = []
            for detail in status.details:
                err = p4runtime_pb2.Error()
                detail.Unpack(err)
                codes.append(code_pb2.Code.Name(err.canonical_code))
            if len(codes) == count:
                return codes
    return [e.code().name] * count
