"""The p4_device_config a Tofino switch running Stratum takes, built from bf-p4c's output.

Stratum-bfrt loads a ``BfPipelineConfig`` protobuf (stratum/hal/lib/barefoot/bf.proto,
package ``stratum.hal.barefoot``, proto3)::

    message BfPipelineConfig {
      message Profile {
        string profile_name = 1;         // the pipeline's name
        bytes context = 2;               // context.json
        bytes binary = 3;                // tofino.bin
        repeated uint32 pipe_scope = 4;  // hardware pipes it runs on (packed)
      }
      string p4_name = 1;
      bytes bfruntime_info = 2;          // bf-rt.json
      repeated Profile profiles = 3;
    }

That is what Stratum's ``bf_pipeline_builder`` writes from the compiler's ``<program>.conf``;
we write the same message here so the controller needs no Stratum tools.  There is no protoc
(and no generated ``bf_pb2``) here, so the descriptor above is built at import time with
``descriptor_pb2`` in a private pool, and protobuf's own runtime encodes and decodes it
(``MESSAGE``).  The older PI packing that stratum-bf (not bfrt) also takes, little-endian
uint32 length before each of program name, tofino.bin and context.json, is ``legacy_config``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

PACKAGE = "stratum.hal.barefoot"


class TofinoConfigError(ValueError):
    """The compiler output is incomplete or not bf-p4c's, or the bytes are not a BfPipelineConfig."""


def _descriptor() -> descriptor_pb2.FileDescriptorProto:
    """bf.proto's BfPipelineConfig, field for field (names, numbers, types, labels)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="stratum/hal/lib/barefoot/bf.proto", package=PACKAGE,
                                             syntax="proto3")
    f = descriptor_pb2.FieldDescriptorProto
    top = fdp.message_type.add(name="BfPipelineConfig")
    profile = top.nested_type.add(name="Profile")
    for name, number, kind, label in (("profile_name", 1, f.TYPE_STRING, f.LABEL_OPTIONAL),
                                      ("context", 2, f.TYPE_BYTES, f.LABEL_OPTIONAL),
                                      ("binary", 3, f.TYPE_BYTES, f.LABEL_OPTIONAL),
                                      ("pipe_scope", 4, f.TYPE_UINT32, f.LABEL_REPEATED)):
        profile.field.add(name=name, number=number, type=kind, label=label)
    top.field.add(name="p4_name", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    top.field.add(name="bfruntime_info", number=2, type=f.TYPE_BYTES, label=f.LABEL_OPTIONAL)
    top.field.add(name="profiles", number=3, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                  type_name=f".{PACKAGE}.BfPipelineConfig.Profile")
    return fdp


_POOL = descriptor_pool.DescriptorPool()  # private: no clash with a generated bf_pb2 in the default pool
_POOL.Add(_descriptor())
MESSAGE = message_factory.MessageFactory(_POOL).GetPrototype(
    _POOL.FindMessageTypeByName(f"{PACKAGE}.BfPipelineConfig"))
"""The protobuf message class of ``stratum.hal.barefoot.BfPipelineConfig``."""


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

    def to_proto(self) -> message.Message:
        msg = MESSAGE(p4_name=self.p4_name, bfruntime_info=self.bfruntime_info)
        for p in self.profiles:
            msg.profiles.add(profile_name=p.name, context=p.context, binary=p.binary, pipe_scope=p.pipe_scope)
        return msg

    def serialize(self) -> bytes:
        """The bytes for P4Runtime's ``ForwardingPipelineConfig.p4_device_config``."""
        return self.to_proto().SerializeToString(deterministic=True)

    @classmethod
    def from_proto(cls, msg: message.Message) -> BfPipelineConfig:
        return cls(msg.p4_name, msg.bfruntime_info,
                   tuple(Profile(p.profile_name, p.context, p.binary, tuple(p.pipe_scope)) for p in msg.profiles))

    @classmethod
    def parse(cls, data: bytes) -> BfPipelineConfig:
        """The inverse of serialize (for checking what a switch was given)."""
        msg = MESSAGE()
        try:
            msg.ParseFromString(data)
        except message.DecodeError as err:
            raise TofinoConfigError(f"not a BfPipelineConfig: {err}") from None
        return cls.from_proto(msg)


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
