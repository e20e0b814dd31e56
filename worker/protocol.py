"""The aggregation wire protocol, as read from p4src/protocol.p4 (its one definition).

The header layout, UDP port, message types, flags and telemetry indexes all come from the P4
file, so Python never re-types them: worker/gen_wire.py reads it with the built-in target's
frontend and writes worker/wire_facts.py, which this module reads, so a worker runs with no
frontend (no lark, no cpp).  ``fields`` gives the header as (name, bits, signed) in wire
order; ``pack``/``unpack`` use it.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import p4src
from worker import wire_facts

PROTOCOL_P4 = p4src.path("protocol.p4")  # inside the installed package, or the checkout's p4src/
ETH_IP_UDP = 14 + 20 + 8  # Ethernet, IPv4 (no options) and UDP headers in front of every payload


@dataclass(frozen=True)
class Protocol:
    """Everything about the wire format for one compile-time configuration."""

    constants: dict[str, int]
    fields: tuple[tuple[str, int, bool], ...]  # ina_t: (name, width in bits, signed)

    def __getattr__(self, name: str) -> int:
        try:
            return self.constants[name]
        except KeyError:
            raise AttributeError(name) from None

    @functools.cached_property
    def header_bytes(self) -> int:
        return sum(w for _, w, _ in self.fields) // 8

    @functools.cached_property
    def layout(self) -> dict[str, tuple[int, int, bool]]:
        """Each field's (shift in the header read as one big-endian integer, width, signed)."""
        out, shift = {}, self.header_bytes * 8
        for name, width, signed in self.fields:
            shift -= width
            out[name] = (shift, width, signed)
        return out

    def field(self, word: int, name: str) -> int:
        """One field's value from the header read as one big-endian integer (signed fields as such)."""
        shift, width, signed = self.layout[name]
        v = (word >> shift) & ((1 << width) - 1)
        return v - (1 << width) if signed and v >> (width - 1) else v

    @functools.cached_property
    def values(self) -> int:
        return self.constants["INA_VALUE_COUNT"]

    @functools.cached_property
    def packet_bytes(self) -> int:
        """UDP payload size: header plus values."""
        return self.header_bytes + 4 * self.values

    @property
    def frame_bytes(self) -> int:
        """One aggregation packet on the wire: Ethernet, IPv4 and UDP headers, then the payload."""
        return ETH_IP_UDP + self.packet_bytes

    @property
    def wire_factor(self) -> float:
        """Wire bytes per byte of int32 values: what a tensor costs on a link, headers included."""
        return self.frame_bytes / (4 * self.values)

    def pack(self, values: np.ndarray | None = None, **fields: int) -> bytes:
        """One UDP payload; unnamed header fields are 0, values default to zeros."""
        unknown = set(fields) - {n for n, _, _ in self.fields}
        if unknown:
            raise ValueError(f"ina_t has no field(s) {sorted(unknown)}")
        word = 0
        for name, width, signed in self.fields:
            v = int(fields.get(name, 0))
            lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            if not lo <= v <= hi:
                raise ValueError(f"ina_t.{name}={v} does not fit in {width} {'signed ' if signed else ''}bits")
            word = (word << width) | (v & ((1 << width) - 1))
        head = word.to_bytes(self.header_bytes, "big")
        if values is None:
            values = np.zeros(self.values, dtype=np.int32)
        values = np.asarray(values)
        if values.shape != (self.values,) or values.dtype != np.int32:
            raise ValueError(f"values must be int32 of shape ({self.values},), got {values.dtype} {values.shape}")
        return head + values.astype(">i4").tobytes()

    def pack_headers(self, n: int, **columns: np.ndarray | int) -> np.ndarray:
        """n headers at once, as an (n, header_bytes) uint8 array: each field a column of n values
        (or one value for all); unnamed fields are 0.  Values are taken modulo 2**width, so a
        signed field's negative values land as their two's complement."""
        if self.header_bytes > 16:
            raise ValueError("pack_headers builds headers of at most 128 bits")
        unknown = set(columns) - set(self.layout)
        if unknown:
            raise ValueError(f"ina_t has no field(s) {sorted(unknown)}")
        halves = [np.zeros(n, np.uint64), np.zeros(n, np.uint64)]  # bits 64..127 and 0..63 of the header
        bits = self.header_bytes * 8
        for name, column in columns.items():
            shift, width, _ = self.layout[name]
            shift += 128 - bits  # the header's first bit is bit 127
            v = (np.asarray(column, np.int64) & ((1 << width) - 1)).astype(np.uint64)
            for half, base in ((0, 64), (1, 0)):
                s = shift - base
                if s >= 64 or s + width <= 0:
                    continue
                halves[half] |= np.left_shift(v, np.uint64(s)) if s >= 0 else np.right_shift(v, np.uint64(-s))
        wire = np.empty((n, 2), ">u8")
        wire[:, 0], wire[:, 1] = halves
        return wire.view(np.uint8)[:, :self.header_bytes]

    def field_bytes(self, name: str) -> tuple[int, int] | None:
        """(offset, length) of a field that fills whole bytes of 1, 2, 4 or 8 (else None): such a field
        reads as a column straight from the bytes (``field_at``)."""
        shift, width, _ = self.layout[name]
        top = self.header_bytes * 8 - shift - width
        if top % 8 or width not in (8, 16, 32, 64):
            return None
        return top // 8, width // 8

    def field_at(self, name: str) -> tuple[int, str]:
        """Where a whole-byte field sits in a header, as (offset, big-endian numpy dtype), for ``column``."""
        where = self.field_bytes(name)
        if where is None:
            raise ValueError(f"ina_t.{name} is not whole bytes: it cannot be read as a column of the header bytes")
        offset, size = where
        return offset, f">{'i' if self.layout[name][2] else 'u'}{size}"

    @staticmethod
    def column(headers: np.ndarray, at: tuple[int, str]) -> np.ndarray:
        """One whole-byte field (``field_at``) of n headers, an (n, >= header_bytes) uint8 array: a view."""
        offset, dtype = at
        return headers[:, offset:offset + np.dtype(dtype).itemsize].view(dtype)[:, 0]

    def unpack(self, payload: bytes) -> tuple[dict[str, int], np.ndarray]:
        if len(payload) < self.packet_bytes:
            raise ValueError(f"payload of {len(payload)} bytes is shorter than {self.packet_bytes}")
        word = int.from_bytes(payload[:self.header_bytes], "big")
        out = {name: self.field(word, name) for name, _, _ in self.fields}
        values = np.frombuffer(payload, dtype=">i4", count=self.values, offset=self.header_bytes).astype(np.int32)
        return out, values


@functools.cache
def default_values(source: Path = PROTOCOL_P4) -> int:
    """INA_VALUES where none is given, as ``source`` (protocol.p4, or a program's own file) defines it."""
    if Path(source) == PROTOCOL_P4:
        return wire_facts.CONSTANTS["INA_VALUE_COUNT"]
    from p4target.frontend import load_declarations  # another program's file: only the controller asks

    return load_declarations(source).constants["INA_VALUE_COUNT"]


def _knob(knob: str, given: object) -> tuple[str, int]:
    """The constant ``-Dknob=given`` sets and its value; a clear error for a value protocol.p4 does not take."""
    constant, lowest, highest = wire_facts.DEFINES[knob]
    try:
        value = None if isinstance(given, bool) else operator.index(given)
    except TypeError:
        value = None
    if value is None or not lowest <= value <= highest:
        raise ValueError(f"{knob} must be between {lowest} and {highest}, not {given!r} (p4src/protocol.p4)")
    return constant, value


@functools.cache
def load(values: int | None = None, udp_port: int | None = None) -> Protocol:
    """The protocol for ``-DINA_VALUES=values`` (None: protocol.p4's default, 256) and
    ``-DINA_UDP_PORT_NUMBER=udp_port``: what the frontend reads from protocol.p4 with these, from
    the generated facts.  A value out of range is a ValueError naming the knob (a port past bit<16>
    too, which the frontend would wrap)."""
    constants = dict(wire_facts.CONSTANTS)
    for knob, given in (("INA_VALUES", values), ("INA_UDP_PORT_NUMBER", udp_port)):
        if given is not None:
            constant, value = _knob(knob, given)
            constants[constant] = value
    return Protocol(constants, wire_facts.FIELDS)
