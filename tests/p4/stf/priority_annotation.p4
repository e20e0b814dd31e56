/* priority_annotation.p4: `@priority(N)` on `const entries` of a ternary table, after the
 * action as the P4-16 grammar places entry annotations.  p4c's BMv2 backend gives each
 * const entry the priority of its annotation, or else its position (1 for the first
 * entry, 2 for the second, ...), and BMv2 picks the matching entry with the SMALLEST
 * priority number.
 *
 * Packet: h (a, r).  Ingress writes into r the argument of the entry that won. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> r;
}

struct headers {
    h_t h;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set(bit<8> v) {
        hdr.h.r = v;
    }
    table t {
        key = { hdr.h.a : ternary; }
        actions = { set; NoAction; }
        const entries = {
            8w0x00 &&& 8w0x00 : set(1) @priority(3);   // matches everything, priority 3
            8w0x01 &&& 8w0xFF : set(2) @priority(2);   // a == 01, priority 2
            8w0x01 &&& 8w0x0F : set(3) @priority(1);   // low nibble 1, priority 1 (best)
            8w0x02 &&& 8w0xFF : set(4);                // a == 02, no annotation: position 4
        }
        default_action = NoAction();
    }
    apply {
        t.apply();
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
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
