"""Run STF tests on real BMv2 (``p4c`` + ``simple_switch`` + ``simple_switch_CLI``).

Follows p4c's own runner (backends/bmv2/bmv2stf.py): each test port is a FIFO that
simple_switch reads as a pcap stream (``--use-files 0``), outputs land in
``pcap<N>_out.pcap``, and table commands go through simple_switch_CLI over Thrift.  Table
commands are applied before the next packet is written, so commands and packets keep
their STF order.  Names and key layouts come from our frontend, which names tables,
keys and actions exactly as p4c's JSON does.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from .executor.tables import FieldMatch, KeySpec, Table
from .ports import pcap_file_header, pcap_record, read_pcap
from .stf_entries import StfError, resolve_entry

TOOLS = ("p4c", "simple_switch", "simple_switch_CLI")
BMV2_PRIORITY_BASE = 10000  # bmv2stf.py: BMv2 wants smaller-is-better, STF larger-is-better


def bmv2_available() -> bool:
    return all(shutil.which(tool) for tool in TOOLS)


def cli_match(key: KeySpec, match: FieldMatch) -> str:
    """One key of a ``table_add`` in simple_switch_CLI syntax."""
    kind, a, b = match
    if kind == "range":
        return f"{a}->{b}"
    if key.match_kind == "exact":
        return str(a)
    if key.match_kind == "lpm":
        return f"{a}/{bin(b).count('1')}"
    return f"{a}&&&{b}"


def cli_table_add(table: Table, match: list[FieldMatch], action: str, args: list[int], priority: int | None) -> str:
    keys = " ".join(cli_match(k, m) for k, m in zip(table.keys, match))
    command = f"table_add {table.name} {action} {keys} => {' '.join(map(str, args))}".rstrip()
    if table.needs_priority:
        command += f" {BMV2_PRIORITY_BASE - (priority or 1)}"
    return command


class Bmv2Target:
    """The STF ``Target`` interface over a simple_switch process; use as a context manager."""

    def __init__(self, p4_path: Path, tables: dict[str, Table], ports: list[int],
                 defines: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        self.tables = tables
        self.ports = ports
        self.timeout = timeout
        self.dir = Path(tempfile.mkdtemp(prefix="stf-bmv2-"))
        self.pending: list[str] = []
        self.fifos: dict[int, int] = {}
        self.switch: subprocess.Popen | None = None
        args = [f"-D{k}={v}" for k, v in (defines or {}).items()]
        compiled = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", *args, "-o", str(self.dir),
                                   str(p4_path)], capture_output=True, text=True)
        if compiled.returncode != 0:
            raise StfError(f"p4c failed on {p4_path}:\n{compiled.stderr}")
        self.json = self.dir / (Path(p4_path).stem + ".json")

    def __enter__(self) -> Bmv2Target:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.thrift_port = s.getsockname()[1]
        for port in self.ports:
            os.mkfifo(self.dir / f"pcap{port}_in.pcap")
        interfaces = [arg for port in self.ports for arg in ("-i", f"{port}@pcap{port}")]
        self.switch = subprocess.Popen(
            ["simple_switch", "--log-file", "switch", "--log-flush", "--use-files", "0",
             "--thrift-port", str(self.thrift_port), *interfaces, str(self.json)],
            cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for port in self.ports:  # simple_switch opens them in this order; a writer must meet each
            self.fifos[port] = self._open_fifo(self.dir / f"pcap{port}_in.pcap")
            os.write(self.fifos[port], pcap_file_header())
        self._wait_for_thrift()
        return self

    def __exit__(self, *exc) -> None:
        for fd in self.fifos.values():
            os.close(fd)
        self.fifos.clear()
        if self.switch and self.switch.poll() is None:
            self.switch.terminate()
            self.switch.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _open_fifo(self, path: Path) -> int:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:  # ENXIO: the switch has not opened it for reading yet
                if err.errno != errno.ENXIO or time.monotonic() > deadline or self.switch.poll() is not None:
                    raise StfError(f"simple_switch did not open {path.name}") from err
                time.sleep(0.05)
                continue
            os.set_blocking(fd, True)
            return fd

    def _wait_for_thrift(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline and self.switch.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.thrift_port)) == 0:
                    return
            time.sleep(0.1)
        raise StfError("simple_switch's Thrift server never came up")

    def _flush(self) -> None:
        if not self.pending:
            return
        cli = subprocess.run(["simple_switch_CLI", "--thrift-port", str(self.thrift_port)],
                             input="\n".join(self.pending) + "\n", capture_output=True, text=True, timeout=60)
        self.pending.clear()
        errors = [line for line in cli.stdout.splitlines() if "Error" in line or "Invalid" in line]
        if cli.returncode != 0 or errors:
            raise StfError("simple_switch_CLI: " + "; ".join(errors or [cli.stderr]))

    # ------------------------------------------------------------------ Target
    def add_entry(self, table, priority, keys, action, args) -> None:
        t, match, full, values = resolve_entry(self.tables, table, keys, action, args)
        self.pending.append(cli_table_add(t, match, full, values, priority))

    def set_default(self, table, action, args) -> None:
        t, _, full, values = resolve_entry(self.tables, table, [], action, args)
        self.pending.append(f"table_set_default {t.name} {full} {' '.join(map(str, values))}".rstrip())

    def multicast(self, verb: str, args: list[int]) -> None:
        self.pending.append(" ".join([verb, *map(str, args)]))

    def mirroring_add(self, session: int, port: int) -> None:
        self.pending.append(f"mirroring_add {session} {port}")

    def send(self, port: int, data: bytes) -> None:
        self._flush()
        os.write(self.fifos[port], pcap_record(data))

    def received(self) -> list[tuple[int, bytes]]:
        self._flush()
        for fd in self.fifos.values():
            os.close(fd)
        self.fifos.clear()
        time.sleep(1.0)  # as bmv2stf.py: give the switch time to drain
        if self.switch and self.switch.poll() is None:
            self.switch.terminate()
            self.switch.wait(10)
        return [(port, data) for port in self.ports for data in read_pcap(self.dir / f"pcap{port}_out.pcap")]
