"""What ``p4_device_config`` holds for the built-in target: the P4 *source*, not a compiled
artefact, so the switch compiles exactly what the controller ships.

Format: UTF-8 JSON ``{"format": "p4target-source/1", "main": "prog.p4", "files": {path:
text}, "defines": {name: value}}``, where ``files`` holds the main program and every file it
``#include "..."``s (paths relative to the deepest folder holding them all, usually the main
file's; ``main`` is relative to the same folder, e.g. ``tofino/ina_tna.p4`` when that program
includes ``../headers.p4``; <system> includes come with the target).  Real BMv2 takes p4c's
JSON instead; the controller picks per target.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from p4.config.v1 import p4info_pb2

from ..executor.switch import Blueprint, Switch
from ..executor.tna_switch import blueprint_for
from ..frontend import CheckedProgram, P4Error, load_program
from ..p4info import build_p4info

FORMAT = "p4target-source/1"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


class DeviceConfigError(ValueError):
    """The blob is not a device config this target can use."""


def build_device_config(p4_path: str | Path, defines: dict[str, str] | None = None) -> bytes:
    main = Path(p4_path).resolve()
    found: dict[Path, str] = {}
    todo = [main]
    while todo:
        path = todo.pop()
        if path in found:
            continue
        found[path] = path.read_text()
        todo += [(path.parent / inc).resolve() for inc in _INCLUDE.findall(found[path])]
    # Relative to the folder that holds every file, so "../x.p4" includes still resolve when unpacked.
    root = Path(os.path.commonpath([p.parent for p in found]))
    files = {p.relative_to(root).as_posix(): text for p, text in found.items()}
    return json.dumps({"format": FORMAT, "main": main.relative_to(root).as_posix(), "files": files,
                       "defines": defines or {}}).encode()


@contextmanager
def _unpacked(blob: bytes) -> Iterator[tuple[Path, dict[str, str]]]:
    """Write the shipped files to a temporary folder; yield the main file and the defines.

    A P4Error raised inside becomes a DeviceConfigError, rendered while the files still
    exist (it quotes the offending line) and with paths as the controller named them.
    """
    try:
        config = json.loads(blob.decode())
        fmt = config.get("format")
    except (ValueError, AttributeError) as err:  # not UTF-8, not JSON, not an object
        raise DeviceConfigError(f"p4_device_config is not a {FORMAT} JSON document: {err}") from None
    if fmt != FORMAT:
        raise DeviceConfigError(f"p4_device_config format is not {FORMAT!r} (a BMv2 JSON is not accepted)")
    try:
        main, files, defines = config["main"], dict(config["files"]), dict(config.get("defines", {}))
    except (KeyError, TypeError, ValueError) as err:
        raise DeviceConfigError(f"p4_device_config is not a {FORMAT} JSON document: {err!r}") from None
    with tempfile.TemporaryDirectory(prefix="p4target-") as tmp:
        for rel, text in files.items():
            parts = PurePosixPath(rel).parts
            if not parts or ".." in parts or PurePosixPath(rel).is_absolute():
                raise DeviceConfigError(f"p4_device_config: bad file path {rel!r}")
            dest = Path(tmp, *parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(str(text))
        if main not in files:
            raise DeviceConfigError(f"p4_device_config: main file {main!r} is not among the files")
        try:
            yield Path(tmp, main), {str(k): str(v) for k, v in defines.items()}
        except P4Error as err:
            text = err.render()
            for prefix in {tmp, os.path.realpath(tmp)}:
                text = text.replace(prefix + os.sep, "")
            raise DeviceConfigError("the P4 program does not compile:\n" + text) from None


def load_device_config(blob: bytes) -> tuple[CheckedProgram, p4info_pb2.P4Info]:
    """Compile the shipped source and derive its P4Info (while the files exist: P4Info names
    some keys as written in the source).  Raises DeviceConfigError."""
    with _unpacked(blob) as (main, defines):
        prog = load_program(main, defines)
        return prog, build_p4info(prog)


def compile_device_config(blob: bytes) -> tuple[Switch, p4info_pb2.P4Info]:
    """As ``load_device_config``, down to the running switch (whose code generation can also
    reject a program).  Raises DeviceConfigError."""
    blueprint, p4info = _compile(blob)
    return blueprint.switch(), p4info  # type: ignore[return-value]


def _compile(blob: bytes) -> tuple[Blueprint, p4info_pb2.P4Info]:
    with _unpacked(blob) as (main, defines):
        prog = load_program(main, defines)
        return blueprint_for(prog), build_p4info(prog)


class DeviceConfigCache:
    """``compile_device_config`` that compiles each distinct blob once: a simulated fabric starts
    hundreds of switches of one program, and parsing, code generation and the native image were
    most of a start.

    Kept per blob: the checked program and its P4Info, and the program's ``Blueprint`` (its
    generated code and native image), which building a switch reads and never changes
    (tests/test_switch_cache.py checks that).  Every call still returns a new switch (its own
    tables, registers, counters, meters, multicast groups and native state: a copy of the
    blueprint's); the P4Info is the cached one, which callers only read (a copy per switch, in
    pure-Python protobuf, was half of a 320-switch fabric's start).  A blob that does not compile
    is not kept: it fails again, with the same DeviceConfigError."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.parsed = 0  # blobs parsed, for whoever wants to see the cache work
        self._programs: OrderedDict[bytes, tuple[Blueprint, p4info_pb2.P4Info]] = OrderedDict()
        self._lock = threading.Lock()  # servers of one process may share it across gRPC threads

    def __call__(self, blob: bytes) -> tuple[Switch, p4info_pb2.P4Info]:
        key = hashlib.sha256(blob).digest()
        with self._lock:
            found = self._programs.get(key)
            if found is not None:
                self._programs.move_to_end(key)
        if found is None:
            found = _compile(blob)
            with self._lock:
                self.parsed += 1
                self._programs[key] = found
                while len(self._programs) > self.size:
                    self._programs.popitem(last=False)
        blueprint, p4info = found
        return blueprint.switch(), p4info  # type: ignore[return-value]
