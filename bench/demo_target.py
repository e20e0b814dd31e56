"""What `make demo` runs until the aggregation demo lands: the built-in target executing
P4 source.  It loads tests/p4/basic.p4, installs routes, forwards packets, shows the
rewritten headers, then aggregates gradient chunks through tests/p4/register64.p4.
"""

from __future__ import annotations

import shutil

from scapy.all import IP, UDP, Ether, raw

from p4target.executor.switch import Switch
from p4target.executor.tables import lpm

from .bench_target import P4


def main() -> None:
    if shutil.which("simple_switch_grpc"):
        print("note: simple_switch_grpc is installed; this demo still shows the built-in target")
    print("== IPv4 forwarding: tests/p4/basic.p4 on the built-in target")
    sw = Switch.from_file(P4 / "basic.p4")
    table = sw.tables["MyIngress.ipv4_lpm"]
    table.add([lpm(0x0A000100, 24, 32)], "MyIngress.ipv4_forward", [0x00AA00000001, 1])
    table.add([lpm(0x0A000200, 24, 32)], "MyIngress.ipv4_forward", [0x00AA00000002, 2])
    for dst in ("10.0.1.5", "10.0.2.9", "192.168.1.1"):
        pkt = Ether(src="00:00:00:00:00:03", dst="00:00:00:00:00:ff") / IP(src="10.0.3.3", dst=dst, ttl=64) / UDP()
        out = sw.process(3, raw(pkt))
        if not out:
            print(f"  {dst:>12}: dropped (no route)")
            continue
        o = Ether(out[0].data)
        print(f"  {dst:>12}: out port {out[0].port}, dst mac {o.dst}, ttl {o[IP].ttl}, checksum {o[IP].chksum:#06x}")
    print("== Summing int32 vectors in registers: tests/p4/register64.p4")
    agg = Switch.from_file(P4 / "register64.p4")
    for worker in range(4):
        lanes = [worker * 100 + i for i in range(64)]
        payload = (0).to_bytes(4, "big") + b"".join(v.to_bytes(4, "big") for v in lanes)
        out = agg.process(worker + 1, payload)
    sums = [int.from_bytes(out[0].data[4 + 4 * i:8 + 4 * i], "big") for i in range(64)]
    print(f"  after 4 workers, lanes 0..3 hold {sums[:4]} (expected {[600 + 4 * i for i in range(4)]})")


if __name__ == "__main__":
    main()
