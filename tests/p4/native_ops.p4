/* native_ops.p4: the integer operations at their widest (64 bits) and at odd widths, for the
 * native fast path's differential test (tests/test_native.py): the packet carries the operands,
 * ingress writes every result into the out header, and random operands must give the same
 * bytes on the Python executor and the native path.  Wrapping, signed and unsigned compares
 * and shifts, saturation, casts, slices, concatenation, division and modulo by constant powers
 * of two (the only run-time division p4c 1.2.5 keeps: it turns them into >> and &), a constant 0
 * divided by a run-time value, and a 64-bit register round trip. */
#include <core.p4>
#include <v1model.p4>

header ops_in_t {
    bit<64> x;
    bit<64> y;
    bit<8>  s;      // run-time shift amount
    bit<8>  k;      // register index
    bit<48> m;
    bit<5>  f;
    bit<3>  g;
}

header ops_out_t {
    bit<64> add;
    bit<64> sub;
    bit<64> mul;
    bit<64> band;
    bit<64> bor;
    bit<64> bxor;
    bit<64> bnot;
    bit<64> shl;
    bit<64> shr;
    bit<64> sshr;   // (int<64>)x >> s: arithmetic
    bit<64> sshl;
    bit<64> usadd;
    bit<64> ussub;
    bit<64> ssadd;
    bit<64> sssub;
    bit<64> div;
    bit<64> mod;
    bit<64> neg;
    bit<64> cmp;    // flags
    bit<64> cast;   // sign extension of a 48-bit value, through int<48>
    bit<64> cat;    // slices and ++
    bit<64> mix;    // odd widths
    bit<64> reg;    // the register cell before this packet's write
    bit<64> sreg;   // a signed register cell read back
}

struct metadata { }

struct headers {
    ops_in_t  i;
    ops_out_t o;
}

parser OpsParser(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control OpsVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control OpsIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    register<bit<64>>(16) cells;
    register<int<64>>(16) signed_cells;

    apply {
        bit<64> x = hdr.i.x;
        bit<64> y = hdr.i.y;
        int<64> sx = (int<64>)x;
        int<64> sy = (int<64>)y;
        bit<8> s = hdr.i.s;
        bit<64> before;
        cells.read(before, (bit<32>)hdr.i.k);
        int<64> sbefore;
        signed_cells.read(sbefore, (bit<32>)hdr.i.k);

        hdr.o.add = x + y;
        hdr.o.sub = x - y;
        hdr.o.mul = x * y;
        hdr.o.band = x & y;
        hdr.o.bor = x | y;
        hdr.o.bxor = x ^ y;
        hdr.o.bnot = ~x;
        hdr.o.shl = x << s;
        hdr.o.shr = x >> s;
        hdr.o.sshr = (bit<64>)(sx >> s);
        hdr.o.sshl = (bit<64>)(sx << s);
        hdr.o.usadd = x |+| y;
        hdr.o.ussub = x |-| y;
        hdr.o.ssadd = (bit<64>)(sx |+| sy);
        hdr.o.sssub = (bit<64>)(sx |-| sy);
        hdr.o.div = x / 64w0x100000000 + 64w0 / y;
        hdr.o.mod = x % 64w0x8000000000000000;
        hdr.o.neg = (bit<64>)(-sx);
        hdr.o.cmp = 54w0 ++ (bit<1>)(before > y) ++ (bit<1>)(sbefore < sy)
                    ++ (bit<1>)(x < y) ++ (bit<1>)(x > y) ++ (bit<1>)(x <= y) ++ (bit<1>)(x >= y)
                    ++ (bit<1>)(sx < sy) ++ (bit<1>)(sx > sy) ++ (bit<1>)(sx == sy) ++ (bit<1>)(sx != sy);
        hdr.o.cast = (bit<64>)(int<64>)(int<48>)hdr.i.m;
        hdr.o.cat = x[63:48] ++ y[15:0] ++ (x ^ y)[39:8];
        int<5> sf = (int<5>)hdr.i.f;
        hdr.o.mix = (bit<64>)(int<64>)(sf |+| (int<5>)(bit<5>)hdr.i.g) + (bit<64>)((bit<3>)hdr.i.f * hdr.i.g)
                    + ((bit<64>)(hdr.i.f - (bit<5>)hdr.i.g) << 16);
        hdr.o.reg = before;
        cells.write((bit<32>)hdr.i.k, x ^ (y << 1));
        hdr.o.sreg = (bit<64>)sbefore;
        signed_cells.write((bit<32>)hdr.i.k, sx - sy);
        sm.egress_spec = 1;
    }
}

control OpsEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control OpsComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control OpsDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.i);
        packet.emit(hdr.o);
    }
}

V1Switch(OpsParser(), OpsVerifyChecksum(), OpsIngress(), OpsEgress(), OpsComputeChecksum(), OpsDeparser()) main;
