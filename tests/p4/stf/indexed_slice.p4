/* indexed_slice.p4: P4-16's indexed slice `e[lo +: w]` (bits lo+w-1 .. lo of e) with a
 * constant lo, read and written, as p4c's frontend accepts it.
 *
 * Packet: h_t (a b c), payload.  Ingress sets a = c[4 +: 8], writes c[0 +: 4] = 3 and
 * b[7 +: 1] = 1, and sends the packet to port 1. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;    // = bits 11:4 of c (read before c is written)
    bit<8>  b;    // its top bit set through b[7 +: 1]
    bit<16> c;    // its low nibble set to 3 through c[0 +: 4]
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.h.a = hdr.h.c[4 +: 8];
        hdr.h.c[0 +: 4] = 4w3;
        hdr.h.b[7 +: 1] = 1w1;
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
