/* subparser.p4: sub-parsers (P4-16 v1.2.5 "Sub-parsers"): a parser instantiated in a
 * parser and applied from a state with sp.apply(packet, ...).  The packet is shared (the
 * position moves on), the caller's state continues after the apply, an error in the
 * sub-parser ends the whole parse; nested sub-parsers, one instance applied twice,
 * a sub-parser local with an initializer (run on every apply) and a sub-parser that
 * fills a header stack with extract(s.next).
 *
 * Packet: h_t (op count err), then what op selects.  Ingress sends everything to
 * port 1 and writes meta.count and a code for parser_error into h (see apply). */
#include <core.p4>
#include <v1model.p4>

error { BadValue }

header h_t {
    bit<8> op;
    bit<8> count;
    bit<8> err;
}

header a_t {
    bit<8> v;
}

struct headers {
    h_t    h;
    a_t    a1;
    a_t    a2;
    a_t[3] s;
    a_t    t;
}

struct metadata {
    bit<8> count;
}

// One a_t; adds `bump` to count.  bump is set to 1 on every apply (then to 10, which
// would show if the initializer ran only once).  The value EE fails with BadValue.
parser ParseA(packet_in pkt, out a_t x, inout bit<8> count) {
    bit<8> bump = 1;
    state start {
        pkt.extract(x);
        count = count + bump;
        bump = 10;
        transition select(x.v) {
            0xEE: bad;
            default: accept;
        }
    }
    state bad {
        verify(false, error.BadValue);
        transition accept;
    }
}

// Items until one is 0; a fourth item overflows the stack (StackOutOfBounds).
parser ParseStack(packet_in pkt, inout a_t[3] s) {
    state start {
        pkt.extract(s.next);
        transition select(s.last.v) {
            0: accept;
            default: start;
        }
    }
}

// A sub-parser with a sub-parser of its own, applied in two states.
parser ParseTwo(packet_in pkt, out a_t first, out a_t second, inout bit<8> count) {
    ParseA() inner;
    state start {
        inner.apply(pkt, first, count);
        transition select(first.v) {
            0x10: more;
            default: accept;
        }
    }
    state more {
        inner.apply(pkt, second, count);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    ParseA() pa1;
    ParseA() pa2;
    ParseA() pa5;
    ParseStack() ps;
    ParseTwo() p2;

    state start {
        packet.extract(hdr.h);
        transition select(hdr.h.op) {
            1: one;
            2: two;
            3: stack;
            4: nested;
            5: fail;
            default: accept;
        }
    }
    state one {
        pa1.apply(packet, hdr.a1, meta.count);
        packet.extract(hdr.t);
        transition accept;
    }
    state two {
        pa2.apply(packet, hdr.a1, meta.count);
        pa2.apply(packet, hdr.a2, meta.count);
        packet.extract(hdr.t);
        transition accept;
    }
    state stack {
        ps.apply(packet, hdr.s);
        packet.extract(hdr.t);
        transition accept;
    }
    state nested {
        p2.apply(packet, hdr.a1, hdr.a2, meta.count);
        packet.extract(hdr.t);
        transition accept;
    }
    state fail {
        pa5.apply(packet, hdr.a1, meta.count);
        packet.extract(hdr.t);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.h.count = meta.count;
        if (standard_metadata.parser_error == error.NoError) {
            hdr.h.err = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.h.err = 1;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.h.err = 2;
        } else if (standard_metadata.parser_error == error.BadValue) {
            hdr.h.err = 3;
        } else {
            hdr.h.err = 0xFF;
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
        packet.emit(hdr.a1);
        packet.emit(hdr.a2);
        packet.emit(hdr.s);
        packet.emit(hdr.t);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
