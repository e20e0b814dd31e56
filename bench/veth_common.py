"""What the veth benchmarks share: the switch command on veth ports, CPU accounting, start-up checks.

Used by bench_veth (plain forwarding) and bench_veth_ina (aggregation); root only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from p4target import netns

from .compare import python_env

SO_TIMESTAMPNS = 35  # kernel receive time (CLOCK_REALTIME) as ancillary data; not in Python's socket module


@contextmanager
def switch_process(config: list[str], links: dict[int, netns.Veth], own_group: bool = False,
                   root: Path | None = None, log: IO[str] | None = None) -> Iterator[tuple[subprocess.Popen, str]]:
    """``p4target-switch-grpc -i 1@.. -i 2@.. <config>`` serving on a free port: (process, gRPC address).

    ``config`` is the command's own arguments after the ports (``-D NAME=V ... prog.p4``).
    The switch is stopped on exit, whatever happened.  ``own_group``: in its own process
    group, so a Ctrl-C at the terminal reaches only us and the switch stays up until we stop
    it (else it may vanish under a P4Runtime call and turn the interrupt into an RPC error).
    ``root``: run the switch of that checkout (bench/compare.py's worktree of an older commit).
    ``log``: where its output goes (the caller's to read and close; default a temporary file).
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ifaces = [arg for n, link in links.items() for arg in ("-i", f"{n}@{link.a}")]
    own_log = log is None
    log = tempfile.TemporaryFile("w+") if log is None else log
    proc = subprocess.Popen([sys.executable, "-m", "p4target.switch_grpc", *ifaces, *config, "--",
                             "--grpc-server-addr", f"127.0.0.1:{port}"], stdout=log, stderr=log, text=True,
                            process_group=0 if own_group else None, cwd=root,
                            env=python_env(root) if root is not None else None)
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise RuntimeError(f"the switch did not start (exit {proc.poll()}):\n{log.read()}")
            time.sleep(0.1)
        yield proc, f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if own_log:
            log.close()


def cpu_seconds(pid: int) -> float:
    """User + system time of a process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """Busy time of all cores together (softirq included), from /proc/stat."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def sleep_until(t: float) -> None:
    if (wait := t - time.time()) > 0:
        time.sleep(wait)


def cpu_during(pids: dict[str, int], start: float, duration: float) -> dict[str, float]:
    """Sleep through [start, start + duration]; each process's share of one core in it, and the
    machine's ("all", of os.cpu_count() cores)."""
    sleep_until(start)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()} | {"all": machine_cpu_seconds()}
    sleep_until(start + duration)
    cpu = {name: (cpu_seconds(pid) - before[name]) / duration for name, pid in pids.items()}
    cpu["all"] = (machine_cpu_seconds() - before["all"]) / duration
    return cpu


def sigterm_as_interrupt() -> None:
    """SIGTERM cleans up like Ctrl-C (KeyboardInterrupt unwinds every context manager)."""
    signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def prepare(prog: str) -> bool:
    """Before a veth benchmark: can we make namespaces (else say why, False), SIGTERM as Ctrl-C,
    remove what killed runs left, and warn when the machine is already busy."""
    usable, why_not = netns.can_use_netns()
    if not usable:
        print(f"{prog}: {why_not}", file=sys.stderr)
        return False
    sigterm_as_interrupt()
    for what in netns.remove_stale():
        print(f"removed {what}, left by a killed run")
    before = machine_cpu_seconds()
    time.sleep(1)
    if (busy := machine_cpu_seconds() - before) > 0.25:
        print(f"note: before starting, other processes kept {busy:.0%} of a core busy (of {os.cpu_count()}); "
              "expect lower, noisier figures", flush=True)
    return True
