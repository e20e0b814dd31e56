"""The native fast path: a program's generated Python lowered to C (lower.py), built with the
system compiler (build.py), and run per packet with the state the control plane sees
(engine.py).  The Python executor stays the reference: a program the lowering does not cover,
a missing compiler, or ``P4TARGET_NATIVE=0`` runs it in Python, as before.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from .build import BuildError, build
from .engine import STAT_NAMES, NativePipeline
from .lower import Lowered, Unsupported, lower

log = logging.getLogger(__name__)

__all__ = ["STAT_NAMES", "NativePipeline", "attach", "enabled", "c_source"]


def enabled() -> bool:
    """``P4TARGET_NATIVE=0`` runs every program in Python (the reference executor)."""
    return os.environ.get("P4TARGET_NATIVE", "1") != "0"


def c_source(gen: Any, arch: str, defines: dict[str, Any]) -> tuple[str, Lowered]:
    """The whole C translation unit for a generated program: the lowered functions, then the
    architecture's packet path (v1model.h or tna.h) configured by ``defines``."""
    lowered = lower(gen.source, gen.namespace, gen.template)
    lines = [lowered.source]
    for name, value in defines.items():
        if isinstance(value, (list, tuple)):
            lines.append(f"static const int {name}[] = {{{', '.join(str(int(v)) for v in value) or '0'}}};")
        else:
            lines.append(f"#define {name} {int(value)}")
    lines.append(f"#define MAX_HEADER_BYTES {lowered.max_header_bytes}")
    lines.append(f'#include "{arch}.h"')
    return "\n".join(lines) + "\n", lowered


def attach(gen: Any, arch: str, defines: dict[str, Any], multicast_groups: dict[int, list[tuple[int, int]]],
           make_output: Callable[[int, bytes], Any], stat_names: tuple[str, ...]) -> tuple[NativePipeline | None, str]:
    """The native pipeline for ``gen``, or None and why it runs in Python."""
    if not enabled():
        return None, "P4TARGET_NATIVE=0"
    try:
        source, lowered = c_source(gen, arch, defines)
    except Unsupported as e:
        log.info("this program runs in Python: the native path does not cover %s", e)
        return None, f"not covered by the native path: {e}"
    try:
        lib = build(source)
    except BuildError as e:
        log.warning("this program runs in Python: %s", e)
        return None, str(e)
    pipeline = NativePipeline(lowered, lib, multicast_groups, make_output, stat_names)
    pipeline.source = source
    return pipeline, "native"
