"""P4Runtime entities <-> the switch's state, for one committed pipeline.

Every rule P4Runtime puts on a request (bytestring widths, don't-care fields omitted,
priorities, default entries, const tables) is enforced here, raising ``RpcError`` with the
status code the spec names; the switch's own Python API stays free of protobuf.
"""

from __future__ import annotations

from collections.abc import Iterator

from p4.config.v1 import p4info_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from ..executor.profiles import IndirectEntry, IndirectTable
from ..executor.switch import Switch
from ..executor.tables import DONT_CARE, Entry, FieldMatch, Table, TableError, exact, ternary, value_range
from .profile_entities import ProfileEntities
from .requests import (
    DELETE,
    INSERT,
    MODIFY,
    PORT_WIDTH,
    check_default_entry,
    decode_int,
    encode_int,
    rpc_error,
)


class PipelineState:
    """A committed pipeline: the running switch plus the P4Info maps its entities use."""

    def __init__(self, switch: Switch, p4info: p4info_pb2.P4Info, config: p4runtime_pb2.ForwardingPipelineConfig):
        self.switch = switch
        self.p4info = p4info
        self.config = config
        self.tables = {t.preamble.id: t for t in p4info.tables}
        self.actions = {a.preamble.id: a for a in p4info.actions}
        self.counters = {c.preamble.id: c for c in p4info.counters}
        self.direct_counters = {c.direct_table_id: c for c in p4info.direct_counters}
        self.registers = {r.preamble.id: r for r in p4info.registers}
        self.cpu_metadata = {m.preamble.name: m for m in p4info.controller_packet_metadata}
        self.actions_by_name = {a.preamble.name: a for a in p4info.actions}

        self.profiles = ProfileEntities(self)

    # ------------------------------------------------------------------ lookups
    def _table(self, table_id: int) -> tuple[Table, p4info_pb2.Table]:
        info = self.tables.get(table_id)
        if info is None:  # an id the P4Info does not have: a malformed request (BMv2: "Invalid P4 id")
            raise rpc_error("INVALID_ARGUMENT", f"no table with id {table_id}")
        return self.switch.tables[info.preamble.name], info

    def _tables(self, table_id: int) -> list[tuple[Table, p4info_pb2.Table]]:
        return [self._table(i) for i in self.tables] if table_id == 0 else [self._table(table_id)]

    # ------------------------------------------------------------------ table entries
    def _match(self, table: Table, info: p4info_pb2.Table, entry: p4runtime_pb2.TableEntry) -> list[FieldMatch]:
        index = {f.id: i for i, f in enumerate(info.match_fields)}
        match: list[FieldMatch | None] = [None] * len(table.keys)
        for fm in entry.match:
            i = index.get(fm.field_id)
            if i is None:
                raise rpc_error("INVALID_ARGUMENT", f"{table.name} has no match field {fm.field_id}")
            if match[i] is not None:
                raise rpc_error("INVALID_ARGUMENT", f"{table.name}: match field {fm.field_id} given twice")
            match[i] = self._field(table, i, fm)
        for i, key in enumerate(table.keys):
            if match[i] is None:
                if key.match_kind == "exact":
                    raise rpc_error("INVALID_ARGUMENT", f"{table.name}: exact field {key.name} is missing")
                match[i] = DONT_CARE
        return match  # type: ignore[return-value]

    @staticmethod
    def _field(table: Table, i: int, fm: p4runtime_pb2.FieldMatch) -> FieldMatch:
        key = table.keys[i]
        kind, w, what = fm.WhichOneof("field_match_type"), key.width, f"{table.name} {key.name}"
        if kind != key.match_kind:
            raise rpc_error("INVALID_ARGUMENT", f"{what} is a {key.match_kind} field, got {kind}")
        top = (1 << w) - 1
        if kind == "exact":
            return exact(decode_int(fm.exact.value, w, what))
        if kind == "optional":
            return ternary(decode_int(fm.optional.value, w, what), top)
        if kind == "lpm":
            value, plen = decode_int(fm.lpm.value, w, what), fm.lpm.prefix_len
            if not 0 < plen <= w:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: prefix length {plen} (a /0 match must be omitted)")
            mask = top ^ ((1 << (w - plen)) - 1)
            if value & ~mask:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: bits beyond the /{plen} prefix are set")
            return ternary(value, mask)
        if kind == "ternary":
            value, mask = decode_int(fm.ternary.value, w, what), decode_int(fm.ternary.mask, w, what)
            if mask == 0:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: an all-zero mask is a don't care and must be omitted")
            if value & ~mask:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: value has bits outside the mask")
            return ternary(value, mask)
        if kind == "range":
            lo, hi = decode_int(fm.range.low, w, what), decode_int(fm.range.high, w, what)
            if lo > hi:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: range low {lo} > high {hi}")
            if lo == 0 and hi == top:
                raise rpc_error("INVALID_ARGUMENT", f"{what}: a full range is a don't care and must be omitted")
            return value_range(lo, hi)
        raise rpc_error("INVALID_ARGUMENT", f"{what}: unsupported match type {kind}")

    def _action(self, info: p4info_pb2.Table, ta: p4runtime_pb2.TableAction) -> tuple[str, list[int]]:
        kind = ta.WhichOneof("type")
        if kind != "action":
            raise rpc_error("UNIMPLEMENTED" if kind else "INVALID_ARGUMENT",
                       f"{info.preamble.name}: {'action profiles are not supported' if kind else 'no action given'}")
        a = ta.action
        if a.action_id not in {r.id for r in info.action_refs}:
            raise rpc_error("INVALID_ARGUMENT", f"{info.preamble.name} cannot run action {a.action_id}")
        ainfo = self.actions[a.action_id]
        given = {}
        for p in a.params:
            if p.param_id in given:
                raise rpc_error("INVALID_ARGUMENT", f"{ainfo.preamble.name}: parameter {p.param_id} given twice")
            given[p.param_id] = p.value
        values = []
        for p in ainfo.params:
            if p.id not in given:
                raise rpc_error("INVALID_ARGUMENT", f"{ainfo.preamble.name}: parameter {p.name} is missing")
            values.append(decode_int(given.pop(p.id), p.bitwidth, f"{ainfo.preamble.name} {p.name}"))
        if given:
            raise rpc_error("INVALID_ARGUMENT", f"{ainfo.preamble.name} has no parameter {sorted(given)}")
        return ainfo.preamble.name, values

    def write_table_entry(self, kind: int, entry: p4runtime_pb2.TableEntry) -> None:
        table, info = self._table(entry.table_id)
        if isinstance(table, IndirectTable):  # entries name members, groups or action sets
            self.profiles.write_table_entry(kind, table, info, entry)
            return
        try:
            if entry.is_default_action:
                check_default_entry(kind, table, entry)
                if not entry.HasField("action"):
                    table.reset_default()
                else:
                    table.set_default(*self._action(info, entry.action))
                return
            match = self._match(table, info, entry)
            if kind == DELETE:
                table.delete(match, entry.priority)
                return
            action, args = self._action(info, entry.action)
            if kind == INSERT:
                new = table.add(match, action, args, entry.priority)
            else:
                new = table.modify(match, action, args, entry.priority)
            if entry.HasField("counter_data"):
                new.counter[:] = [entry.counter_data.packet_count, entry.counter_data.byte_count]
            if entry.HasField("meter_config"):
                self.externs.table_entry_meter(table, info, new, entry)
        except TableError as err:
            raise rpc_error(err.code, str(err)) from None

    def _entry_message(self, table: Table, info: p4info_pb2.Table, e: Entry, with_counter: bool,
                       default: bool = False) -> p4runtime_pb2.TableEntry:
        msg = p4runtime_pb2.TableEntry(table_id=info.preamble.id, priority=e.priority, is_default_action=default,
                                       is_const=table.is_const and not default)
        for key, finfo, (kind, a, b) in zip(table.keys, info.match_fields, e.match):
            top = (1 << key.width) - 1
            if key.match_kind != "exact" and ((kind == "mask" and b == 0) or (kind == "range" and (a, b) == (0, top))):
                continue  # don't care: omitted
            fm = msg.match.add(field_id=finfo.id)
            if key.match_kind == "exact":
                fm.exact.value = encode_int(a)
            elif key.match_kind == "optional":
                fm.optional.value = encode_int(a)
            elif key.match_kind == "lpm":
                fm.lpm.value, fm.lpm.prefix_len = encode_int(a), bin(b).count("1")
            elif key.match_kind == "ternary":
                fm.ternary.value, fm.ternary.mask = encode_int(a), encode_int(b)
            else:
                fm.range.low, fm.range.high = encode_int(a), encode_int(b)
        ref = e.ref if isinstance(e, IndirectEntry) else getattr(table, "default_ref", None) if default else None
        if ref is not None:  # a member, group or action set (profile_entities.py)
            self.profiles.fill_entry_action(ref, msg.action)
        else:
            ainfo = self.actions_by_name[e.action.name]
            msg.action.action.action_id = ainfo.preamble.id
            for p, v in zip(ainfo.params, e.args):
                msg.action.action.params.add(param_id=p.id, value=encode_int(v))
        if with_counter and table.has_direct_counter:
            msg.counter_data.packet_count, msg.counter_data.byte_count = e.counter
        return msg

    def read_table_entries(self, req: p4runtime_pb2.TableEntry) -> Iterator[p4runtime_pb2.TableEntry]:
        """The entries the request matches; with ``counter_data`` or ``meter_config`` set in the request, each
        entry's direct counter or meter config too (P4Runtime spec 9.1)."""
        with_counter, with_meter = req.HasField("counter_data"), req.HasField("meter_config")
        for table, info in self._tables(req.table_id):
            if req.is_default_action:
                yield self._entry_message(table, info, table.default_entry, False, default=True)
                continue
            entries = table.entries()
            if req.match:
                found = table.find(self._match(table, info, req), req.priority)
                entries = [found] if found else []
            for e in sorted(entries, key=lambda e: e.handle):
                msg = self._entry_message(table, info, e, with_counter)
                if with_meter:
                    self.externs.entry_meter_config(table, info, e, msg)
                yield msg

    # ------------------------------------------------------------------ multicast
    def write_multicast_group(self, kind: int, g: p4runtime_pb2.MulticastGroupEntry) -> None:
        groups = self.switch.multicast_groups
        gid = g.multicast_group_id
        if gid == 0:
            raise rpc_error("INVALID_ARGUMENT", "multicast group id 0 is reserved")
        if kind == INSERT and gid in groups:
            raise rpc_error("ALREADY_EXISTS", f"multicast group {gid} exists")
        if kind in (MODIFY, DELETE) and gid not in groups:
            raise rpc_error("NOT_FOUND", f"no multicast group {gid}")
        if kind == DELETE:
            self.switch.delete_multicast_group(gid)
            return
        replicas = []
        for r in g.replicas:
            port = r.egress_port if r.WhichOneof("port_kind") != "port" else decode_int(r.port, PORT_WIDTH, "port")
            if port >> PORT_WIDTH:
                raise rpc_error("OUT_OF_RANGE", f"replica port {port} does not fit in {PORT_WIDTH} bits")
            if (port, r.instance) in replicas:
                raise rpc_error("INVALID_ARGUMENT", f"multicast group {gid}: replica ({port}, {r.instance}) twice")
            replicas.append((port, r.instance))
        self.switch.set_multicast_group(gid, replicas)

    def read_multicast_groups(self, req: p4runtime_pb2.MulticastGroupEntry
                              ) -> Iterator[p4runtime_pb2.MulticastGroupEntry]:
        groups = self.switch.multicast_groups
        ids = sorted(groups) if req.multicast_group_id == 0 else [req.multicast_group_id]
        for gid in ids:
            if gid not in groups:
                raise rpc_error("NOT_FOUND", f"no multicast group {gid}")
            msg = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=gid)
            for port, rid in groups[gid]:
                msg.replicas.add(egress_port=port, instance=rid)
            yield msg

    # ------------------------------------------------------------------ counters
    def _counter_ids(self, counter_id: int) -> list[int]:
        if counter_id and counter_id not in self.counters:
            raise rpc_error("INVALID_ARGUMENT", f"no counter with id {counter_id}")
        return [counter_id] if counter_id else list(self.counters)

    @staticmethod
    def _data(unit: int, packets: int, octets: int) -> p4runtime_pb2.CounterData:
        data = p4runtime_pb2.CounterData()
        if unit != p4info_pb2.CounterSpec.BYTES:
            data.packet_count = packets
        if unit != p4info_pb2.CounterSpec.PACKETS:
            data.byte_count = octets
        return data

    def _cells(self, counter, req: p4runtime_pb2.CounterEntry | p4runtime_pb2.RegisterEntry) -> range:
        """The cells a request names (all of them without an index); a counter or a register."""
        if not req.HasField("index"):
            return range(counter.size)
        if not 0 <= req.index.index < counter.size:
            raise rpc_error("OUT_OF_RANGE", f"{counter.name}: index {req.index.index} >= size {counter.size}")
        return range(req.index.index, req.index.index + 1)

    def write_counter(self, kind: int, req: p4runtime_pb2.CounterEntry) -> None:
        if kind != MODIFY:
            raise rpc_error("INVALID_ARGUMENT", "counter entries can only be modified")
        if not req.counter_id:
            raise rpc_error("INVALID_ARGUMENT", "a counter write names its counter")
        counter = self.switch.counters[self.counters[self._counter_ids(req.counter_id)[0]].preamble.name]
        for i in self._cells(counter, req):
            counter.packets[i], counter.bytes[i] = req.data.packet_count, req.data.byte_count

    def read_counters(self, req: p4runtime_pb2.CounterEntry) -> Iterator[p4runtime_pb2.CounterEntry]:
        for cid in self._counter_ids(req.counter_id):
            info = self.counters[cid]
            counter = self.switch.counters[info.preamble.name]
            for i in self._cells(counter, req):
                yield p4runtime_pb2.CounterEntry(counter_id=cid, index=p4runtime_pb2.Index(index=i),
                                                 data=self._data(info.spec.unit, counter.packets[i], counter.bytes[i]))

    def _direct_entries(self, te: p4runtime_pb2.TableEntry) -> Iterator[tuple[p4info_pb2.DirectCounter, Table,
                                                                               p4info_pb2.Table, Entry]]:
        if te.is_default_action:
            raise rpc_error("UNIMPLEMENTED", "direct counters of default entries are not supported (as on BMv2)")
        for table, info in self._tables(te.table_id):
            dc = self.direct_counters.get(info.preamble.id)
            if dc is None:
                if te.table_id:
                    raise rpc_error("INVALID_ARGUMENT", f"{table.name} has no direct counter")
                continue
            if te.match:
                e = table.find(self._match(table, info, te), te.priority)
                if e is None:
                    raise rpc_error("NOT_FOUND", f"{table.name}: no such entry")
                yield dc, table, info, e
            else:
                for e in sorted(table.entries(), key=lambda e: e.handle):
                    yield dc, table, info, e

    def write_direct_counter(self, kind: int, req: p4runtime_pb2.DirectCounterEntry) -> None:
        if kind != MODIFY:
            raise rpc_error("INVALID_ARGUMENT", "direct counter entries can only be modified")
        if not req.table_entry.table_id:
            raise rpc_error("INVALID_ARGUMENT", "a direct counter write names its table")
        for _, _, _, e in self._direct_entries(req.table_entry):
            e.counter[:] = [req.data.packet_count, req.data.byte_count]

    def read_direct_counters(self, req: p4runtime_pb2.DirectCounterEntry) -> Iterator[p4runtime_pb2.DirectCounterEntry]:
        for dc, table, info, e in self._direct_entries(req.table_entry):
            yield p4runtime_pb2.DirectCounterEntry(table_entry=self._entry_message(table, info, e, False),
                                                   data=self._data(dc.spec.unit, *e.counter))

    # ------------------------------------------------------------------ registers (debugging only)
    def read_registers(self, req: p4runtime_pb2.RegisterEntry) -> Iterator[p4runtime_pb2.RegisterEntry]:
        ids = [req.register_id] if req.register_id else list(self.registers)
        for rid in ids:
            info = self.registers.get(rid)
            if info is None:
                raise rpc_error("INVALID_ARGUMENT", f"no register with id {rid}")
            reg = self.switch.registers[info.preamble.name]
            for i in self._cells(reg, req):
                v = reg.cells[i]
                if isinstance(v, bool):
                    data = p4data_pb2.P4Data(bool=v)
                else:
                    width = info.type_spec.bitstring.int.bitwidth or info.type_spec.bitstring.bit.bitwidth
                    data = p4data_pb2.P4Data(bitstring=encode_int(v % (1 << width)))
                yield p4runtime_pb2.RegisterEntry(register_id=rid, index=p4runtime_pb2.Index(index=i), data=data)

