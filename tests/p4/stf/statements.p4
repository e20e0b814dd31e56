/* statements.p4: compound assignment (P4-16 v1.2.4), switch on values (bit<8>,
 * a serializable enum; not error, which p4c 1.2.5 refuses), if/else inside a parser state, p4c's `?:`
 * associativity and unsized literals taking the other operand's type.
 *
 * `/` and `%` divide by constant powers of two only: p4c 1.2.5 lowers those to `>>` and `&`
 * (StrengthReduction) and refuses any other run-time division ("x / b: could not evaluate
 * expression at compilation time").  `a - 1`, not `a + (-1)`: p4c warns "-8w1: negative value
 * with unsigned type" for the latter.
 *
 * The packet is an in_t header followed by an out_t header whose bytes are
 * ignored on input; ingress overwrites every out_t byte. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> a;
    bit<8> b;
    bit<8> sel;
    bit<8> k;
}

header out_t {
    bit<8> pe;   // x = a; x += b
    bit<8> mi;   // x -= b
    bit<8> mu;   // x *= b
    bit<8> dv;   // x /= 4      (a run-time dividend, p4c: x >> 2)
    bit<8> md;   // x %= 8      (p4c: x & 7)
    bit<8> an;   // x &= b
    bit<8> orr;  // x |= b
    bit<8> xo;   // x ^= b
    bit<8> sl;   // x <<= 3
    bit<8> sr;   // x >>= 3
    bit<8> sa;   // x |+|= b
    bit<8> ss;   // x |-|= b
    bit<8> sg;   // int<8> s = (int<8>)a; s >>= 2 (arithmetic); s -= 1
    bit<8> sw;   // switch (sel)
    bit<8> en;   // switch ((kind_t)k)
    bit<8> pif;  // written by the parser's if/else
    bit<8> tern; // a == 1 ? true : b == 2 ? 8w0x10 : 8w0x20
    bit<8> lit;  // a - 1
    bit<8> er;   // parser_error == NoError
}

enum bit<8> kind_t {
    A = 1,
    B = 2,
    C = 3
}

struct metadata {
    bit<8> pif;
}

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
        if (hdr.i.sel == 1) {
            meta.pif = 8w0x01;
        } else if (hdr.i.sel > 8w0x80) {
            meta.pif = 8w0x02;
        } else {
            meta.pif = 8w0x03;
        }
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
        bit<8> x;
        x = a; x += b;  hdr.o.pe = x;
        x = a; x -= b;  hdr.o.mi = x;
        x = a; x *= b;  hdr.o.mu = x;
        x = a; x /= 4;  hdr.o.dv = x;
        x = a; x %= 8;  hdr.o.md = x;
        x = a; x &= b;  hdr.o.an = x;
        x = a; x |= b;  hdr.o.orr = x;
        x = a; x ^= b;  hdr.o.xo = x;
        x = a; x <<= 3; hdr.o.sl = x;
        x = a; x >>= 3; hdr.o.sr = x;
        x = a; x |+|= b; hdr.o.sa = x;
        x = a; x |-|= b; hdr.o.ss = x;
        int<8> s = (int<8>)a;
        s >>= 2;
        s -= 1;
        hdr.o.sg = (bit<8>)s;

        switch (hdr.i.sel) {
            1: { hdr.o.sw = 8w0x11; }
            2:
            3: { hdr.o.sw = 8w0x23; }
            8w0xFF: { hdr.o.sw = 8w0xF0; }
            default: { hdr.o.sw = 8w0xDD; }
        }
        switch ((kind_t)hdr.i.k) {
            kind_t.A: { hdr.o.en = 8w0xA1; }
            kind_t.B:
            kind_t.C: { hdr.o.en = 8w0xBC; }
            default: { hdr.o.en = 8w0xEE; }
        }
        if (standard_metadata.parser_error == error.NoError) {  // p4c 1.2.5 cannot switch on an error
            hdr.o.er = 8w0x01;
        } else {
            hdr.o.er = 8w0x02;
        }
        hdr.o.pif = meta.pif;
        // p4c parses this as (a == 1 ? true : b == 2) ? 8w0x10 : 8w0x20.
        hdr.o.tern = a == 1 ? true : b == 2 ? 8w0x10 : 8w0x20;
        hdr.o.lit = a - 1;
        standard_metadata.egress_spec = 1;
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
