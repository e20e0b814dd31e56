/* ctor_args.p4: constructor parameters of controls and parsers (P4-16 v1.2.5
 * "Constructor parameters"): `control C(...)(bit<8> k)` instantiated as `C(8w5) c;`.
 * Each instance has its own compile-time values: two instances of one control with
 * different arguments behave differently, an argument may be the enclosing block's own
 * constructor parameter (MyIngress gets base = 3 from V1Switch), a bool parameter
 * chooses a branch, parameters give a table's const entry, and a sub-parser's
 * parameter is a select keyset value.
 *
 * Packet: h_t (op a b c d e f g r x), then for op 1 and 2 one tag_t byte (never
 * emitted).  Ingress sends everything to port 1. */
#include <core.p4>
#include <v1model.p4>

error { WrongTag }

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
    bit<8> r;
    bit<8> x;
}

header tag_t {
    bit<8> v;
}

struct headers {
    h_t   h;
    tag_t tag;
}

struct metadata { }

// A tag byte that must equal `want`; any other value fails with WrongTag.
parser ParseTag(packet_in pkt, out tag_t t)(bit<8> want) {
    state start {
        pkt.extract(t);
        transition select(t.v) {
            want: accept;
            default: wrong;
        }
    }
    state wrong {
        verify(false, error.WrongTag);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    ParseTag(8w0xAA) wantA;
    ParseTag(8w0xBB) wantB;

    state start {
        packet.extract(hdr.h);
        transition select(hdr.h.op) {
            1: tagA;
            2: tagB;
            default: accept;
        }
    }
    state tagA {
        wantA.apply(packet, hdr.tag);
        transition accept;
    }
    state tagB {
        wantB.apply(packet, hdr.tag);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control AddK(inout bit<8> v)(bit<8> k) {
    apply { v = v + k; }
}

control Flip(inout bit<8> v)(bool enabled) {
    apply {
        if (enabled) {
            v = ~v;
        }
    }
}

// One const entry, k == match_value -> result = value; a miss gives FF.
control Lookup(in bit<8> k, out bit<8> result)(bit<8> match_value, bit<8> value) {
    action set(bit<8> v) { result = v; }
    action miss() { result = 0xFF; }
    table t {
        key = { k: exact; }
        actions = { set; miss; }
        const entries = {
            match_value : set(value);
        }
        default_action = miss();
    }
    apply { t.apply(); }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata)(bit<8> base) {
    AddK(8w5) add5;
    AddK(8w7) add7;
    AddK(base) addBase;
    Flip(true) flipOn;
    Flip(false) flipOff;
    Lookup(8w1, 8w0x11) l1;
    Lookup(8w2, 8w0x22) l2;

    apply {
        standard_metadata.egress_spec = 1;
        add5.apply(hdr.h.a);
        add7.apply(hdr.h.b);
        add5.apply(hdr.h.c);
        addBase.apply(hdr.h.d);
        flipOn.apply(hdr.h.e);
        flipOff.apply(hdr.h.f);
        l1.apply(hdr.h.op, hdr.h.g);
        l2.apply(hdr.h.op, hdr.h.r);
        if (standard_metadata.parser_error == error.NoError) {
            hdr.h.x = 0;
        } else if (standard_metadata.parser_error == error.WrongTag) {
            hdr.h.x = 1;
        } else {
            hdr.h.x = 0xFF;
        }
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

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(8w3), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
