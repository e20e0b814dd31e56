"""controller/tofino_config.py on a synthetic bf-p4c output folder (no Tofino compiler here), decoded by
protobuf's runtime and by the wire bytes bf.proto implies."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from google.protobuf import descriptor

from controller.tofino_config import (
    MESSAGE,
    BfPipelineConfig,
    Profile,
    TofinoConfigError,
    from_compiler_output,
    legacy_config,
)


def fake_output(tmp: Path, pipes: tuple[int, ...] = (0, 1, 2, 3)) -> Path:
    """The layout bf-p4c writes: <prog>.conf, bf-rt.json, <pipe>/context.json and <pipe>/tofino.bin."""
    (tmp / "pipe").mkdir()
    (tmp / "bf-rt.json").write_text('{"tables": []}')
    (tmp / "pipe" / "context.json").write_text('{"program_name": "ina_tna"}')
    (tmp / "pipe" / "tofino.bin").write_bytes(bytes(range(256)) * 3)
    conf = {"chip_list": [{"chip_family": "tofino", "instance": 0}],
            "p4_devices": [{"device-id": 0, "p4_programs": [{
                "program-name": "ina_tna", "bfrt-config": "bf-rt.json",
                "p4_pipelines": [{"p4_pipeline_name": "pipe", "context": "pipe/context.json",
                                  "config": "pipe/tofino.bin", "pipe_scope": list(pipes)}]}]}]}
    path = tmp / "ina_tna.conf"
    path.write_text(json.dumps(conf))
    return path


def test_bf_pipeline_config_decodes_with_protobuf(tmp_path):
    cfg = from_compiler_output(fake_output(tmp_path))
    msg = MESSAGE.FromString(cfg.serialize())  # protobuf's decoder, not ours
    assert msg.p4_name == "ina_tna" and msg.bfruntime_info == b'{"tables": []}'
    (p,) = msg.profiles
    assert (p.profile_name, list(p.pipe_scope)) == ("pipe", [0, 1, 2, 3])
    assert p.binary == (tmp_path / "pipe" / "tofino.bin").read_bytes()
    assert p.context == (tmp_path / "pipe" / "context.json").read_bytes()
    assert BfPipelineConfig.parse(msg.SerializeToString()) == cfg


def test_message_is_stratums_bf_proto():
    """stratum/hal/lib/barefoot/bf.proto: names, numbers, types and labels of BfPipelineConfig."""
    fd = descriptor.FieldDescriptor
    top = MESSAGE.DESCRIPTOR
    assert top.full_name == "stratum.hal.barefoot.BfPipelineConfig" and top.file.syntax == "proto3"
    assert [(f.name, f.number, f.type, f.label) for f in top.fields] == [
        ("p4_name", 1, fd.TYPE_STRING, fd.LABEL_OPTIONAL),
        ("bfruntime_info", 2, fd.TYPE_BYTES, fd.LABEL_OPTIONAL),
        ("profiles", 3, fd.TYPE_MESSAGE, fd.LABEL_REPEATED)]
    profile = top.fields_by_name["profiles"].message_type
    assert profile.full_name == "stratum.hal.barefoot.BfPipelineConfig.Profile"
    assert [(f.name, f.number, f.type, f.label) for f in profile.fields] == [
        ("profile_name", 1, fd.TYPE_STRING, fd.LABEL_OPTIONAL),
        ("context", 2, fd.TYPE_BYTES, fd.LABEL_OPTIONAL),
        ("binary", 3, fd.TYPE_BYTES, fd.LABEL_OPTIONAL),
        ("pipe_scope", 4, fd.TYPE_UINT32, fd.LABEL_REPEATED)]


def test_bytes_that_are_not_a_config_are_refused():
    with pytest.raises(TofinoConfigError, match="not a BfPipelineConfig"):
        BfPipelineConfig.parse(b"\x0a\x05ab")  # a string field cut short


def test_wire_bytes_are_bf_proto():
    """Field numbers and wire types of bf.proto, byte for byte: what protoc's encoder writes."""
    cfg = BfPipelineConfig("p", b"R", (Profile("x", b"C", b"B", (1, 300)),))
    profile = b"\x0a\x01x" + b"\x12\x01C" + b"\x1a\x01B" + b"\x22\x03\x01\xac\x02"
    assert cfg.serialize() == b"\x0a\x01p" + b"\x12\x01R" + b"\x1a" + bytes([len(profile)]) + profile


def test_legacy_packing():
    blob = legacy_config("ina_tna", b"BIN!", b"{}")
    assert blob == struct.pack("<I", 7) + b"ina_tna" + struct.pack("<I", 4) + b"BIN!" + struct.pack("<I", 2) + b"{}"


def test_incomplete_output_is_refused(tmp_path):
    conf = fake_output(tmp_path)
    (tmp_path / "pipe" / "tofino.bin").unlink()
    with pytest.raises(TofinoConfigError, match="tofino.bin"):
        from_compiler_output(conf)
    conf.write_text("{}")
    with pytest.raises(TofinoConfigError, match="not a bf-p4c"):
        from_compiler_output(conf)
