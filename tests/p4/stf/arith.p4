/* arith.p4: expression semantics on bit<W> / int<W> / bool.
 *
 * The packet is an in_t header (operands) followed by an out_t header whose
 * bytes are ignored on input; ingress writes every result into out_t and the
 * deparser emits both, so the expected packet shows each computed value. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8>  a;
    bit<8>  b;
    bit<8>  sh;     // run-time shift amount (bit<8>: the widest bmv2 allows)
    bit<8>  pad;
    bit<16> w;
}

header out_t {
    bit<8>  add;    // a + b           (wraps)
    bit<8>  sub;    // a - b           (wraps)
    bit<8>  usadd;  // a |+| b         (unsigned saturating)
    bit<8>  ussub;  // a |-| b
    bit<8>  ssadd;  // (int<8>)a |+| (int<8>)b   (signed saturating)
    bit<8>  sssub;  // (int<8>)a |-| (int<8>)b
    bit<8>  band;   // a & b
    bit<8>  bor;    // a | b
    bit<8>  bxor;   // a ^ b
    bit<8>  bnot;   // ~a
    bit<8>  shl;    // a << sh         (0 when sh >= 8)
    bit<8>  shr;    // a >> sh         (0 when sh >= 8)
    bit<8>  shl3;   // a << 3
    bit<16> shw;    // w << sh         (0 when sh >= 16)
    bit<8>  cmp;    // comparison flags, see ingress
    bit<8>  logic;  // boolean-operator flags, see ingress
    bit<8>  mux;    // a > b ? a : b
    bit<16> wide;   // (bit<16>)a + (bit<16>)b   (no wrap at 8 bits)
    bit<8>  trunc;  // (bit<8>)w       (low byte)
    bit<16> sext;   // (bit<16>)(int<16>)(int<8>)a   (sign extension)
    bit<8>  neg;    // (bit<8>)(-(int<8>)a)
    bit<8>  hi;     // (bit<8>)a[7:4]
    bit<8>  slw;    // b with bits [3:0] replaced by a[7:4]
    bit<16> cat;    // a ++ b
    bit<8>  lit8;   // (bit<8>)(-8s1)               = 0xFF
    bit<16> lit16;  // 1_000                        = 0x03E8
    bit<8>  litmix; // (0x_FF & 0b1010) + 8w0x1_0 + 8w0o7 + 8w0d100 = 0x85
}

struct metadata { }

struct headers {
    in_t  i;
    out_t o;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        bit<8> a = hdr.i.a;
        bit<8> b = hdr.i.b;
        int<8> sa = (int<8>)a;
        int<8> sb = (int<8>)b;

        hdr.o.add   = a + b;
        hdr.o.sub   = a - b;
        hdr.o.usadd = a |+| b;
        hdr.o.ussub = a |-| b;
        hdr.o.ssadd = (bit<8>)(sa |+| sb);
        hdr.o.sssub = (bit<8>)(sa |-| sb);
        hdr.o.band  = a & b;
        hdr.o.bor   = a | b;
        hdr.o.bxor  = a ^ b;
        hdr.o.bnot  = ~a;
        hdr.o.shl   = a << hdr.i.sh;
        hdr.o.shr   = a >> hdr.i.sh;
        hdr.o.shl3  = a << 3;
        hdr.o.shw   = hdr.i.w << hdr.i.sh;

        // bit 7..0: a<b, a>b, a<=b, a>=b, a==b, a!=b, sa<sb, sa>sb
        hdr.o.cmp = (bit<1>)(a < b) ++ (bit<1>)(a > b) ++
                    (bit<1>)(a <= b) ++ (bit<1>)(a >= b) ++
                    (bit<1>)(a == b) ++ (bit<1>)(a != b) ++
                    (bit<1>)(sa < sb) ++ (bit<1>)(sa > sb);

        // bit 7..4: A&&B, A||B, !(a==b), bool->bit round trip of a[0:0];
        // bit 3..0: the literal 4w0b0101.  (A = a != 0, B = b != 0)
        bool A = a != 0;
        bool B = b != 0;
        bool lsb = (bool)a[0:0];
        hdr.o.logic = (bit<1>)(A && B) ++ (bit<1>)(A || B) ++
                      (bit<1>)(!(a == b)) ++ (bit<1>)lsb ++ 4w0b0101;

        hdr.o.mux   = (a > b) ? a : b;
        hdr.o.wide  = (bit<16>)a + (bit<16>)b;
        hdr.o.trunc = (bit<8>)hdr.i.w;
        hdr.o.sext  = (bit<16>)(int<16>)sa;
        hdr.o.neg   = (bit<8>)(-sa);
        hdr.o.hi    = (bit<8>)a[7:4];
        bit<8> y = b;
        y[3:0] = a[7:4];
        hdr.o.slw   = y;
        hdr.o.cat   = a ++ b;
        hdr.o.lit8  = (bit<8>)(-8s1);
        hdr.o.lit16 = 1_000;
        hdr.o.litmix = (0x_FF & 0b1010) + 8w0x1_0 + 8w0o7 + 8w0d100;   // 10 + 16 + 7 + 100 = 133 = 0x85

        // egress port: 1, except when a and b are both 0: egress_spec is then
        // never written and the packet leaves on port 0.
        if (a != 0 || b != 0) {
            standard_metadata.egress_spec = 1;
        }
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.i);
        packet.emit(hdr.o);
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
