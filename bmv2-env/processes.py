"""Processes that outlive their parent: identify them safely and stop them politely.

A pid alone is not an identity (the kernel reuses pids), so a process is recorded as its
pid plus its start time (field 22 of ``/proc/PID/stat``); a later run kills it only if both
still match.  Everything here reads ``/proc`` and sends signals: Linux only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STOP_TIMEOUT = 5.0  # seconds between SIGTERM and SIGKILL
_POLL = 0.02


@dataclass(frozen=True)
class ProcessRef:
    """A process as recorded in a run directory: pid and start time (clock ticks since boot)."""

    pid: int
    start_time: int

    @classmethod
    def of(cls, pid: int) -> ProcessRef | None:
        started = start_time(pid)
        return None if started is None else cls(pid, started)

    def alive(self) -> bool:
        """True while this very process runs (not a zombie, not a newer one with the same pid)."""
        return start_time(self.pid) == self.start_time and not _is_zombie(self.pid)


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return int(stat[stat.rindex(")") + 2:].split()[19])


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2:].split()[0] == "Z"


def stop_popen(proc: subprocess.Popen, timeout: float = STOP_TIMEOUT) -> int:
    """SIGTERM our own child, SIGKILL it if it has not exited after ``timeout``; returns its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def stop_processes(refs: list[ProcessRef], timeout: float = STOP_TIMEOUT,
                   first: signal.Signals = signal.SIGTERM) -> list[ProcessRef]:
    """Send ``first`` to every recorded process still alive, SIGKILL the ones left after ``timeout``.

    An interactive shell ignores SIGTERM (Mininet's host shells take SIGHUP).  These are not
    our children (a crashed run's): they are reaped elsewhere, so we watch ``/proc`` rather
    than wait().  Returns the processes that were running.
    """
    running = [r for r in refs if r.alive()]
    _signal_all(running, first)
    deadline = time.monotonic() + timeout
    while any(r.alive() for r in running) and time.monotonic() < deadline:
        time.sleep(_POLL)
    left = [r for r in running if r.alive()]
    _signal_all(left, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(r.alive() for r in left) and time.monotonic() < deadline:
        time.sleep(_POLL)
    return running


def _signal_all(refs: list[ProcessRef], sig: signal.Signals) -> None:
    for ref in refs:
        try:
            os.kill(ref.pid, sig)
        except ProcessLookupError:
            pass


def processes_with_argument(matches: Callable[[str], bool]) -> dict[int, list[str]]:
    """Live processes with a command-line argument for which ``matches`` is true: pid -> argv.

    How we find a switch still attached to an interface (``-i 1@s1-eth1``) that no run
    directory knows about.
    """
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(map(matches, argv)) and not _is_zombie(int(entry.name)):
            found[int(entry.name)] = [a for a in argv if a]
    return found
