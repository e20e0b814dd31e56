"""The aggregation pipeline (p4src/ina.p4, or the TNA program) as each target takes it, and its sizes.

The built-in target takes the P4 source (its own device config) of either program
(``controller.programs``); real BMv2 takes p4c's JSON, so for "bmv2" ina.p4 is compiled with
``p4c-bm2-ss``.  Pool and job sizes are read
back from the P4Info (register and counter sizes), never re-typed here.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from controller import programs
from p4target.runtime.device_config import build_device_config, load_device_config
from worker import protocol

INA_P4 = programs.V1MODEL.source  # p4src/ina.p4, wherever the p4src package is installed


class PipelineError(RuntimeError):
    """The program could not be built for a target."""


@dataclass(frozen=True)
class PipelineOptions:
    """Compile-time knobs of ina.p4 (None: the program's default; for values, the most it takes)."""

    values: int | None = None
    udp_port: int | None = None
    pool_slots: int | None = None
    max_jobs: int | None = None

    def defines(self) -> dict[str, str]:
        named = {"INA_VALUES": self.values, "INA_UDP_PORT_NUMBER": self.udp_port,
                 "INA_POOL_SLOTS": self.pool_slots, "INA_MAX_JOBS": self.max_jobs}
        return {k: str(v) for k, v in named.items() if v is not None}


@dataclass(frozen=True)
class Pipeline:
    options: PipelineOptions
    config: p4runtime_pb2.ForwardingPipelineConfig  # p4info, device config and cookie
    protocol: protocol.Protocol

    @property
    def p4info(self) -> p4info_pb2.P4Info:
        return self.config.p4info

    @property
    def program(self) -> programs.Program:
        """Which program this is, from the P4Info itself: the names every entry is written with."""
        return programs.for_p4info(self.p4info)

    @property
    def pool_slots(self) -> int:
        return self.program.pool_slots(self.p4info)

    @property
    def max_jobs(self) -> int:
        return self.program.job_stat_cells(self.p4info) // self.protocol.JOB_STAT_COUNT


DEFAULT_OPTIONS = PipelineOptions()


@functools.cache
def build(target: str, options: PipelineOptions = DEFAULT_OPTIONS, arch: str = "v1model") -> Pipeline:
    """The program of ``arch`` ("v1model": ina.p4, "tna": the Tofino program) built for ``target``."""
    defines = options.defines()
    try:
        program = programs.by_arch(arch)
    except programs.ProgramError as e:
        raise PipelineError(str(e)) from None
    if program.arch != "v1model" and target == "bmv2":
        raise PipelineError(f"BMv2 runs v1model programs only, not {program.source.name} ({program.arch}): "
                            f"use the built-in target")
    if target == "builtin":
        blob = build_device_config(program.source, defines)
        _, p4info = load_device_config(blob)
    elif target == "bmv2":
        blob, p4info = _p4c(defines, program.source)
    else:
        raise PipelineError(f"unknown target {target!r}")
    cookie = int.from_bytes(hashlib.sha256(blob + p4info.SerializeToString()).digest()[:8], "big")
    config = p4runtime_pb2.ForwardingPipelineConfig(p4info=p4info, p4_device_config=blob)
    config.cookie.cookie = cookie
    values = program.max_values if options.values is None else options.values
    return Pipeline(options, config, protocol.load(values, options.udp_port))


def _p4c(defines: dict[str, str], source: Path = INA_P4) -> tuple[bytes, p4info_pb2.P4Info]:
    compiler = shutil.which("p4c-bm2-ss")
    if compiler is None:
        raise PipelineError(f"target bmv2 needs p4c-bm2-ss on PATH to compile {source}")
    with tempfile.TemporaryDirectory(prefix="ina-p4c-") as tmp:
        out, info = Path(tmp) / "ina.json", Path(tmp) / "ina.p4info.txt"
        cmd = [compiler, "--arch", "v1model", *(f"-D{k}={v}" for k, v in defines.items()),
               "-o", str(out), "--p4runtime-files", str(info), str(source)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise PipelineError(f"{' '.join(cmd)} failed:\n{run.stderr}")
        return out.read_bytes(), text_format.Parse(info.read_text(), p4info_pb2.P4Info())
