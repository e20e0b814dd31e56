"""Moved to p4target/cbuild.py (standard library only, so the worker builds its C without the frontend)."""

from p4target.cbuild import (
    BUILD_TIMEOUT,
    CFLAGS,
    FAST_CFLAGS,
    FAST_MAX_LINES,
    HEADERS,
    HERE,
    BuildError,
    build,
    cache_dir,
    compiled,
    compiler,
    library_path,
    pipeline_flags,
)

__all__ = ["BUILD_TIMEOUT", "CFLAGS", "FAST_CFLAGS", "FAST_MAX_LINES", "HEADERS", "HERE", "BuildError", "build",
           "cache_dir", "compiled", "compiler", "library_path", "pipeline_flags"]
