/* The P4Runtime extern entities on the built-in target (tests/test_p4runtime_externs.py):
 * value sets in the parser, a direct meter, an indexed meter, a digest and a clone. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> t;
    bit<8>  op;
    bit<8>  a;
    bit<8>  b;
    bit<8>  c;
    bit<8>  r;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

struct pair_t {
    bit<8> op;
    @match(ternary)
    bit<8> a;
}

struct learn_t {
    bit<8>  a;
    bit<16> t;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    value_set<bit<16>>(2) types;
    value_set<pair_t>(2) pairs;

    state start {
        pk.extract(hdr.h);
        transition select(hdr.h.t) {
            types: in_types;
            default: second;
        }
    }
    state in_types {
        hdr.h.r = 1;
        transition accept;
    }
    state second {
        transition select(hdr.h.op, hdr.h.a) {
            pairs: in_pairs;
            default: accept;
        }
    }
    state in_pairs {
        hdr.h.r = 2;
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t m) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    meter(4, MeterType.packets) mt;
    direct_meter<bit<8>>(MeterType.packets) dm;

    action fwd(bit<9> port) {
        sm.egress_spec = port;
        dm.read(hdr.h.b);
    }
    table t_fwd {
        key = { hdr.h.a: exact; }
        actions = { fwd; NoAction; }
        meters = dm;
    }
    apply {
        sm.egress_spec = 1;
        if (hdr.h.op == 2) {
            t_fwd.apply();
        } else if (hdr.h.op == 3) {
            mt.execute_meter((bit<32>)hdr.h.a, hdr.h.c);
        } else if (hdr.h.op == 4) {
            learn_t l;
            l.a = hdr.h.a;
            l.t = hdr.h.t;
            digest(1, l);
        } else if (hdr.h.op == 5) {
            clone(CloneType.I2E, 5);
        }
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
