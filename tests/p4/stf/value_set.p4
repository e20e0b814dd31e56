/* value_set in select: a bit<16> set on one key and a two-field struct set on two keys.
 * STF cannot add members, so here both sets are empty and never match;
 * tests/test_p4runtime_externs.py fills them from Python and over P4Runtime. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> t;
    bit<8>  x;
    bit<8>  y;
    bit<8>  r;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

struct pair_t {
    bit<8> x;
    @match(ternary)
    bit<8> y;
}

parser P(packet_in pk, out headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) types;
    value_set<pair_t>(2) pairs;

    state start {
        pk.extract(hdr.h);
        transition select(hdr.h.t) {
            types: in_set;
            0x0800: known;
            default: second;
        }
    }
    state in_set {
        hdr.h.r = 1;
        transition accept;
    }
    state known {
        hdr.h.r = 2;
        transition accept;
    }
    state second {
        transition select(hdr.h.x, hdr.h.y) {
            pairs: in_pairs;
            (0x01, 0x02): known_pair;
            default: accept;
        }
    }
    state in_pairs {
        hdr.h.r = 3;
        transition accept;
    }
    state known_pair {
        hdr.h.r = 4;
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t m) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
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
