"""The two aggregation programs behind one small interface, so tests/test_ina.py's bodies
are the same for both: p4src/ina.p4 (v1model, ``Switch``) and p4src/tofino/ina_tna.p4
(TNA, ``TnaSwitch``).

What differs between them is only how a switch is built, what its tables, actions and
counters are called, and which INA_VALUES it takes; the table keys and action parameters
are the same (the controller writes the same entries to both).  A program that cannot be
loaded yet makes its tests skip with the loader's error, never pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from p4target.executor.tables import exact, lpm
from worker import protocol

P4SRC = Path(__file__).resolve().parents[1] / "p4src"
P = protocol.load()


@dataclass(frozen=True)
class InaProgram:
    """One aggregation program: its source, its switch class and its control-plane names."""

    name: str
    path: Path
    values: tuple[int, ...]  # INA_VALUES it supports
    jobs: str
    member: str
    result_from_parent: str
    receivers: str
    address: str
    routes: str
    forward: str
    job_stats: str
    drops: str

    # ------------------------------------------------------------ switches
    def switch(self, values: int, instance: int = 0) -> Any:
        """A switch with no entries, groups, register or counter state (compiled once per variant)."""
        if values not in self.values:
            pytest.skip(f"{self.name}: {self.path.name} takes INA_VALUES in {self.values}, not {values}")
        sw = _compiled(self.name, values, instance)
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

    def add_result_from_parent(self, sw: Any, port: int, job: int, child: int, group: int, stats_base: int) -> None:
        sw.tables[self.jobs].add([exact(port), exact(job), exact(child)], self.result_from_parent,
                                 [group, stats_base])

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


def _names(ingress: str, egress: str, sub: dict[str, str]) -> dict[str, str]:
    """Control-plane names: ``<ingress>.<control>.<object>`` with the control per object."""
    where = {"jobs": ("job_lookup", "jobs"), "member": ("job_lookup", "member"),
             "result_from_parent": ("job_lookup", "result_from_parent"), "routes": ("forwarding", "ipv4_routes"),
             "forward": ("forwarding", "forward"), "job_stats": ("telemetry", "job_stats"),
             "drops": ("telemetry", "drops")}
    names = {k: ".".join(p for p in (ingress, sub.get(ctl, ctl), obj) if p) for k, (ctl, obj) in where.items()}
    names["receivers"] = f"{egress}.receivers"
    names["address"] = f"{egress}.address"
    return names


V1MODEL = InaProgram("v1model", P4SRC / "ina.p4", (64, 256),
                     **_names("InaIngress", "InaEgress",  # ina.p4 keeps one control's names (@name)
                              {"job_lookup": "", "forwarding": "", "telemetry": ""}))
TNA = InaProgram("tna", P4SRC / "tofino" / "ina_tna.p4", (64,),
                 **_names("TnaIngress", "TnaEgress.egress_addressing", {}))
PROGRAMS = {p.name: p for p in (V1MODEL, TNA)}


@functools.cache
def _load(name: str, values: int, instance: int) -> Any:
    """Compile once; a failure is remembered so every test of that program skips with it."""
    prog = PROGRAMS[name]
    try:
        if name == "tna":
            from p4target.executor.tna_switch import TnaSwitch
            return TnaSwitch.from_file(prog.path, {"INA_VALUES": str(values)})
        from p4target.executor.switch import Switch
        return Switch.from_file(prog.path, {"INA_VALUES": str(values)})
    except Exception as err:  # the TNA program and target are still being written
        if name == "v1model":
            raise
        return err


def _compiled(name: str, values: int, instance: int) -> Any:
    sw = _load(name, values, instance)
    if isinstance(sw, Exception):
        pytest.skip(f"{name}: {PROGRAMS[name].path.relative_to(P4SRC.parent)} does not load: "
                    f"{type(sw).__name__}: {str(sw).splitlines()[0] if str(sw) else ''}")
    return sw
