/* hash.p4: the v1model hash() extern with crc16, crc32, csum16 and identity,
 * with and without base/max, over byte-aligned and non-byte-aligned field
 * lists.  The hash input is the listed fields concatenated MSB first, padded
 * with zero bits at the end to a whole number of bytes; the result is
 * base + (hash % max). */
#include <core.p4>
#include <v1model.p4>

header d_t {
    // inputs
    bit<8>  a;
    bit<16> b;
    bit<32> c;
    bit<4>  n1;
    bit<4>  n2;
    // outputs
    bit<16> h16;    // crc16 {a, b, c}                      base 0,  max 2^16
    bit<32> h32;    // crc32 {c, a}                         base 0,  max 2^32
    bit<16> hcs;    // csum16 {a, b, c} (7 bytes, odd)      base 100, max 1000
    bit<16> hid;    // identity {n1, n2, a}                 base 0,  max 2^16
    bit<16> hid12;  // identity {n1, a} (12 bits -> 2 bytes) base 1, max 2^16
    bit<16> hm;     // crc16 {n2, b} (20 bits -> 3 bytes)   base 10, max 50
    bit<64> h64;    // identity {c, b, a, c} (11 bytes: only the first 8 count)
                    //                                      base 0,  max 2^64-1
}

struct metadata { }

struct headers {
    d_t d;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.d);
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
        hash(hdr.d.h16, HashAlgorithm.crc16, 16w0,
             { hdr.d.a, hdr.d.b, hdr.d.c }, 32w65536);
        hash(hdr.d.h32, HashAlgorithm.crc32, 32w0,
             { hdr.d.c, hdr.d.a }, 64w0x1_0000_0000);
        hash(hdr.d.hcs, HashAlgorithm.csum16, 16w100,
             { hdr.d.a, hdr.d.b, hdr.d.c }, 32w1000);
        hash(hdr.d.hid, HashAlgorithm.identity, 16w0,
             { hdr.d.n1, hdr.d.n2, hdr.d.a }, 32w65536);
        hash(hdr.d.hid12, HashAlgorithm.identity, 16w1,
             { hdr.d.n1, hdr.d.a }, 32w65536);
        hash(hdr.d.hm, HashAlgorithm.crc16, 16w10,
             { hdr.d.n2, hdr.d.b }, 32w50);
        hash(hdr.d.h64, HashAlgorithm.identity, 64w0,
             { hdr.d.c, hdr.d.b, hdr.d.a, hdr.d.c }, 64w0xFFFF_FFFF_FFFF_FFFF);
        standard_metadata.egress_spec = 1;
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
        packet.emit(hdr.d);
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
