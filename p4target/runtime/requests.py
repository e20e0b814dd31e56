"""What every P4Runtime entity module shares: the update kinds, the gRPC error a broken rule
raises, P4Runtime's integer bytestrings, and the rules of a default entry."""

from __future__ import annotations

from typing import Any

import grpc
from p4.v1 import p4runtime_pb2

INSERT, MODIFY, DELETE = p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY, p4runtime_pb2.Update.DELETE
PORT_WIDTH = 9  # v1model's bit<9> ports


class RpcError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def rpc_error(code: str, message: str) -> RpcError:
    return RpcError(getattr(grpc.StatusCode, code), message)


def decode_int(data: bytes, width: int, what: str) -> int:
    """A P4Runtime bytestring: canonical or zero-padded, big-endian; must fit ``width`` bits."""
    if not data:
        raise rpc_error("INVALID_ARGUMENT", f"{what}: empty bytestring")
    value = int.from_bytes(data, "big")
    if value >> width:
        raise rpc_error("OUT_OF_RANGE", f"{what}: value {value:#x} does not fit in {width} bits")
    return value


def encode_int(value: int) -> bytes:
    """The canonical (shortest) bytestring, as P4Runtime 1.4 servers return."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def check_default_entry(kind: int, table: Any, entry: p4runtime_pb2.TableEntry) -> None:
    """A default entry can only be modified, names no match and no priority, and cannot reset a const
    default action (``table``: its ``name`` and ``default_is_const``)."""
    if kind != MODIFY:
        raise rpc_error("INVALID_ARGUMENT", f"{table.name}: the default entry can only be modified")
    if entry.match or entry.priority:
        raise rpc_error("INVALID_ARGUMENT", f"{table.name}: a default entry has no match or priority")
    if not entry.HasField("action") and table.default_is_const:
        raise rpc_error("PERMISSION_DENIED", f"{table.name} has a const default action")
