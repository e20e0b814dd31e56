"""Run the C preprocessor over a P4 file exactly as p4c does, and keep the line map.

p4c runs ``cpp -C -undef -nostdinc -x assembler-with-cpp -I<p4include>``; so do we, with
our own ``p4include`` (core.p4, v1model.p4).  cpp's line markers tell, for every line of
its output, which file and line it came from: errors are reported there, never in the
preprocessed text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import Location, P4Error

INCLUDE_DIR = Path(__file__).resolve().parent.parent / "p4include"
_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Source:
    """Preprocessed text (markers blanked out, so line numbers are stable) and its map."""

    text: str
    origins: tuple[tuple[str, int], ...]  # per output line (0-based): (file, line)

    def locate(self, line: int, col: int) -> Location:
        if 1 <= line <= len(self.origins):
            file, orig = self.origins[line - 1]
            return Location(file, orig, col)
        return Location("<preprocessed>", line, col)


def preprocess(path: str | Path, defines: dict[str, str] | None = None) -> Source:
    path = Path(path)
    if not path.is_file():
        raise P4Error(Location(str(path), 0, 0), "no such file")
    cpp = shutil.which("cpp")
    if cpp is None:
        raise P4Error(Location(str(path), 0, 0), "the C preprocessor 'cpp' is not installed")
    cmd = [cpp, "-C", "-undef", "-nostdinc", "-x", "assembler-with-cpp", f"-I{INCLUDE_DIR}"]
    cmd += [f"-D{k}={v}" if v != "" else f"-D{k}" for k, v in (defines or {}).items()]
    cmd.append(str(path))
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise _cpp_error(path, done.stderr)
    return _map_lines(done.stdout)


def _cpp_error(path: Path, stderr: str) -> P4Error:
    for line in stderr.splitlines():
        m = re.match(r"^(.*?):(\d+):(?:(\d+):)?\s*(?:fatal )?error:\s*(.*)$", line)
        if m:
            loc = Location(m.group(1), int(m.group(2)), int(m.group(3) or 1))
            return P4Error(loc, f"preprocessor: {m.group(4)}")
    return P4Error(Location(str(path), 0, 0), f"preprocessor failed: {stderr.strip()}")


def _map_lines(output: str) -> Source:
    lines, origins = [], []
    file, line = "<stdin>", 1
    for raw in output.split("\n"):
        m = _MARKER.match(raw)
        if m:
            lines.append("")
            origins.append((file, line))
            file, line = m.group(2), int(m.group(1))
            continue
        lines.append(raw)
        origins.append((file, line))
        line += 1
    return Source("\n".join(lines), tuple(origins))
