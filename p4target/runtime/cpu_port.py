"""Packet-in/packet-out framing: the ``@controller_header`` metadata travels on the CPU port
as a header in front of the frame, as BMv2 does it; P4Runtime carries it as fields."""

from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from .requests import decode_int, encode_int, rpc_error


def _layout(meta: p4info_pb2.ControllerPacketMetadata
            ) -> tuple[list[p4info_pb2.ControllerPacketMetadata.Metadata], int]:
    fields = list(meta.metadata)
    total = sum(f.bitwidth for f in fields)
    return fields, (total + 7) // 8


def packet_out_frame(meta: p4info_pb2.ControllerPacketMetadata | None, packet: p4runtime_pb2.PacketOut) -> bytes:
    """The frame the switch sees on its CPU port for a PacketOut."""
    if meta is None:
        if packet.metadata:
            raise rpc_error("INVALID_ARGUMENT", "the program declares no packet_out controller header")
        return packet.payload
    fields, nbytes = _layout(meta)
    given = {m.metadata_id: m.value for m in packet.metadata}
    unknown = set(given) - {f.id for f in fields}
    if unknown:
        raise rpc_error("INVALID_ARGUMENT", f"packet_out has no metadata {sorted(unknown)}")
    value = 0
    for f in fields:
        v = decode_int(given[f.id], f.bitwidth, f"packet_out {f.name}") if f.id in given else 0
        value = (value << f.bitwidth) | v
    value <<= nbytes * 8 - sum(f.bitwidth for f in fields)
    return value.to_bytes(nbytes, "big") + packet.payload


def packet_in_message(meta: p4info_pb2.ControllerPacketMetadata | None, frame: bytes) -> p4runtime_pb2.PacketIn:
    """Split what the program sent to the CPU port into metadata and payload."""
    if meta is None:
        return p4runtime_pb2.PacketIn(payload=frame)
    fields, nbytes = _layout(meta)
    if len(frame) < nbytes:
        raise rpc_error("INVALID_ARGUMENT", "packet to the CPU port is shorter than its packet_in header")
    shift = nbytes * 8
    header = int.from_bytes(frame[:nbytes], "big")
    msg = p4runtime_pb2.PacketIn(payload=frame[nbytes:])
    for f in fields:
        shift -= f.bitwidth
        msg.metadata.add(metadata_id=f.id, value=encode_int((header >> shift) & ((1 << f.bitwidth) - 1)))
    return msg
