"""Ethernet/IPv4/UDP framing between a simulated worker's datagrams and the wire.

A worker's packets of one tree all have one size, so their header bytes (``ETH_IP_UDP``) are one constant
(the IPv4 checksum included) put in front of each payload; UDP checksums are 0, as IPv4
allows.  ``udp_payload`` is the other way: a frame for this host, or None for anything else.
"""

from __future__ import annotations

import ipaddress
import struct

from worker.protocol import ETH_IP_UDP

ETHERTYPE_IPV4 = 0x0800
UDP = 17


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def mac_bytes(mac: str) -> bytes:
    return bytes(int(x, 16) for x in mac.split(":"))


def udp_header(src_mac: str, dst_mac: str, src_ip: str, dst_ip: str, src_port: int, dst_port: int,
               payload_bytes: int) -> bytes:
    """The ``ETH_IP_UDP`` bytes in front of a payload of this size."""
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + payload_bytes, 0, 0x4000, 64, UDP, 0,
                     ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    eth = mac_bytes(dst_mac) + mac_bytes(src_mac) + struct.pack("!H", ETHERTYPE_IPV4)
    return eth + ip + struct.pack("!HHHH", src_port, dst_port, 8 + payload_bytes, 0)


def udp_payload(frame: bytes, ip: bytes) -> tuple[int, bytes] | None:
    """(UDP destination port, payload) of an IPv4/UDP frame addressed to ``ip`` (4 bytes), else None."""
    if len(frame) < ETH_IP_UDP or frame[12:14] != b"\x08\x00" or frame[14] != 0x45 or frame[23] != UDP \
            or frame[30:34] != ip:
        return None
    return (frame[36] << 8) | frame[37], frame[ETH_IP_UDP:]
