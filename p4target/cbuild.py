"""Build C with the system compiler, once: shared objects are cached by content.

The cache key is the C source, the runtime headers and the compiler's identity, so a program
loaded again (another switch, another test, a restart) loads its library at once.  The switches
of one Mininet network start together with the same program: one of them builds it while the
others wait on a file lock, and the library appears by an atomic rename.  The worker's own C
(worker/native) builds here too, so this module imports the standard library only: a training
node loads it without the P4 frontend.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent / "executor" / "native"  # the pipeline's runtime headers (-I, cache key)
HEADERS = ("runtime.h", "v1model.h", "tna.h")
# -fwrapv: signed overflow wraps (the lowering relies on it); -O1 builds a large pipeline in a
# few seconds and runs within a few percent of -O2 on it (bench: make bench).  P4T_UNROLL_FIELDS: -O1
# leaves loops rolled, so the header field loops are unrolled by pragma (runtime.h's UNROLL_FIELDS).
CFLAGS = ("-O1", "-fwrapv", "-fno-strict-aliasing", "-shared", "-fPIC", "-w", "-DP4T_UNROLL_FIELDS")
# A pipeline whose C is short (runs of lanes re-rolled into loops: lower.py) builds at -O3, which vectorises
# and unrolls those loops: ina.p4 at V = 256, 861 lines, builds in under a second and runs its packets in
# about 0.6x the time of -O1 (bench_ina --batch).  A longer one (a program left unrolled, 6,500 lines of
# ina_tna.p4) stays at -O1: -O3 more than doubles its build.
FAST_CFLAGS = ("-O3", *CFLAGS[1:-1])  # -O3 unrolls a header's field loops as it sees fit (runtime.h)
FAST_MAX_LINES = 3000


def pipeline_flags(source: str) -> tuple[str, ...]:
    """The flags a lowered program builds with: -O3 if its C is short, else -O1."""
    return FAST_CFLAGS if source.count("\n") <= FAST_MAX_LINES else CFLAGS
BUILD_TIMEOUT = 600


class BuildError(Exception):
    """No C compiler, or it refused the lowered program."""


def cache_dir() -> Path:
    base = os.environ.get("P4TARGET_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "p4target")
    return Path(base) / "native"


def compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


@cache
def _compiler_identity(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BuildError(f"the C compiler {cc} does not run: {e}") from e
    return out.stdout.splitlines()[0] if out.stdout else cc


def library_path(source: str, flags: tuple[str, ...] = CFLAGS) -> Path:
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler (cc or gcc) on PATH; install Debian's gcc, or run with P4TARGET_NATIVE=0")
    h = hashlib.sha256()
    for part in (source, _compiler_identity(cc), " ".join(flags), *((HERE / n).read_text() for n in HEADERS)):
        h.update(part.encode())
        h.update(b"\0")
    return cache_dir() / f"p4t-{h.hexdigest()[:24]}.so"


def build(source: str, flags: tuple[str, ...] = CFLAGS) -> ctypes.CDLL:
    """The loaded library for ``source``, compiled now unless the cache has it."""
    return _load(compiled(source, flags))


def compiled(source: str, flags: tuple[str, ...] = CFLAGS) -> Path:
    """The shared object built from ``source`` with ``flags`` (compiled now unless the cache has it), for
    a loader other than ctypes (cffi's ``dlopen``)."""
    path = library_path(source, flags)
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                if not path.exists():
                    _compile(source, path, flags)
    except OSError as e:
        raise BuildError(f"cannot build in {path.parent} (set P4TARGET_CACHE to a writable folder): {e}") from e
    return path


def _load(path: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(path))
    except OSError as e:
        raise BuildError(f"cannot load {path}: {e}") from e


def _compile(source: str, path: Path, flags: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="p4t-build-") as tmp:
        src = Path(tmp) / "program.c"
        src.write_text(source)
        out = Path(tmp) / "program.so"
        cmd = [compiler() or "cc", *flags, f"-I{HERE}", "-o", str(out), str(src), "-lm"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildError(f"{cmd[0]} failed: {e}") from e
        if done.returncode != 0:
            raise BuildError(f"{cmd[0]} refused the lowered program:\n{done.stderr[-2000:]}")
        fd, tmp_path = tempfile.mkstemp(dir=path.parent, prefix=".p4t-", suffix=".so")
        os.close(fd)
        shutil.copyfile(out, tmp_path)
        os.replace(tmp_path, path)
