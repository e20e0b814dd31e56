"""A host's relay in C (relay.c): ``worker.relay.Relay``'s interface, its per-packet work without Python.

The relay runs per packet in the virtual fabric and on sockets, where the reference's tens of microseconds a
packet are too slow.  ``NativeRelay`` is the reference's class with ``receive`` and ``receive_batch`` in C: the
trees are checked, and the cells (``Cells``) and counters (``RelayStats``) made, by the reference's
constructor, then lent to C, so they read the same way on both.  A batch of datagrams for one port costs one
call (``ina_relay_receive``); tests/test_native_relay.py checks both relays agree byte for byte.
``relay_class()`` is the relay a host runs: this one where the C builds, else the reference.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from worker import engine
from worker.native import _lib, _ptr, core
from worker.protocol import Protocol
from worker.relay import MAX_PORT, Output, Outputs, Relay, RelayTree, batch

ROOM = 4096  # outputs one call may write (a bigger batch takes more calls)
CELLS = {  # Cells' arrays, as relay.c reads them
    "bitmap": ("uint32_t *", np.uint32), "round_seq": ("uint32_t *", np.uint32), "asked": ("uint32_t *", np.uint32),
    "arrivals": ("uint8_t *", np.uint8), "answered": ("uint8_t *", np.bool_), "flags": ("uint8_t *", np.uint8),
    "round_epoch": ("uint16_t *", np.uint16), "exponent": ("int8_t *", np.int8), "lanes": ("int32_t *", np.int32)}


class NativeRelay(Relay):
    """``worker.relay.Relay``, receiving in C."""

    def __init__(self, trees: list[RelayTree] | tuple[RelayTree, ...], protocol: Protocol) -> None:
        ffi, _ = _lib()
        super().__init__(trees, protocol)
        self._layout = self._fill_layout(ffi, protocol)
        self._trees = ffi.new("ina_relay_tree[]", max(1, len(self.trees)))
        for k, tree in enumerate(self.trees.values()):
            self._fill_tree(ffi, self._trees[k], tree)
        self.fanout = max([len(t.children) for t in self.trees.values()] + [1])
        r = self._r = ffi.new("ina_relay *")
        r.layout, r.trees, r.n_trees, r.fanout = self._layout, self._trees, len(self.trees), self.fanout
        r.drops = _ptr(ffi, "int64_t *", self.stats.drops)
        self._out = ffi.new("ina_relay_outputs *")
        self._room = max(ROOM, self.fanout)
        self._ports = np.empty(self._room, np.int32)
        self._receivers = np.empty(self._room, np.int32)
        self._payloads = np.empty((self._room, protocol.packet_bytes), np.uint8)
        o = self._out
        o.ports, o.receivers = _ptr(ffi, "int32_t *", self._ports), _ptr(ffi, "int32_t *", self._receivers)
        o.payloads, o.cap = _ptr(ffi, "uint8_t *", self._payloads), self._room
        self._length = np.zeros(1, np.int64)
        self._length_ptr = _ptr(ffi, "int64_t *", self._length)

    @staticmethod
    def _fill_layout(ffi: Any, P: Protocol) -> Any:
        """The protocol's numbers, by name: the upper-case fields are its constants, the others its layout."""
        if P.header_bytes > 16:
            raise ValueError("the native relay takes headers of at most 16 bytes")
        layout = ffi.new("ina_relay_layout *")
        layout.header_bytes, layout.packet_bytes, layout.values = P.header_bytes, P.packet_bytes, P.values
        for name, _ in ffi.typeof("ina_relay_layout").fields:
            if name.isupper():
                setattr(layout, name, P.constants[name])
            elif name in P.layout:
                shift, width, signed = P.layout[name]
                if width > 32:
                    raise ValueError(f"ina_t.{name} is {width} bits: the native relay reads fields of at most 32")
                getattr(layout, name)[0:3] = [shift, width, int(signed)]
        return layout

    def _fill_tree(self, ffi: Any, t: Any, tree: RelayTree) -> None:
        t.job_id, t.pool_size, t.is_root, t.epoch = tree.job_id, tree.pool_size, int(tree.is_root), tree.epoch
        t.has_parent = int(tree.parent_port is not None)
        t.parent_port = -1 if tree.parent_port is None else tree.parent_port
        t.index_at_parent = -1 if tree.index_at_parent is None else tree.index_at_parent
        t.peer = -1 if tree.peer is None else tree.peer
        t.n_children = len(tree.children)
        for c, (index, port) in enumerate(tree.children):
            t.child_index[c], t.child_port[c] = index, port
        cells = self.cells[tree.job_id]
        for name, (ctype, dtype) in CELLS.items():
            array = getattr(cells, name)
            if array.dtype != dtype or not array.flags.c_contiguous:
                raise TypeError(f"Cells.{name} is {array.dtype}: relay.c reads it as one array of {ctype}")
            setattr(t, name, _ptr(ffi, ctype, array))
        t.job_stats = _ptr(ffi, "int64_t *", self.stats.jobs[tree.job_id])

    def receive(self, port: int, payload: bytes | bytearray | memoryview) -> list[Output]:
        """One datagram, straight to C (a batch of one, without numpy's wrapping: this is the per-packet path)."""
        ffi, lib = _lib()
        data = bytes(payload)
        self._length[0] = len(data)
        lib.ina_relay_receive(self._r, _port(port), ffi.from_buffer(data), len(data), self._length_ptr, 1, self._out)
        n = self._out.n
        return [Output(p, r, self._payloads[j].tobytes())
                for j, (p, r) in enumerate(zip(self._ports[:n].tolist(), self._receivers[:n].tolist()))]

    def receive_batch(self, port: int, rows: np.ndarray, lengths: np.ndarray | list[int]) -> Outputs:
        ffi, lib = _lib()
        rows, lengths = batch(rows, lengths)
        port = _port(port)
        k, stride, out, done, parts = len(rows), rows.shape[1], self._out, 0, []
        while True:
            lib.ina_relay_receive(self._r, port, _ptr(ffi, "uint8_t *", rows[done:]), stride,
                                  _ptr(ffi, "int64_t *", lengths[done:]), k - done, out)
            n = out.n
            parts.append((self._ports[:n].copy(), self._receivers[:n].copy(), self._payloads[:n].copy()))
            done += out.taken
            if done >= k:
                break
        if len(parts) == 1:
            return Outputs(*parts[0])
        return Outputs(*(np.concatenate(columns) for columns in zip(*parts)))


def _port(port: object) -> int:
    """The port as C takes it: -1 for what is no port (no child is on it: refused as an unknown member, as
    the reference refuses it)."""
    try:
        port = operator.index(port)
    except TypeError:
        return -1
    return port if 0 <= port <= MAX_PORT else -1


def relay_class() -> type[Relay]:
    """``NativeRelay`` where the native core builds, else the reference ``Relay`` (as ``native.core()`` chooses,
    and says why once)."""
    return Relay if core() is engine else NativeRelay
