"""The p4_device_config a Tofino switch running Stratum takes, built from bf-p4c's output.

Stratum-bfrt loads a ``BfPipelineConfig`` protobuf (stratum/hal/lib/barefoot/bf.proto):
``p4_name`` (1), ``bfruntime_info`` (2, bf-rt.json) and one ``Profile`` (3) per pipeline:
``profile_name`` (1), ``context`` (2, context.json), ``binary`` (3, tofino.bin),
``pipe_scope`` (4, packed uint32).  That is what Stratum's ``bf_pipeline_builder`` writes from
the compiler's ``<program>.conf``; we write the same bytes here so the controller needs no
Stratum tools.  The older PI packing that stratum-bf (not bfrt) also takes, little-endian
uint32 length before each of program name, tofino.bin and context.json, is ``legacy_config``.
The message is encoded by hand (four fields) rather than by generated code we do not ship.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path


class TofinoConfigError(ValueError):
    """The compiler output is incomplete or not bf-p4c's."""


@dataclass(frozen=True)
class Profile:
    """One pipeline of the program: its compiled binary and context, the pipes it runs on."""

    name: str
    context: bytes
    binary: bytes
    pipe_scope: tuple[int, ...] = ()


@dataclass(frozen=True)
class BfPipelineConfig:
    p4_name: str
    bfruntime_info: bytes
    profiles: tuple[Profile, ...] = field(default_factory=tuple)

    def serialize(self) -> bytes:
        out = _bytes_field(1, self.p4_name.encode()) + _bytes_field(2, self.bfruntime_info)
        for p in self.profiles:
            body = _bytes_field(1, p.name.encode()) + _bytes_field(2, p.context) + _bytes_field(3, p.binary)
            if p.pipe_scope:
                body += _bytes_field(4, b"".join(_varint(s) for s in p.pipe_scope))
            out += _bytes_field(3, body)
        return out

    @classmethod
    def parse(cls, data: bytes) -> BfPipelineConfig:
        """The inverse of serialize (for tests and for checking what a switch was given)."""
        top = _fields(data)
        profiles = []
        for raw in top.get(3, []):
            f = _fields(raw)
            scope = b"".join(f.get(4, []))
            pipes, pos = [], 0
            while pos < len(scope):
                value, pos = _read_varint(scope, pos)
                pipes.append(value)
            profiles.append(Profile(_one(f, 1).decode(), _one(f, 2), _one(f, 3), tuple(pipes)))
        return cls(_one(top, 1).decode(), _one(top, 2), tuple(profiles))


def from_compiler_output(conf: str | Path) -> BfPipelineConfig:
    """Read bf-p4c's ``<program>.conf`` and the files it names (paths relative to its folder)."""
    conf = Path(conf)
    try:
        doc = json.loads(conf.read_text())
        program = doc["p4_devices"][0]["p4_programs"][0]
        name, bfrt, pipelines = program["program-name"], program["bfrt-config"], program["p4_pipelines"]
    except (OSError, ValueError, KeyError, IndexError, TypeError) as err:
        raise TofinoConfigError(f"{conf}: not a bf-p4c .conf file ({err!r})") from None
    if not pipelines:
        raise TofinoConfigError(f"{conf}: program {name!r} has no pipelines")
    profiles = tuple(Profile(p["p4_pipeline_name"], _read(conf, p["context"]), _read(conf, p["config"]),
                             tuple(int(s) for s in p.get("pipe_scope", ()))) for p in pipelines)
    return BfPipelineConfig(name, _read(conf, bfrt), profiles)


def legacy_config(p4_name: str, binary: bytes, context: bytes) -> bytes:
    """PI's packing for stratum-bf: each of name, tofino.bin, context.json after its LE uint32 length."""
    return b"".join(struct.pack("<I", len(b)) + b for b in (p4_name.encode(), binary, context))


def _read(conf: Path, rel: str) -> bytes:
    path = Path(rel) if Path(rel).is_absolute() else conf.parent / rel
    try:
        return path.read_bytes()
    except OSError as err:
        raise TofinoConfigError(f"{conf}: {rel}: {err.strerror}") from None


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def _bytes_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2); proto3 leaves empty ones out."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload if payload else b""


def _fields(data: bytes) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        if key & 7 != 2:
            raise TofinoConfigError(f"unexpected wire type {key & 7} for field {key >> 3}")
        n, pos = _read_varint(data, pos)
        out.setdefault(key >> 3, []).append(data[pos:pos + n])
        pos += n
    return out


def _one(f: dict[int, list[bytes]], number: int) -> bytes:
    return f.get(number, [b""])[-1]
