/* truncate(length): BMv2 cuts only the transmission of the packet that called it (the
 * smallest length wins); copies made by multicast, clone or recirculation start uncut. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  a;
    bit<16> b;
}

struct headers_t {
    h_t h;
}

struct meta_t {
    @field_list(1)
    bit<8> pass;
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
        if (hdr.h.op == 1) {
            truncate(3);
        } else if (hdr.h.op == 2) {
            truncate(5);
            truncate(2);
            truncate(4);
        } else if (hdr.h.op == 3) {
            truncate(100);
        } else if (hdr.h.op == 4) {
            truncate(1);
            sm.mcast_grp = 1;
        } else if (hdr.h.op == 5) {
            truncate(2);
            clone(CloneType.I2E, 5);
        } else if (hdr.h.op == 6 && sm.instance_type == 0) {
            truncate(1);
            m.pass = 1;
            resubmit_preserving_field_list(1);
        }
        if (sm.instance_type == 6) {
            hdr.h.a = 0x66;
        }
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.h.op == 7) {
            hdr.h.a = (bit<8>)sm.packet_length;
            truncate(4);
        } else if (hdr.h.op == 8 && m.pass == 0) {
            truncate(2);
            m.pass = 1;
            recirculate_preserving_field_list(1);
        } else if (hdr.h.op == 8) {
            hdr.h.a = 0x44;
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
