/* struct_exprs.p4: P4-16 1.2.4's initializers typed by their context, as p4c's frontend
 * accepts them: the structure-valued expression `{ f = e, ... }` with its fields in any
 * order, `...` for the fields it leaves out (their default values, 0 and false), and `...`
 * on its own.
 *
 * Packet: h_t (a b c), payload.  Ingress writes h through a struct expression whose fields
 * are out of order (c, a, b), a local struct through `{ x = h.a, ... }` (y = 0, f = false),
 * copies it back into b and c, and sends the packet to port 1. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
}

struct pair_t {
    bit<8>  x;
    bit<16> y;
    bool    f;
}

struct headers { h_t h; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.h); transition accept; }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        hdr.h = { c = hdr.h.c + 1, a = hdr.h.b, b = hdr.h.a };  // a and b swapped, c + 1
        pair_t p = { x = hdr.h.a, ... };                         // y = 0, f = false
        bit<8> zero = ...;
        if (!p.f && p.y == 0) {
            hdr.h.b = p.x + zero;                                // b = a (the swapped value)
        }
        sm.egress_spec = 1;
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) { apply { pkt.emit(hdr.h); } }

V1Switch(P(), V(), I(), E(), C(), D()) main;
