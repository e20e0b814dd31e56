/* resubmit_preserving_field_list in ingress and recirculate_preserving_field_list in
 * egress, each keeping one annotated user-metadata field. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  a;
    bit<8>  b;
    bit<8>  c;
    bit<32> inst;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(1)
    bit<8> count;
    bit<8> other;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t m) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (sm.instance_type == 0) {
            m.count = 7;
            m.other = 9;
            hdr.h.a = 0xAA;
            if (hdr.h.op == 1) {
                resubmit_preserving_field_list(1);
            }
        } else {
            hdr.h.b = m.count;
            hdr.h.c = m.other;
        }
        hdr.h.inst = sm.instance_type;
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.op == 2 && hdr.h.a != 0xBB) {
            hdr.h.a = 0xBB;
            m.count = 5;
            recirculate_preserving_field_list(1);
        }
    }
}

control CC(inout headers_t hdr, inout meta_t m) {
    apply { }
}

control D(packet_out pk, in headers_t hdr) {
    apply {
        pk.emit(hdr.h);
    }
}

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
