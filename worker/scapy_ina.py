"""Scapy layers for the aggregation header, generated from p4src/protocol.p4 (never re-typed).

``INA`` is ina_t with its fields taken from ``protocol.load().fields``; ``InaValues`` is the
int32 values that follow it (as many as the payload holds); ``ina_values`` reads them as numpy.
"""

from __future__ import annotations

import numpy as np
from scapy.fields import BitField, FieldListField, SignedByteField, SignedIntField, SignedShortField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from worker import protocol

P = protocol.load()
_SIGNED = {8: SignedByteField, 16: SignedShortField, 32: SignedIntField}


def _field(name: str, width: int, signed: bool):
    if signed:
        if width not in _SIGNED:
            raise TypeError(f"ina_t.{name}: no scapy field for int<{width}>")
        return _SIGNED[width](name, 0)
    return BitField(name, 0, width)


class INA(Packet):
    name = "INA"
    fields_desc = [_field(*f) for f in P.fields]


class InaValues(Packet):
    name = "InaValues"
    fields_desc = [FieldListField("values", [], SignedIntField("value", 0), max_count=1 << 14)]


def ina_values(pkt: Packet) -> np.ndarray:
    """The int32 values after the INA header of a dissected packet."""
    return np.frombuffer(bytes(pkt[INA].payload), dtype=">i4").astype(np.int32)


bind_layers(UDP, INA, dport=P.INA_UDP_PORT)
bind_layers(UDP, INA, sport=P.INA_UDP_PORT)
bind_layers(INA, InaValues)
