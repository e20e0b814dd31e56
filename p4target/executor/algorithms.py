"""Hash and checksum algorithms, bit for bit as BMv2 computes them.

Inputs are built like BMv2's field-list calculations: the fields' bits concatenated
most-significant first, zero-padded at the *end* to a whole byte.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence


def pack_bits(values: Sequence[int | None], widths: Sequence[int]) -> bytes:
    """Concatenate fields MSB-first; pad with zero bits at the end to a byte boundary.
    A ``None`` value (a field of an invalid header) contributes no bits, as in BMv2."""
    acc, nbits = 0, 0
    for v, w in zip(values, widths):
        if v is None:
            continue
        acc = (acc << w) | (v & ((1 << w) - 1))
        nbits += w
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071): ones' complement of the ones' complement sum."""
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _crc16_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1  # 0xA001: 0x8005 reflected
        table.append(crc)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC-16/ARC: poly 0x8005, reflected in and out, init 0, no final xor (BMv2 'crc16')."""
    crc = 0
    for b in data:
        crc = (crc >> 8) ^ _CRC16[(crc ^ b) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def identity(data: bytes) -> int:
    """BMv2 'identity': the buffer's first (at most) 8 bytes as a big-endian number."""
    return int.from_bytes(data[:8], "big")


HASHES: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc32": crc32,
    "csum16": csum16,
    "identity": identity,
}


def hash_offset(algorithm: Callable[[bytes], int], data: bytes, base: int, size: int) -> int:
    """v1model hash(): base + (h mod max), with max 0 treated as 1 like BMv2."""
    return base + algorithm(data) % (size or 1)
