"""The two aggregation programs behind one small interface, so tests/test_ina.py's bodies
are the same for both: p4src/ina.p4 (v1model, ``Switch``) and p4src/tofino/ina_tna.p4
(TNA, ``TnaSwitch``).

What differs between them is only how a switch is built, what its tables, actions and
counters are called, and which INA_VALUES it takes; the table keys and action parameters
are the same (the controller writes the same entries to both).  The names are the
controller's (controller/programs.py), so a renamed table breaks the tests the same way it
breaks provisioning, instead of being typed twice.

A program that does not load fails every test that builds a switch of it, with the loader's
error: a broken program must never show up as skipped tests.  The one skip left is narrow and
stated: a program asked for an INA_VALUES variant it does not take (the TNA program has 64).
``INA_TNA_P4`` points the TNA tests at another copy of the program (tests/test_ina_programs.py
uses it to check that a broken copy fails).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller import programs
from p4target.executor.tables import exact, lpm
from worker import protocol

P4SRC = programs.P4SRC
P = protocol.load()


class ProgramLoadError(RuntimeError):
    """An aggregation program (or its target) failed to compile or load: its tests fail with this."""


@dataclass(frozen=True)
class InaProgram:
    """One aggregation program: its source, its switch class and its control-plane names."""

    name: str  # "v1model" or "tna": also the switch class (Switch or TnaSwitch)
    control: programs.Program  # the controller's P4Runtime names for it
    values: tuple[int, ...]  # INA_VALUES it supports
    path: Path  # the source compiled (control.source unless pointed elsewhere)

    # ------------------------------------------------------------ names (controller/programs.py)
    jobs = property(lambda self: self.control.jobs)
    member = property(lambda self: self.control.member)
    result_from_parent = property(lambda self: self.control.result_from_parent)
    receivers = property(lambda self: self.control.receivers)
    address = property(lambda self: self.control.address)
    routes = property(lambda self: self.control.routes)
    forward = property(lambda self: self.control.forward)
    job_stats = property(lambda self: self.control.job_stats)
    drops = property(lambda self: self.control.drops)

    def at(self, path: str | Path) -> InaProgram:
        """The same program compiled from another copy of its source."""
        return dataclasses.replace(self, path=Path(path).resolve())

    # ------------------------------------------------------------ switches
    def switch(self, values: int, instance: int = 0) -> Any:
        """A switch with no entries, groups, register or counter state (compiled once per variant).

        Raises ProgramLoadError if the program does not compile or load."""
        if values not in self.values:
            pytest.skip(f"{self.name}: {self.path.name} takes INA_VALUES in {self.values}, not {values}")
        sw = _compiled(self.name, self.path, values, instance)
        for r in sw.registers.values():
            r.reset()
        for c in sw.counters.values():
            c.reset()
        for t in sw.tables.values():
            t.clear()  # const tables (the TNA program's child_bit) keep their entries
        sw.multicast_groups.clear()
        return sw

    # ------------------------------------------------------------ entries
    def add_member(self, sw: Any, port: int, job: int, child: int, params: list[int]) -> None:
        """params: pool_base, pool_size, children, is_root, group, parent_port, index_at_parent, epoch, stats_base."""
        sw.tables[self.jobs].add([exact(port), exact(job), exact(child)], self.member, params)

    def add_result_from_parent(self, sw: Any, port: int, job: int, child: int, group: int, stats_base: int,
                               cell: tuple[int, int, int, int] = (0, 8, 2, 1)) -> None:
        """cell: pool_base, pool_size, children, epoch (as the job's member entries), for a program that keeps
        results on the way down (controller.programs.Program.keeps_results)."""
        args = [*cell, group, stats_base] if self.control.keeps_results else [group, stats_base]
        sw.tables[self.jobs].add([exact(port), exact(job), exact(child)], self.result_from_parent, args)

    def add_meeting(self, sw: Any, job: int, peer: int, group_with_peer: int) -> None:
        """A meeting root's entry (nic.p4 only): the peer's child index and the group that holds it too."""
        sw.tables[self.control.meetings].add([exact(job)], self.control.meet, [peer, group_with_peer])

    def add_receiver(self, sw: Any, job: int, receiver: int, params: list[int]) -> None:
        """params: dst_mac, src_mac, dst_ip, src_ip, dst_port."""
        sw.tables[self.receivers].add([exact(job), exact(receiver)], self.address, params)

    def add_route(self, sw: Any, prefix: int, length: int, port: int, dst_mac: int, src_mac: int) -> None:
        sw.tables[self.routes].add([lpm(prefix, length, 32)], self.forward, [port, dst_mac, src_mac])

    def clear_jobs(self, sw: Any) -> None:
        sw.tables[self.jobs].clear()
        sw.tables[self.receivers].clear()

    # ------------------------------------------------------------ telemetry and state
    def stats(self, sw: Any, base: int = 0) -> list[int]:
        return sw.counters[self.job_stats].packets[base:base + P.JOB_STAT_COUNT]

    def drop_counts(self, sw: Any) -> list[int]:
        return sw.counters[self.drops].packets[:P.DROP_REASON_COUNT]

    def snapshot(self, sw: Any) -> dict[str, list]:
        """Every register cell: bad input must leave them all as they were."""
        return {name: list(r.cells) for name, r in sw.registers.items()}


def _program(control: programs.Program, values: tuple[int, ...], env: str | None = None) -> InaProgram:
    source = os.environ.get(env, "") if env else ""
    path = Path(source).resolve() if source else control.source
    return InaProgram(control.arch, control, values, path)


V1MODEL = _program(programs.V1MODEL, (64, 256))
TNA = _program(programs.TNA, (64,), env="INA_TNA_P4")
PROGRAMS = {p.name: p for p in (V1MODEL, TNA)}
NIC = _program(programs.NIC, (64, 256))  # ina.p4 and meeting roots: tests/test_relay.py checks the relay against it


@functools.cache
def _load(name: str, path: Path, values: int, instance: int) -> Any:
    """Compile once; a failure is remembered (and returned) so every test of that program fails fast with it."""
    try:
        if name == "tna":
            from p4target.executor.tna_switch import TnaSwitch
            return TnaSwitch.from_file(path, {"INA_VALUES": str(values)})  # checks the fit as it loads
        from p4target.executor.switch import Switch
        return Switch.from_file(path, {"INA_VALUES": str(values)})
    except Exception as err:  # re-raised by _compiled: the failure of every test that asks for it
        return err


def _compiled(name: str, path: Path, values: int, instance: int) -> Any:
    sw = _load(name, path, values, instance)
    if isinstance(sw, Exception):
        first = str(sw).splitlines()[0] if str(sw) else ""
        raise ProgramLoadError(f"{name}: {path} (INA_VALUES={values}) does not load: "
                               f"{type(sw).__name__}: {first}") from sw
    return sw
