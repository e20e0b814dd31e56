"""The native fast path: a program's generated module (``ir.Module``) lowered to C (lower.py), built with the
system compiler (p4target/cbuild.py), and run per packet with the state the control plane sees
(engine.py).  The Python executor stays the reference: a program the lowering does not cover,
a missing compiler, or ``P4TARGET_NATIVE=0`` runs it in Python, as before.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import cbuild  # not `build` by name: the submodule build.py (the old path) would shadow it
from .engine import STAT_NAMES, NativeFork, NativePipeline
from .lower import Image, Unsupported, lower_image

log = logging.getLogger(__name__)

__all__ = ["STAT_NAMES", "NativeFork", "NativeImage", "NativePipeline", "enabled", "c_source", "image"]


def enabled() -> bool:
    """``P4TARGET_NATIVE=0`` runs every program in Python (the reference executor)."""
    return os.environ.get("P4TARGET_NATIVE", "1") != "0"


@dataclass(frozen=True)
class NativeImage:
    """A program's native path, made once for every switch of it: the C, its lowering (the names
    of the objects its arrays stand for) and the loaded library.  Each switch gets its own
    pipeline (``pipeline``): its own C context, bound to its own tables, registers and counters."""

    source: str
    lowering: Image
    lib: ctypes.CDLL

    def pipeline(self, gen: Any, multicast_groups: dict[int, list[tuple[int, int]]],
                 make_output: Callable[[int, bytes], Any], stat_names: tuple[str, ...]) -> NativePipeline:
        pipeline = NativePipeline(self.lowering.bind(gen.namespace), self.lib, multicast_groups, make_output,
                                  stat_names)
        pipeline.source = self.source
        return pipeline


def c_source(gen: Any, arch: str, defines: dict[str, Any]) -> tuple[str, Image]:
    """The whole C translation unit for a generated program: the lowered functions, then the
    architecture's packet path (v1model.h or tna.h) configured by ``defines``."""
    if gen.module is None:
        raise Unsupported("a program generated without its module (Generated.module)")
    lowering = lower_image(gen.module)
    lines = [lowering.source]
    for name, value in defines.items():
        if isinstance(value, (list, tuple)):
            lines.append(f"static const int {name}[] = {{{', '.join(str(int(v)) for v in value) or '0'}}};")
        else:
            lines.append(f"#define {name} {int(value)}")
    lines.append(f"#define MAX_HEADER_BYTES {lowering.max_header_bytes}")
    lines.append(f'#include "{arch}.h"')
    return "\n".join(lines) + "\n", lowering


def image(gen: Any, arch: str, defines: dict[str, Any]) -> tuple[NativeImage | None, str]:
    """The native image of ``gen``'s program, or None and why it runs in Python."""
    if not enabled():
        return None, "P4TARGET_NATIVE=0"
    try:
        source, lowering = c_source(gen, arch, defines)
    except Unsupported as e:
        log.info("this program runs in Python: the native path does not cover %s", e)
        return None, f"not covered by the native path: {e}"
    try:
        lib = cbuild.build(source, cbuild.pipeline_flags(source))
    except cbuild.BuildError as e:
        log.warning("this program runs in Python: %s", e)
        return None, str(e)
    return NativeImage(source, lowering, lib), "native"
