"""Packets per second through the built-in target, in-process (no ports, one core).

(a) IPv4 LPM forwarding with checksum update (tests/p4/basic.p4), (b) 64 register
read-add-write lanes per packet (tests/p4/register64.p4).  Prints the median of several
runs.  For scale, the latest measurement of real BMv2 (1.15.5, built from source) through veth
ports, peak delivered: 27,400 packets/s for IPv4 LPM, 3,183 for 64 register lanes, 1,026 for
256 lanes (bench_veth measures the built-in target through veth ports: its peak delivered rate).

    python -m bench.bench_target [--runs 5] [--packets 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from scapy.all import IP, UDP, Ether, raw

from p4target.executor.switch import Switch
from p4target.executor.tables import lpm

P4 = Path(__file__).resolve().parent.parent / "tests" / "p4"


def ipv4_forwarding() -> tuple[Switch, bytes]:
    sw = Switch.from_file(P4 / "basic.p4")
    table = sw.tables["MyIngress.ipv4_lpm"]
    for i in range(64):  # a realistic routing table, several prefix lengths
        table.add([lpm(0x0A000000 | (i << 16), 16, 32)], "MyIngress.ipv4_forward", [0x0200000000 + i, i % 8 + 1])
    table.add([lpm(0x0A000000, 8, 32)], "MyIngress.ipv4_forward", [0x020000000001, 1])
    packet = raw(Ether() / IP(dst="10.5.1.2", ttl=64) / UDP(sport=1, dport=2) / bytes(64))
    return sw, packet


def register_lanes() -> tuple[Switch, bytes]:
    sw = Switch.from_file(P4 / "register64.p4")
    packet = (7).to_bytes(4, "big") + b"".join(i.to_bytes(4, "big") for i in range(64))
    return sw, packet


def measure(sw: Switch, packet: bytes, packets: int) -> float:
    process = sw.process
    start = time.perf_counter()
    for _ in range(packets):
        process(1, packet)
    return packets / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--packets", type=int, default=20000)
    args = ap.parse_args()
    for name, setup in (("ipv4 lpm + checksum", ipv4_forwarding), ("64 register lanes", register_lanes)):
        sw, packet = setup()
        assert sw.process(1, packet), f"{name}: the benchmark packet was dropped"
        rates = []
        for run in range(args.runs):
            rates.append(measure(sw, packet, args.packets))
            print(f"  {name}: run {run + 1}/{args.runs}: {rates[-1]:,.0f} pps", flush=True)
        print(f"{name}: median {statistics.median(rates):,.0f} pps "
              f"(min {min(rates):,.0f}, max {max(rates):,.0f}, {args.runs} runs x {args.packets} packets)")


if __name__ == "__main__":
    main()
