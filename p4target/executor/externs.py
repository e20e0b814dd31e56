"""Stateful v1model externs: their state lives here, outside the per-packet state list."""

from __future__ import annotations

from ..frontend.types import BOOL, Type


class Register:
    """``register<T>(size)``: cells start at zero, like BMv2's."""

    def __init__(self, name: str, size: int, elem: Type) -> None:
        self.name = name
        self.size = size
        self.elem = elem
        self.cells: list = [False if elem is BOOL else 0] * size

    def reset(self) -> None:
        self.cells[:] = [False if self.elem is BOOL else 0] * self.size


class Counter:
    """``counter(size, type)``: packets and bytes per index; the unit only filters reads."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.packets = [0] * size
        self.bytes = [0] * size

    def reset(self, index: int | None = None) -> None:
        indexes = range(self.size) if index is None else [index]
        for i in indexes:
            self.packets[i] = 0
            self.bytes[i] = 0
