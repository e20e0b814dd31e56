/* Unconfigured meters (indexed and direct) colour every packet GREEN (0); log_msg,
 * assert/assume that hold, random with lo == hi, digest (no data-plane effect). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;
    bit<8> idx;
    bit<8> c1;
    bit<8> c2;
    bit<8> r;
}

struct headers_t {
    h_t h;
}

struct learn_t {
    bit<8> k;
    bit<9> port;
}

struct meta_t {
    bit<8> unused;
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
    meter(4, MeterType.packets) mtr;
    direct_meter<bit<8>>(MeterType.bytes) dm;

    action hit_act() {
        dm.read(hdr.h.c2);
    }

    table t {
        key = { hdr.h.k : exact; }
        actions = { hit_act; NoAction; }
        meters = dm;
        default_action = NoAction();
    }

    apply {
        sm.egress_spec = 1;
        mtr.execute_meter((bit<32>)hdr.h.idx, hdr.h.c1);
        t.apply();
        random(hdr.h.r, 8w5, 8w5);
        log_msg("k={} idx={}", {hdr.h.k, hdr.h.idx});
        log_msg("plain message");
        assert(hdr.h.k != 0xEE);
        assume(sm.ingress_port != 511);
        learn_t l;
        l.k = hdr.h.k;
        l.port = sm.ingress_port;
        digest(1, l);
    }
}

control E(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { }
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
