"""controller/tofino_config.py on a synthetic bf-p4c output folder (no Tofino compiler here)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from controller.tofino_config import BfPipelineConfig, Profile, TofinoConfigError, from_compiler_output, legacy_config


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


def test_bf_pipeline_config_round_trip(tmp_path):
    cfg = from_compiler_output(fake_output(tmp_path))
    blob = cfg.serialize()
    back = BfPipelineConfig.parse(blob)
    assert back == cfg
    assert back.p4_name == "ina_tna" and back.bfruntime_info == b'{"tables": []}'
    (p,) = back.profiles
    assert (p.name, p.pipe_scope) == ("pipe", (0, 1, 2, 3))
    assert p.binary == (tmp_path / "pipe" / "tofino.bin").read_bytes()
    assert p.context == (tmp_path / "pipe" / "context.json").read_bytes()


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
