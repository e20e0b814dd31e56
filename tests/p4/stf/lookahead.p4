/* lookahead.p4: `packet.lookahead<T>()` (P4-16 spec 12.8.3) for bit<W> and for a header
 * type, in an assignment, in a select and as a statement of its own (its value unused, a
 * short packet is still PacketTooShort), and explicit type arguments on generic calls inside
 * expressions (`same<bit<8>>(x)`, also inferred: `same(x)`).  lookahead reads without
 * consuming: the following extract sees the same bytes.
 *
 * Packet: one byte `peek` decides the path, by its high nibble (lookahead<bit<4>>):
 *   F: lookahead<bit<24>>() as a statement, extract g (16 bits); ingress writes
 *   peek + peek into g.x;
 *   otherwise: select on lookahead<h_t>().b: 00 -> extract h, ingress writes
 *   peek + peek into h.b; anything else -> accept with nothing extracted. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

header g_t {
    bit<16> x;
}

struct headers {
    h_t h;
    g_t g;
}

struct metadata {
    bit<8> peek;
}

T same<T>(in T v) {  // p4c checks a generic body with T unknown: no cast of v, no arithmetic on it
    return v;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        meta.peek = packet.lookahead<bit<8>>();
        transition select(packet.lookahead<bit<4>>()) {
            4w0xF: parse_g;
            default: check_h;
        }
    }
    state check_h {
        transition select(packet.lookahead<h_t>().b) {
            8w0: parse_h;
            default: accept;
        }
    }
    state parse_h {
        packet.extract(hdr.h);
        transition accept;
    }
    state parse_g {
        packet.lookahead<bit<24>>();  // the value unused, the length still checked
        packet.extract(hdr.g);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.h.isValid()) {
            hdr.h.b = same<bit<8>>(meta.peek) + same(meta.peek);
        }
        if (hdr.g.isValid()) {
            hdr.g.x = (bit<16>)(same(meta.peek) + same<bit<8>>(meta.peek));
        }
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.g);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
