"""Stateful v1model externs: their state lives here, outside the per-packet state list."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from ..frontend.types import BOOL, Type

log = logging.getLogger("p4target.p4")


class Hooks:
    """What generated code reaches outside the packet: the clock, digests, logging, random."""

    def __init__(self) -> None:
        self.micros = lambda: 0  # the switch installs its clock
        self.digests: list[tuple[str, int, tuple]] = []  # (struct name, receiver, field values)
        self.digest_sink: Callable[[str, int, tuple], None] | None = None  # the P4Runtime server's, else queued
        self.rng = random.Random()

    def digest(self, name: str, receiver: int, values: tuple) -> None:
        if self.digest_sink is not None:
            self.digest_sink(name, receiver, values)
        else:
            self.digests.append((name, receiver, values))

    @staticmethod
    def log_msg(fmt: str, values: tuple = ()) -> None:
        parts = fmt.split("{}")
        text = parts[0] + "".join(str(v) + p for v, p in zip(values, parts[1:]))
        log.info("%s", text)

    def random(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi) if lo <= hi else lo


class Register:
    """``register<T>(size)``: cells start at zero, like BMv2's."""

    def __init__(self, name: str, size: int, elem: Type) -> None:
        self.name = name
        self.size = size
        self.elem = elem
        self.cells: list = [False if elem is BOOL else 0] * size

    def reset(self) -> None:
        self.cells[:] = [False if self.elem is BOOL else 0] * self.size

    def __deepcopy__(self, memo: dict) -> Register:
        """Cells hold ints, bools or tuples of them: a copy of the list is a copy of the state,
        made at C speed (a switch of ina.p4 has half a million cells; ``Generated.copy``)."""
        new = memo[id(self)] = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.cells = list(self.cells)
        return new


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

    def __deepcopy__(self, memo: dict) -> Counter:
        """As ``Register``'s: the counts are ints."""
        new = memo[id(self)] = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.packets, new.bytes = list(self.packets), list(self.bytes)
        return new


class MeterCell:
    """One trTCM meter as BMv2 runs it (bm_sim/meters.cpp): a peak bucket checked first
    (short of tokens: RED), then a committed bucket (short: YELLOW), else GREEN.  Buckets
    start full and refill from the time the switch started; an unconfigured meter is GREEN."""

    __slots__ = ("rates",)

    def __init__(self) -> None:
        self.rates: list[list] | None = None  # [rate per us, burst, tokens, tokens_last, colour]

    def configure(self, cir: int, cburst: int, pir: int, pburst: int) -> None:
        """Rates per second (P4Runtime units); BMv2 keeps them per microsecond."""
        self.rates = [[pir / 1e6, pburst, pburst, 0, 2], [cir / 1e6, cburst, cburst, 0, 1]]

    def config(self) -> tuple[int, int, int, int] | None:
        if self.rates is None:
            return None
        (p, pb, *_), (c, cb, *_) = self.rates
        return round(c * 1e6), cb, round(p * 1e6), pb

    def reset(self) -> None:
        self.rates = None

    def execute(self, micros: int, amount: int) -> int:
        if self.rates is None:
            return 0
        for rate in self.rates:
            since_init = int(micros * rate[0])
            rate[2] = min(rate[2] + since_init - rate[3], rate[1])
            rate[3] = since_init
            if rate[2] < amount:
                return rate[4]
            rate[2] -= amount
        return 0


class Meter:
    """``meter(size, type)`` and, with ``size`` 0, ``direct_meter`` (one cell per table entry)."""

    def __init__(self, name: str, size: int, unit: str, table: str | None = None) -> None:
        self.name = name
        self.size = size
        self.unit = unit  # packets | bytes
        self.table = table  # the table a direct meter is attached to
        self.cells = [MeterCell() for _ in range(size)]
        self.direct: dict[object, MeterCell] = {}  # table entry -> its cell

    def cell(self, entry: object) -> MeterCell:
        cell = self.direct.get(entry)
        if cell is None:
            cell = self.direct[entry] = MeterCell()
        return cell


class CloneSession:
    """A clone (mirror) session: replicas as (egress port, instance), an optional truncation."""

    __slots__ = ("replicas", "class_of_service", "packet_length_bytes")

    def __init__(self, replicas: list[tuple[int, int]], class_of_service: int = 0,
                 packet_length_bytes: int = 0) -> None:
        self.replicas = replicas
        self.class_of_service = class_of_service
        self.packet_length_bytes = packet_length_bytes


class ValueSet:
    """``value_set<T>(size)``: members as (value, mask) tuples, one per select key."""

    def __init__(self, name: str, size: int, widths: list[int]) -> None:
        self.name = name
        self.size = size
        self.widths = widths
        self.members: list[tuple[tuple[int, int], ...]] = []
        self.on_change: Callable[[], None] | None = None  # the native path rebuilds its image

    def set_members(self, members: list[tuple[tuple[int, int], ...]]) -> None:
        self.members[:] = members
        if self.on_change is not None:
            self.on_change()

    def matches(self, keys: tuple[int, ...]) -> bool:
        for member in self.members:
            if all(k & m == v for k, (v, m) in zip(keys, member)):
                return True
        return False
