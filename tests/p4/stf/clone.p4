/* I2E and E2E clones to a session configured with mirroring_add, with and without
 * preserved user metadata. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  a;
    bit<8>  b;
    bit<32> inst;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(1)
    bit<8> kept;
    bit<8> lost;
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
        m.kept = 0x11;
        m.lost = 0x22;
        sm.egress_spec = 2;
        if (hdr.h.op == 1) {
            clone(CloneType.I2E, 5);
        } else if (hdr.h.op == 2) {
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (hdr.h.op == 3) {
            mark_to_drop(sm);
            clone_preserving_field_list(CloneType.I2E, 5, 1);
        } else if (hdr.h.op == 5) {
            clone(CloneType.I2E, 9);
        }
        hdr.h.a = 0xAA;
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        hdr.h.b = m.kept + m.lost;
        hdr.h.inst = sm.instance_type;
        if (hdr.h.op == 4 && sm.instance_type == 0) {
            clone_preserving_field_list(CloneType.E2E, 5, 1);
            hdr.h.a = 0xBB;
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
