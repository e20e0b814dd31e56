"""P4Runtime entities for v1model's externs: clone sessions, meters, direct meters, value sets.

They follow PI's behaviour on BMv2 (the reference P4Runtime server): meters and value sets
are only modified (INSERT/DELETE are invalid), a clone session is created, modified and
deleted like a multicast group, and a class of service other than 0 is unimplemented.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from ..executor.externs import Meter, MeterCell
from ..executor.tables import Entry, KeySpec, Table
from .requests import DELETE, INSERT, MODIFY, PORT_WIDTH, decode_int, encode_int, rpc_error

if TYPE_CHECKING:
    from .entities import PipelineState

MAX_CLONE_SESSION = 32767  # BMv2's mirroring sessions are 15-bit ids; 0 means "no clone"
_MATCH_KINDS = {p4info_pb2.MatchField.EXACT: "exact", p4info_pb2.MatchField.TERNARY: "ternary",
                p4info_pb2.MatchField.LPM: "lpm", p4info_pb2.MatchField.OPTIONAL: "optional",
                p4info_pb2.MatchField.RANGE: "range"}


class ExternEntities:
    """The extern-related entities of one committed pipeline."""

    def __init__(self, p: PipelineState) -> None:
        self.p = p
        info = p.p4info
        self.meters = {m.preamble.id: m for m in info.meters}
        self.direct_meters = {m.direct_table_id: m for m in info.direct_meters}
        self.value_sets = {v.preamble.id: v for v in info.value_sets}

    # ------------------------------------------------------------------ clone sessions
    def write_clone_session(self, kind: int, c: p4runtime_pb2.CloneSessionEntry) -> None:
        sessions = self.p.switch.clone_sessions
        sid = c.session_id
        if not 0 < sid <= MAX_CLONE_SESSION:
            raise rpc_error("OUT_OF_RANGE", f"clone session id {sid} is not in 1..{MAX_CLONE_SESSION}")
        if kind == INSERT and sid in sessions:
            raise rpc_error("ALREADY_EXISTS", f"clone session {sid} exists")
        if kind in (MODIFY, DELETE) and sid not in sessions:
            raise rpc_error("NOT_FOUND", f"no clone session {sid}")
        if kind == DELETE:
            self.p.switch.delete_clone_session(sid)
            return
        if c.class_of_service:
            raise rpc_error("UNIMPLEMENTED", "a class of service for clone sessions is not supported (as on BMv2)")
        replicas: list[tuple[int, int]] = []
        for r in c.replicas:
            port = r.egress_port if r.WhichOneof("port_kind") != "port" else decode_int(r.port, PORT_WIDTH, "port")
            if port >> PORT_WIDTH:
                raise rpc_error("OUT_OF_RANGE", f"replica port {port} does not fit in {PORT_WIDTH} bits")
            if (port, r.instance) in replicas:
                raise rpc_error("INVALID_ARGUMENT", f"clone session {sid}: replica ({port}, {r.instance}) twice")
            replicas.append((port, r.instance))
        self.p.switch.set_clone_session(sid, replicas, 0, c.packet_length_bytes)

    def read_clone_sessions(self, req: p4runtime_pb2.CloneSessionEntry) -> Iterator[p4runtime_pb2.CloneSessionEntry]:
        sessions = self.p.switch.clone_sessions
        ids = sorted(sessions) if req.session_id == 0 else [req.session_id]
        for sid in ids:
            s = sessions.get(sid)
            if s is None:
                raise rpc_error("NOT_FOUND", f"no clone session {sid}")
            msg = p4runtime_pb2.CloneSessionEntry(session_id=sid, class_of_service=s.class_of_service,
                                                  packet_length_bytes=s.packet_length_bytes)
            for port, instance in s.replicas:
                msg.replicas.add(egress_port=port, instance=instance)
            yield msg

    # ------------------------------------------------------------------ meters
    @staticmethod
    def _configure(cell: MeterCell, has_config: bool, cfg: p4runtime_pb2.MeterConfig, what: str) -> None:
        """No config: back to the default (every packet GREEN), as the spec says."""
        if not has_config:
            cell.reset()
            return
        if cfg.eburst:
            raise rpc_error("UNIMPLEMENTED", f"{what}: eburst (srTCM) is not supported by v1model meters")
        if min(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst) < 0:
            raise rpc_error("INVALID_ARGUMENT", f"{what}: meter rates and bursts cannot be negative")
        if cfg.cir > cfg.pir:
            raise rpc_error("INVALID_ARGUMENT", f"{what}: cir {cfg.cir} exceeds pir {cfg.pir} (BMv2 needs cir <= pir)")
        cell.configure(cfg.cir, cfg.cburst, cfg.pir, cfg.pburst)

    @staticmethod
    def _config(cell: MeterCell | None, config: p4runtime_pb2.MeterConfig) -> None:
        """A read's ``config`` (of a MeterEntry, DirectMeterEntry or TableEntry): left unset while the
        cell has the default config, as the spec says."""
        rates = cell.config() if cell is not None else None
        if rates is not None:
            config.cir, config.cburst, config.pir, config.pburst = rates

    def _meter(self, meter_id: int) -> tuple[int, Meter]:
        info = self.meters.get(meter_id)
        if info is None:
            raise rpc_error("INVALID_ARGUMENT", f"no meter with id {meter_id}")
        return meter_id, self.p.switch.meters[info.preamble.name]

    def _meter_cells(self, meter: Meter, req: p4runtime_pb2.MeterEntry) -> range:
        if not req.HasField("index"):
            return range(meter.size)
        if not 0 <= req.index.index < meter.size:
            raise rpc_error("OUT_OF_RANGE", f"{meter.name}: index {req.index.index} >= size {meter.size}")
        return range(req.index.index, req.index.index + 1)

    def write_meter(self, kind: int, req: p4runtime_pb2.MeterEntry) -> None:
        if kind != MODIFY:
            raise rpc_error("INVALID_ARGUMENT", "meter entries can only be modified")
        if not req.meter_id:
            raise rpc_error("INVALID_ARGUMENT", "a meter write names its meter")
        _, meter = self._meter(req.meter_id)
        for i in self._meter_cells(meter, req):
            self._configure(meter.cells[i], req.HasField("config"), req.config, meter.name)

    def read_meters(self, req: p4runtime_pb2.MeterEntry) -> Iterator[p4runtime_pb2.MeterEntry]:
        ids = [req.meter_id] if req.meter_id else list(self.meters)
        for mid in ids:
            _, meter = self._meter(mid)
            for i in self._meter_cells(meter, req):
                msg = p4runtime_pb2.MeterEntry(meter_id=mid, index=p4runtime_pb2.Index(index=i))
                self._config(meter.cells[i], msg.config)
                yield msg

    # ------------------------------------------------------------------ direct meters
    def _direct_meter(self, table: Table, info: p4info_pb2.Table) -> Meter | None:
        dm = self.direct_meters.get(info.preamble.id)
        return self.p.switch.meters[dm.preamble.name] if dm is not None else None

    def _direct_entries(self, te: p4runtime_pb2.TableEntry) -> Iterator[tuple[Meter, Table, p4info_pb2.Table, Entry]]:
        if te.is_default_action:
            raise rpc_error("UNIMPLEMENTED", "direct meters of default entries are not supported (as on BMv2)")
        for table, info in self.p._tables(te.table_id):
            meter = self._direct_meter(table, info)
            if meter is None:
                if te.table_id:
                    raise rpc_error("INVALID_ARGUMENT", f"{table.name} has no direct meter")
                continue
            if te.match:
                e = table.find(self.p._match(table, info, te), te.priority)
                if e is None:
                    raise rpc_error("NOT_FOUND", f"{table.name}: no such entry")
                yield meter, table, info, e
            else:
                for e in sorted(table.entries(), key=lambda e: e.handle):
                    yield meter, table, info, e

    def write_direct_meter(self, kind: int, req: p4runtime_pb2.DirectMeterEntry) -> None:
        if kind != MODIFY:
            raise rpc_error("INVALID_ARGUMENT", "direct meter entries can only be modified")
        if not req.table_entry.table_id:
            raise rpc_error("INVALID_ARGUMENT", "a direct meter write names its table")
        for meter, _, _, e in self._direct_entries(req.table_entry):
            self._configure(meter.cell(e), req.HasField("config"), req.config, meter.name)

    def read_direct_meters(self, req: p4runtime_pb2.DirectMeterEntry) -> Iterator[p4runtime_pb2.DirectMeterEntry]:
        for meter, table, info, e in self._direct_entries(req.table_entry):
            msg = p4runtime_pb2.DirectMeterEntry(table_entry=self.p._entry_message(table, info, e, False))
            self._config(meter.direct.get(e), msg.config)
            yield msg

    def table_entry_meter(self, table: Table, info: p4info_pb2.Table, entry: Entry,
                          te: p4runtime_pb2.TableEntry) -> None:
        """``TableEntry.meter_config`` on INSERT/MODIFY configures the entry's direct meter."""
        meter = self._direct_meter(table, info)
        if meter is None:
            raise rpc_error("INVALID_ARGUMENT", f"{table.name} has no direct meter for meter_config")
        self._configure(meter.cell(entry), True, te.meter_config, meter.name)

    def entry_meter_config(self, table: Table, info: p4info_pb2.Table, entry: Entry,
                           msg: p4runtime_pb2.TableEntry) -> None:
        """A table read that asks for ``meter_config`` gets each entry's direct meter config (a table with
        none: nothing)."""
        meter = self._direct_meter(table, info)
        if meter is not None:
            self._config(meter.direct.get(entry), msg.meter_config)

    # ------------------------------------------------------------------ value sets
    def _value_set(self, vs_id: int):
        info = self.value_sets.get(vs_id)
        if info is None:
            raise rpc_error("INVALID_ARGUMENT", f"no value set with id {vs_id}")
        return info, self.p.switch.value_sets[info.preamble.name]

    def write_value_set(self, kind: int, req: p4runtime_pb2.ValueSetEntry) -> None:
        if kind != MODIFY:
            raise rpc_error("INVALID_ARGUMENT", "value set entries can only be modified")
        info, vs = self._value_set(req.value_set_id)
        if len(req.members) > info.size:
            raise rpc_error("RESOURCE_EXHAUSTED", f"{info.preamble.name} holds at most {info.size} members")
        keys = [KeySpec(f.name or str(f.id), _MATCH_KINDS.get(f.match_type, "other"), f.bitwidth)
                for f in info.match]
        shim = SimpleNamespace(name=info.preamble.name, keys=keys)  # what PipelineState._match reads
        members = []
        for m in req.members:
            match = self.p._match(shim, info_as_table(info), p4runtime_pb2.TableEntry(match=m.match))
            members.append(tuple(_as_mask(fm, k.width) for fm, k in zip(match, keys, strict=True)))
        vs.set_members(members)

    def read_value_sets(self, req: p4runtime_pb2.ValueSetEntry) -> Iterator[p4runtime_pb2.ValueSetEntry]:
        ids = [req.value_set_id] if req.value_set_id else list(self.value_sets)
        for vid in ids:
            info, vs = self._value_set(vid)
            msg = p4runtime_pb2.ValueSetEntry(value_set_id=vid)
            for member in vs.members:
                m = msg.members.add()
                for f, (value, mask) in zip(info.match, member, strict=True):
                    top = (1 << f.bitwidth) - 1
                    kind = _MATCH_KINDS.get(f.match_type)
                    if kind == "exact":
                        m.match.add(field_id=f.id, exact={"value": encode_int(value)})
                    elif mask == 0:
                        continue  # don't care: omitted
                    elif kind == "optional":
                        m.match.add(field_id=f.id, optional={"value": encode_int(value)})
                    elif kind == "lpm":
                        m.match.add(field_id=f.id, lpm={"value": encode_int(value), "prefix_len": bin(mask).count("1")})
                    else:
                        m.match.add(field_id=f.id, ternary={"value": encode_int(value), "mask": encode_int(mask & top)})
            yield msg


def info_as_table(info: p4info_pb2.ValueSet) -> p4info_pb2.Table:
    """A value set's match fields in the shape PipelineState._match reads."""
    return p4info_pb2.Table(preamble=info.preamble, match_fields=info.match)


def _as_mask(fm: tuple, width: int) -> tuple[int, int]:
    """A decoded FieldMatch as (value, mask), the form the parser's ValueSet compares."""
    kind, a, b = fm
    if kind == "mask":
        mask = b & ((1 << width) - 1)
        return a & mask, mask
    raise rpc_error("UNIMPLEMENTED", "range members of a value set are not supported by the built-in target")
