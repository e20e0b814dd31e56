/* short_packet.p4: packets shorter than the headers the parser wants.
 *
 * The parser extracts a_t (4 bytes), b_t (4 bytes), c_t (2 bytes) in a row.
 * A packet too short for one of them ends parsing with PacketTooShort: the
 * headers extracted before stay valid, the short one and later ones stay
 * invalid, the packet still runs ingress, and its unparsed bytes follow the
 * emitted headers.  Ingress reports validity and the error in a_t and
 * modifies b_t / c_t when they are valid, so their emission is visible. */
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> tag;
    bit<8> vflags;  // written by ingress: bit 1 = b valid, bit 0 = c valid
    bit<8> err;     // written by ingress: 0 NoError, 1 PacketTooShort, 2 other
    bit<8> pad;
}

header b_t {
    bit<32> z;
}

header c_t {
    bit<8> q;
    bit<8> r;
}

struct metadata { }

struct headers {
    a_t a;
    b_t b;
    c_t c;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.a);
        transition parse_b;
    }
    state parse_b {
        packet.extract(hdr.b);
        transition parse_c;
    }
    state parse_c {
        packet.extract(hdr.c);
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
        standard_metadata.egress_spec = 1;
        if (hdr.a.isValid()) {
            hdr.a.vflags = 6w0 ++ (bit<1>)hdr.b.isValid() ++ (bit<1>)hdr.c.isValid();
            if (standard_metadata.parser_error == error.NoError) {
                hdr.a.err = 0;
            } else if (standard_metadata.parser_error == error.PacketTooShort) {
                hdr.a.err = 1;
            } else {
                hdr.a.err = 2;
            }
        }
        if (hdr.b.isValid()) {
            hdr.b.z = hdr.b.z + 1;
        }
        if (hdr.c.isValid()) {
            hdr.c.q = ~hdr.c.q;
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
        packet.emit(hdr.a);
        packet.emit(hdr.b);
        packet.emit(hdr.c);
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
