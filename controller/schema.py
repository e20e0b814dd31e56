"""Names to P4Runtime ids and values to bytestrings, from a P4Info.

Entities are built and read back by name (``"InaIngress.jobs"``, ``"hdr.ina.job_id"``) and
plain ints, so the rest of the controller never handles ids or byte encodings.  Values are
sent canonical (shortest bytestring) and checked against their bit width first.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from p4target.runtime.entities import encode_int

MatchValue = int | tuple[int, int]  # exact value, or (value, prefix length) for lpm


@dataclass(frozen=True)
class Entry:
    """A table entry in names and ints: what the controller installs and reads back."""

    table: str
    match: tuple[tuple[str, MatchValue], ...]
    action: str
    params: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, table: str, match: dict[str, MatchValue], action: str, params: dict[str, int] | None = None) -> Entry:
        return cls(table, tuple(sorted(match.items())), action, tuple(sorted((params or {}).items())))

    def param(self, name: str) -> int:
        return dict(self.params)[name]

    def key(self, name: str) -> MatchValue:
        return dict(self.match)[name]


def encode(value: int, width: int, what: str) -> bytes:
    if not 0 <= value < (1 << width):
        raise ValueError(f"{what}={value} does not fit in {width} bits")
    return encode_int(value)


class Schema:
    def __init__(self, p4info: p4info_pb2.P4Info) -> None:
        self.p4info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}
        self._by_id = {o.preamble.id: o.preamble.name for kind in (p4info.tables, p4info.actions) for o in kind}

    def _table(self, name: str) -> p4info_pb2.Table:
        try:
            return self.tables[name]
        except KeyError:
            raise KeyError(f"P4Info has no table {name}") from None

    def table_entry(self, entry: Entry) -> p4runtime_pb2.TableEntry:
        table = self._table(entry.table)
        fields = {f.name: f for f in table.match_fields}
        te = p4runtime_pb2.TableEntry(table_id=table.preamble.id)
        for name, value in entry.match:
            f = fields[name]
            m = te.match.add(field_id=f.id)
            what = f"{entry.table} key {name}"
            if f.match_type == p4info_pb2.MatchField.LPM:
                v, prefix = value if isinstance(value, tuple) else (value, f.bitwidth)
                m.lpm.value, m.lpm.prefix_len = encode(v, f.bitwidth, what), prefix
            else:
                m.exact.value = encode(int(value), f.bitwidth, what)
        action = self.actions[entry.action]
        te.action.action.action_id = action.preamble.id
        widths = {p.name: (p.id, p.bitwidth) for p in action.params}
        if set(widths) != {n for n, _ in entry.params}:
            raise ValueError(f"{entry.action} takes {sorted(widths)}, got {sorted(n for n, _ in entry.params)}")
        for name, value in entry.params:
            pid, width = widths[name]
            te.action.action.params.add(param_id=pid, value=encode(value, width, f"{entry.action}({name})"))
        return te

    def match_only(self, entry: Entry) -> p4runtime_pb2.TableEntry:
        te = self.table_entry(entry)
        te.ClearField("action")
        return te

    def wildcard(self, table: str) -> p4runtime_pb2.Entity:
        """A Read request entity for all entries of a table."""
        return p4runtime_pb2.Entity(table_entry=p4runtime_pb2.TableEntry(table_id=self._table(table).preamble.id))

    def decode(self, te: p4runtime_pb2.TableEntry) -> Entry:
        table = self.tables[self._by_id[te.table_id]]
        names = {f.id: f.name for f in table.match_fields}
        match = []
        for m in te.match:
            value = int.from_bytes(m.exact.value if m.HasField("exact") else m.lpm.value, "big")
            match.append((names[m.field_id], (value, m.lpm.prefix_len) if m.HasField("lpm") else value))
        action = self.actions[self._by_id[te.action.action.action_id]]
        pnames = {p.id: p.name for p in action.params}
        params = tuple((pnames[p.param_id], int.from_bytes(p.value, "big")) for p in te.action.action.params)
        return Entry(table.preamble.name, tuple(sorted(match)), action.preamble.name, tuple(sorted(params)))

    def counter_id(self, name: str) -> int:
        return self.counters[name].preamble.id


def multicast_group(group_id: int, replicas: list[tuple[int, int]]) -> p4runtime_pb2.Entity:
    """A multicast group of (egress port, instance) replicas; the instance is egress_rid."""
    entity = p4runtime_pb2.Entity()
    g = entity.packet_replication_engine_entry.multicast_group_entry
    g.multicast_group_id = group_id
    for port, instance in replicas:
        g.replicas.add(egress_port=port, instance=instance)
    return entity
