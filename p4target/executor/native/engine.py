"""The native packet path of one switch: the lowered program's library, and the state it shares
with the control plane.

The switch's Python objects stay the control plane's interface; their per-packet state moves
into arrays the C reads and writes in place: register cells, counters and tables' direct
counters become numpy arrays behind list-like views (``cells[i]``, ``packets[i]`` and
``entry.counter`` read and write as before).  Tables, value sets and multicast groups change
rarely: a change marks the engine dirty, and the next packet first rebuilds the C images of
what changed.  The caller holds the switch's lock around ``process`` and every control-plane
change, as before.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...frontend.types import BOOL, BitsT, HeaderT, Type
from ..tables import Table
from .lower import Lowered

log = logging.getLogger(__name__)

STAT_NAMES = ("received", "sent", "dropped", "internal_errors", "assert_failures", "loop_drops",
              "register_conflicts", "parser_drops")
DROP_MESSAGES = {1: "header stack index out of bounds", 2: "assert/assume failed",
                 3: "a register reached by a second RegisterAction execution (Tofino allows one per packet)",
                 4: "more output than the switch can buffer", 5: "a for loop ran too many times (loops.LOOP_LIMIT)"}
OUT_BYTES = 8 << 20  # one packet's outputs (replicas and recirculations included)
_P = ctypes.c_void_p
_I64 = ctypes.c_int64


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _to_python(t: Type) -> Callable[[Any], Any]:
    if t is BOOL:
        return bool
    if isinstance(t, BitsT) and not t.signed and t.width == 64:
        return lambda x: int(x) & 0xFFFF_FFFF_FFFF_FFFF
    return int


def _to_cell(v: Any) -> int:
    v = int(v)
    return v - (1 << 64) if v >= 1 << 63 else v


class NativeCells:
    """A register's cells as the C keeps them (int64 per field), read and written as the list
    of values (or of tuples, for a struct) the Python executor keeps."""

    def __init__(self, array: np.ndarray, elem: Type) -> None:
        self.array = array  # [size, fields]
        self.struct = isinstance(elem, HeaderT)
        self.convert = [_to_python(f) for f in (elem.fields.values() if self.struct else [elem])]

    def __len__(self) -> int:
        return len(self.array)

    def _get(self, i: int) -> Any:
        row = self.array[i]
        if self.struct:
            return tuple(c(x) for c, x in zip(self.convert, row))
        return self.convert[0](row[0])

    def _row(self, v: Any) -> list[int]:
        return [_to_cell(x) for x in (v if self.struct else (v,))]

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self._get(k) for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self._get(i)

    def _rows(self, values: Any) -> np.ndarray:
        """Many cells' rows at once, as ``_row`` makes each (bit<64> values from 2**63 wrap to negative):
        numpy converts the whole list, so a switch's registers are adopted in milliseconds."""
        values = list(values)
        try:
            rows = np.array(values, dtype=np.int64)
        except OverflowError:  # a bit<64> value at or above 2**63
            wide = np.array(values, dtype=object)
            rows = np.where(wide >= 1 << 63, wide - (1 << 64), wide).astype(np.int64)
        return rows.reshape(-1, self.array.shape[1])

    def __setitem__(self, i: int | slice, v: Any) -> None:
        if isinstance(i, slice):
            self.array[i] = self._rows(v)
        else:
            self.array[i] = self._row(v)

    def __iter__(self) -> Iterator[Any]:
        return (self._get(k) for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (list, tuple, NativeCells)) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"NativeCells({list(self)!r})"


class NativeCounts(NativeCells):
    """A counter's packets or bytes."""

    def __init__(self, array: np.ndarray) -> None:
        super().__init__(array.reshape(-1, 1), BitsT(63, True))


class CounterRow:
    """A table entry's direct counter ``[packets, bytes]``, kept by the C in its table's array."""

    def __init__(self, table: NativeTable, slot: int) -> None:
        self.table = table
        self.slot = slot

    def _cells(self) -> np.ndarray:
        return self.table.counters[self.slot]

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int | slice) -> Any:
        values = [int(x) for x in self._cells()]
        return values[i]

    def __setitem__(self, i: int | slice, v: Any) -> None:
        cells = self._cells()
        if isinstance(i, slice):
            cells[i] = [int(x) for x in v]
        else:
            cells[i] = int(v)

    def __iter__(self) -> Iterator[int]:
        return iter(self[:])

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, (list, tuple, CounterRow)) else False

    def __repr__(self) -> str:
        return repr(self[:])


class NativeTable:
    """The C image of one table: its rows in lookup order, the default last; direct counters
    in slots that entries keep while they live (a modify keeps its entry's slot)."""

    def __init__(self, table: Table, action_ids: dict[str, int]) -> None:
        self.table = table
        self.action_ids = action_ids
        self.counters = np.zeros((max(table.size, 1) + 1, 2), dtype=np.int64)
        self.arrays: tuple[np.ndarray, ...] = ()

    def build(self) -> tuple[np.ndarray, ...]:
        t = self.table
        rows = t.lookup_order()
        if t.has_direct_counter:  # new entries' counters move into the C's array
            used = {e.counter.slot for e in rows if isinstance(e.counter, CounterRow) and e.counter.table is self}
            free = (s for s in range(len(self.counters)) if s not in used)
            for e in rows:
                if not (isinstance(e.counter, CounterRow) and e.counter.table is self):
                    slot = next(free)
                    self.counters[slot] = [int(x) for x in e.counter]
                    e.counter = CounterRow(self, slot)
        nk, n = len(t.keys), len(rows)
        nargs = max([len(a.params) for a in t.actions.values()] + [1])
        a = np.zeros((max(n, 1), max(nk, 1)), dtype=np.uint64)
        b = np.zeros_like(a)
        range_keys = np.zeros(a.shape, dtype=np.uint8)
        for r, e in enumerate(rows):
            for k, (kind, x, y) in enumerate(e.match):
                a[r, k], b[r, k], range_keys[r, k] = x, y, kind == "range"
        action = np.array([self.action_ids[e.action.name] for e in rows]
                          + [self.action_ids[t.default_entry.action.name]], dtype=np.int32)
        slot = np.array([e.counter.slot if t.has_direct_counter else -1 for e in rows] + [-1], dtype=np.int32)
        args = np.zeros((n + 1, nargs), dtype=np.uint64)
        for r, e in enumerate([*rows, t.default_entry]):
            args[r, :len(e.args)] = e.args
        self.arrays = (range_keys, a, b, action, slot, args)
        return self.arrays


class NativeStats(MutableMapping):
    """The switch's counters, kept by the C (``Switch.stats``)."""

    def __init__(self, array: np.ndarray, names: tuple[str, ...]) -> None:
        self.array = array
        self.forks: list[np.ndarray] = []  # the counters of the pipeline's forks, added in
        self.names = names

    def __getitem__(self, k: str) -> int:
        if k not in STAT_NAMES:
            raise KeyError(k)
        i = STAT_NAMES.index(k)
        return int(self.array[i]) + sum(int(f[i]) for f in self.forks)

    def __setitem__(self, k: str, v: int) -> None:
        i = STAT_NAMES.index(k)
        self.array[i] = v
        for f in self.forks:
            f[i] = 0

    def __delitem__(self, k: str) -> None:
        raise TypeError("switch counters cannot be removed")

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class FrameBatch:
    """Frames packed for ``NativePipeline.process_batch``: their bytes end to end, where each starts, its
    length and its ingress port."""

    data: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    ports: np.ndarray

    @classmethod
    def pack(cls, frames: list[tuple[int, bytes]]) -> FrameBatch:
        lengths = np.array([len(d) for _, d in frames], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        data = np.frombuffer(b"".join(d for _, d in frames) or b"\0", dtype=np.uint8)
        return cls(data, offsets, lengths, np.array([p for p, _ in frames], dtype=np.int32))

    def __len__(self) -> int:
        return len(self.lengths)


class _Context:
    """One C context of a pipeline: a packet's outputs and the counters, and ``lock``, held while a thread runs
    packets through it (``sync`` takes every context's lock before it replaces the arrays they read)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.lock = threading.Lock()
        self.ctx = lib.p4t_new()
        if not self.ctx:
            raise MemoryError("cannot allocate the native switch state")
        self._out = np.zeros(OUT_BYTES, dtype=np.uint8)
        lib.p4t_set_out(_P(self.ctx), _P(_ptr(self._out)), ctypes.c_long(OUT_BYTES))
        self._out_addr = _ptr(self._out)
        self._port = (ctypes.c_int32 * 1024).from_address(lib.p4t_out_port(_P(self.ctx)))
        self._off = (_I64 * 1024).from_address(lib.p4t_out_off(_P(self.ctx)))
        self._size = (_I64 * 1024).from_address(lib.p4t_out_size(_P(self.ctx)))
        self._stats_array = np.ctypeslib.as_array((_I64 * len(STAT_NAMES)).from_address(lib.p4t_stats(_P(self.ctx))))

    def __del__(self) -> None:
        ctx, self.ctx = getattr(self, "ctx", None), None
        if ctx:
            self.lib.p4t_free(_P(ctx))

    def io_binding(self) -> tuple[int, ...]:
        """What portio.c and udpio.c need to run this context: p4t_process, the ctx, and where the outputs
        of a packet are."""
        process = ctypes.cast(self.lib.p4t_process, _P).value
        return (process, self.ctx, self._out_addr, ctypes.addressof(self._port), ctypes.addressof(self._off),
                ctypes.addressof(self._size))


class _Locks:
    """Several locks taken together, always in one order."""

    def __init__(self, locks: list[threading.Lock]) -> None:
        self.locks = locks

    def __enter__(self) -> None:
        for lock in self.locks:
            lock.acquire()

    def __exit__(self, *_: object) -> None:
        for lock in reversed(self.locks):
            lock.release()


class NativeFork(_Context):
    """A pipeline's context for another packet thread (``NativePipeline.fork``): the pipeline's registers and
    counters (the same arrays), its tables, value sets and groups (set by the pipeline's ``sync``)."""

    def __init__(self, pipeline: NativePipeline) -> None:
        super().__init__(pipeline.lib)
        self.pipeline = pipeline
        for i, cells in enumerate(pipeline._registers):
            self.lib.p4t_set_register(_P(self.ctx), i, _P(_ptr(cells)))
        for i, (packets, nbytes) in enumerate(pipeline._counters):
            self.lib.p4t_set_counter(_P(self.ctx), i, _P(_ptr(packets)), _P(_ptr(nbytes)))


class NativePipeline(_Context):
    """The switch's packet path in C; ``process`` has ``Switch.process``'s contract."""

    source = ""  # the C it runs (p4target-check --show-c)

    def __init__(self, lowered: Lowered, lib: ctypes.CDLL, multicast_groups: dict[int, list[tuple[int, int]]],
                 make_output: Callable[[int, bytes], Any], stat_names: tuple[str, ...]) -> None:
        self.lib = lib
        self.objects = lowered.objects
        self.banks = lowered.banks
        self.groups = multicast_groups
        self.make_output = make_output
        for name, restype in (("p4t_new", _P), ("p4t_stats", _P), ("p4t_out_port", _P), ("p4t_out_off", _P),
                              ("p4t_out_size", _P), ("p4t_process", ctypes.c_int),
                              ("p4t_process_batch", ctypes.c_long)):
            getattr(lib, name).restype = restype
        lib.p4t_process.argtypes = [_P, ctypes.c_int, ctypes.c_char_p, ctypes.c_long]
        super().__init__(lib)
        self.stats = NativeStats(self._stats_array, stat_names)
        self._forks: list[NativeFork] = []
        self._registers: list[np.ndarray] = []  # each register's cells, for the forks' contexts
        self._counters: list[tuple[np.ndarray, np.ndarray]] = []
        self._keep: list[Any] = []  # arrays the C points into
        self._adopt_registers()
        self._adopt_counters()
        self.tables = [NativeTable(t, {n: i for i, n in enumerate(self.objects.actions)})
                       for t in self.objects.tables]
        self._dirty_tables = set(range(len(self.tables)))
        self._dirty_other = True
        for i, t in enumerate(self.objects.tables):
            t.on_change = self._table_changed(i)
        for vs in self.objects.value_sets:
            vs.on_change = self.changed
        multicast_groups.on_change = self.changed
        self._process = lib.p4t_process

    # ------------------------------------------------------------------ state
    def _adopt_registers(self) -> None:
        """Each register's cells move into an int64 array the C reads: its own ``[size, fields]``, or a
        column of its bank's ``[size, K]`` (lower.py ``_bank``); the C finds the column at the
        register's pointer, and a bank's rows through its first register's."""
        columns: dict[int, tuple[np.ndarray, int]] = {}
        for first, width in self.banks:
            bank = np.zeros((self.objects.registers[first].size, width), dtype=np.int64)
            self._keep.append(bank)
            columns.update({first + col: (bank, col) for col in range(width)})
        for i, reg in enumerate(self.objects.registers):
            if i in columns:
                bank, col = columns[i]
                array = bank[:, col:col + 1]
            else:
                width = len(reg.elem.fields) if isinstance(reg.elem, HeaderT) else 1
                array = np.zeros((reg.size, width), dtype=np.int64)
                self._keep.append(array)
            view = NativeCells(array, reg.elem)
            cells = reg.cells
            if isinstance(cells, list) and cells and cells.count(cells[0]) == len(cells):
                row = view._row(cells[0])  # one value in every cell, as registers start: a fill, if not 0
                if any(row):
                    array[:] = row
            else:
                view[:] = cells
            reg.cells = view
            self._registers.append(array)
            self.lib.p4t_set_register(_P(self.ctx), i, _P(_ptr(array)))

    def _adopt_counters(self) -> None:
        for i, c in enumerate(self.objects.counters):
            packets = np.array(list(c.packets), dtype=np.int64)
            nbytes = np.array(list(c.bytes), dtype=np.int64)
            c.packets, c.bytes = NativeCounts(packets), NativeCounts(nbytes)
            self._keep += [packets, nbytes]
            self._counters.append((packets, nbytes))
            self.lib.p4t_set_counter(_P(self.ctx), i, _P(_ptr(packets)), _P(_ptr(nbytes)))

    def _table_changed(self, i: int) -> Callable[[], None]:
        def changed() -> None:
            self._dirty_tables.add(i)
        return changed

    def changed(self) -> None:
        """Multicast groups or value sets changed: rebuild their C images before the next packet."""
        self._dirty_other = True

    @property
    def dirty(self) -> bool:
        """Whether the control plane changed what ``sync`` rebuilds (read without a lock, as a hint)."""
        return bool(self._dirty_tables) or self._dirty_other

    def sync_if_dirty(self) -> None:
        if self._dirty_tables or self._dirty_other:
            self.sync()

    def fork(self) -> NativeFork:
        """Another context on this pipeline's state, for another packet thread (the caller holds the switch's
        lock): the same registers, counters, tables, value sets and multicast groups, its own outputs."""
        self.sync_if_dirty()  # the images the fork is pointed at are built
        fork = NativeFork(self)
        with self._every_context():
            self._forks.append(fork)
            self._set_images([fork.ctx], range(len(self.tables)))
        self.stats.forks.append(fork._stats_array)
        return fork

    def _every_context(self) -> _Locks:
        return _Locks([self.lock, *(f.lock for f in self._forks)])

    def sync(self) -> None:
        """Rebuild the C images of what changed, in every context, once no thread runs packets through one
        (the old arrays are freed as they are replaced)."""
        with self._every_context():
            for i in self._dirty_tables:
                self.tables[i].build()
            if self._dirty_other:
                self._build_groups()
                self._build_value_sets()
            self._set_images([self.ctx, *(f.ctx for f in self._forks)], sorted(self._dirty_tables),
                             self._dirty_other)
            self._dirty_tables.clear()
            self._dirty_other = False

    def _set_images(self, contexts: list[int], tables: Iterable[int], other: bool = True) -> None:
        """Point ``contexts`` at the built images of ``tables`` (and of the groups and value sets)."""
        for i in tables:
            nt = self.tables[i]
            t = nt.table
            range_keys, a, b, action, slot, args = nt.arrays
            for ctx in contexts:
                self.lib.p4t_set_table(_P(ctx), i, len(t.keys), len(action) - 1, args.shape[1], int(t.exact_only),
                                       *(_P(_ptr(x)) for x in (range_keys, a, b, action, slot, args, nt.counters)))
        if not other:
            return
        for ctx in contexts:
            self.lib.p4t_set_mcast(_P(ctx), len(self._group_arrays[0]) - 1,
                                   *(_P(_ptr(x)) for x in self._group_arrays))
            for i, (vs, (value, mask)) in enumerate(zip(self.objects.value_sets, self._vs_arrays)):
                self.lib.p4t_set_vset(_P(ctx), i, len(vs.members), len(vs.widths), _P(_ptr(value)), _P(_ptr(mask)))

    def _build_groups(self) -> None:
        groups = sorted(self.groups.items())
        ids = np.array([g for g, _ in groups] + [0], dtype=np.int64)
        start = np.cumsum([0] + [len(r) for _, r in groups], dtype=np.int64).astype(np.int32)
        ports = np.array([p for _, r in groups for p, _ in r] + [0], dtype=np.int32)
        rids = np.array([rid for _, r in groups for _, rid in r] + [0], dtype=np.int32)
        self._group_arrays = (ids, start, ports, rids)

    def _build_value_sets(self) -> None:
        self._vs_arrays = []
        for vs in self.objects.value_sets:
            members = vs.members
            nk = len(vs.widths)
            value = np.array([[v for v, _ in m] for m in members] or [[0] * nk], dtype=np.uint64)
            mask = np.array([[m for _, m in m_] for m_ in members] or [[0] * nk], dtype=np.uint64)
            self._vs_arrays.append((value, mask))

    # ------------------------------------------------------------------ packets
    def process(self, port: int, data: bytes) -> list[Any]:
        self.sync_if_dirty()
        with self.lock:
            n = self._process(self.ctx, port, data, len(data))
        if n <= 0:
            if n < 0:
                log.error("packet on port %d dropped: %s", port, DROP_MESSAGES.get(-n, f"error {-n}"))
            return []
        base, at, size, make = self._out_addr, self._off, self._size, self.make_output
        ports = self._port
        return [make(ports[i], ctypes.string_at(base + at[i], size[i])) for i in range(n)]

    def process_batch(self, batch: FrameBatch) -> int:
        """Every frame of ``batch`` through the pipeline in one C call, their outputs counted and
        not kept (each packet's replace the last's): the pipeline's own cost, with no Python per
        packet (bench_ina --batch).  Returns the number of outputs."""
        self.sync_if_dirty()
        with self.lock:
                return self.lib.p4t_process_batch(_P(self.ctx), ctypes.c_int(len(batch)), *(_P(_ptr(a)) for a in (
                batch.ports, batch.data, batch.offsets, batch.lengths)))
