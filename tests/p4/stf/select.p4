/* select.p4: parser select with exact values, masks (&&&), ranges (..),
 * tuples with don't-care (_), default, no-match, and verify()-based rejects.
 *
 * Packet: h_t (kind, sub, val) then r_t (path, flag, code); r_t is filled in
 * by ingress.  Every parser state records which way it went in meta.path.
 *
 * Note on reject: p4c-bm2-ss does not implement an explicit `transition
 * reject` (it warns and treats it as accept, leaving parser_error at NoError),
 * so every reject here is reached through verify(false, ...), which sets
 * parser_error on BMv2 and in the spec alike; the `transition reject` after
 * it is never executed. */
#include <core.p4>
#include <v1model.p4>

error { BadKind }

header h_t {
    bit<8>  kind;
    bit<8>  sub;
    bit<16> val;
}

header r_t {
    bit<8> path;    // meta.path
    bit<8> flag;    // 1 iff parser_error != error.NoError
    bit<8> code;    // 0 NoError, 1 NoMatch, 2 BadKind, 3 PacketTooShort, 4 other
}

struct metadata {
    bit<8> path;
}

struct headers {
    h_t h;
    r_t r;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        meta.path = 0;
        packet.extract(hdr.h);
        packet.extract(hdr.r);
        transition select(hdr.h.kind) {
            8w0x01: s_exact;
            8w0x10 &&& 8w0xF0: s_mask;        // 0x10 .. 0x1F
            8w0x20 .. 8w0x2F: s_range;
            8w0x40: s_tuple;
            8w0x41 &&& 8w0xFF: s_reject;      // full mask = exact
            8w0xEE: s_verify;
            default: s_default;
        }
    }
    state s_exact {
        meta.path = 1;
        transition accept;
    }
    state s_mask {
        meta.path = 2;
        transition accept;
    }
    state s_range {
        meta.path = 3;
        transition accept;
    }
    state s_tuple {
        meta.path = 4;
        // no default: a key matching no case ends parsing, with no error on BMv2
        // (the spec says NoMatch)
        transition select(hdr.h.sub, hdr.h.val) {
            (8w0x01, 16w0x1234): s_t1;
            (8w0x02, _): s_t2;
            (_, 16w0x0500 .. 16w0x05FF): s_t3;
            (8w0x03, 16w0xAB00 &&& 16w0xFF00): s_t4;
        }
    }
    state s_t1 {
        meta.path = 0x41;
        transition accept;
    }
    state s_t2 {
        meta.path = 0x42;
        transition accept;
    }
    state s_t3 {
        meta.path = 0x43;
        transition accept;
    }
    state s_t4 {
        meta.path = 0x44;
        transition accept;
    }
    state s_reject {
        verify(false, error.NoMatch);
        transition reject;
    }
    state s_verify {
        verify(hdr.h.sub == 8w0, error.BadKind);
        meta.path = 9;
        transition accept;
    }
    state s_default {
        meta.path = 0xDD;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        error e = standard_metadata.parser_error;
        hdr.r.path = meta.path;
        hdr.r.flag = (bit<8>)(bit<1>)(e != error.NoError);
        // Parenthesised: in p4c's grammar an else-branch does not extend over a
        // following `?`, so an unparenthesised chain is `((c1 ? a : c2) ? ...`.
        hdr.r.code = e == error.NoError ? 8w0 :
                     (e == error.NoMatch ? 8w1 :
                     (e == error.BadKind ? 8w2 :
                     (e == error.PacketTooShort ? 8w3 : 8w4)));
        if (e == error.NoError) {
            standard_metadata.egress_spec = 1;
        } else {
            standard_metadata.egress_spec = 2;
        }
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.r);
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
