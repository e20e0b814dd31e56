/* v1model action profiles and selectors on the built-in target (tests/test_action_profiles.py).
 * The packet is op k flow(16) m res (one byte each but flow); op picks the table:
 * 1 ecmp (selector sel, keyed on k, hashing flow and m), 2 ecmp2 (sel too: the same selector
 * keys, a ternary key between them), 3 prof (an action profile constructed in place),
 * 4 small (an identity selector whose groups hold at most 4). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8>  op;
    bit<8>  k;
    bit<16> flow;
    bit<8>  m;
    bit<8>  res;
}

struct headers_t {
    h_t h;
}

struct meta_t { }

parser P(packet_in pk, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.h);
        transition accept;
    }
}

control VC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action fwd(bit<9> port) {
        sm.egress_spec = port;
    }
    action mark(bit<8> v, bit<9> port) {
        hdr.h.res = v;
        sm.egress_spec = port;
    }
    action drop() {
        mark_to_drop(sm);
    }

    action_selector(HashAlgorithm.crc16, 32w128, 32w14) sel;
    @max_group_size(4) @noWarn("unused")
    action_selector(HashAlgorithm.identity, 32w16, 32w8) small;

    table ecmp {
        key = {
            hdr.h.k    : exact;
            hdr.h.flow : selector;
            hdr.h.m    : selector;
        }
        actions = { fwd; mark; drop; }
        implementation = sel;
        size = 64;
    }

    table ecmp2 {
        key = {
            hdr.h.flow : selector;
            hdr.h.k    : ternary;
            hdr.h.m    : selector;
        }
        actions = { fwd; mark; }
        implementation = sel;
    }

    table prof {
        key = {
            hdr.h.k : exact;
        }
        actions = { fwd; mark; NoAction; }
        default_action = NoAction();
        @name("ap") implementation = action_profile(32w4);
    }

    table small_t {
        key = {
            hdr.h.k    : exact;
            hdr.h.flow : selector;
        }
        actions = { fwd; }
        implementation = small;
    }

    apply {
        if (hdr.h.op == 1) {
            ecmp.apply();
        } else if (hdr.h.op == 2) {
            ecmp2.apply();
        } else if (hdr.h.op == 3) {
            switch (prof.apply().action_run) {
                mark: { hdr.h.m = 0xEE; }
            }
        } else if (hdr.h.op == 4) {
            small_t.apply();
        }
    }
}

control EC(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply { }
}

control CC(inout headers_t hdr, inout meta_t meta) {
    apply { }
}

control D(packet_out pk, in headers_t hdr) {
    apply { pk.emit(hdr.h); }
}

V1Switch(P(), VC(), I(), EC(), CC(), D()) main;
