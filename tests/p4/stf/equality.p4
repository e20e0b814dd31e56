/* equality.p4: `==` and `!=` on whole headers, structs holding headers, and header
 * stacks (P4-16 spec 8.17 and 8.18: two headers are equal when both are invalid, or
 * both are valid with equal fields; structs and stacks compare member by member).
 *
 * Packet: x, y, st[0], st[1] (two bytes each).  Ingress writes one flags byte into a
 * new header r, emitted first:
 *   bit 0  x == y               bit 3  {x.a, x} == {x.a, y} (structs)
 *   bit 1  z == w (both invalid locals: equal whatever their fields)
 *   bit 2  x == z (valid vs invalid: never equal)
 *   bit 4  {x, y} == st (stacks)          bit 5  x != y */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
}

header r_t {
    bit<8> flags;
}

struct pair_t {
    bit<8> k;
    h_t h;
}

struct headers {
    r_t r;
    h_t x;
    h_t y;
    h_t[2] st;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.x);
        packet.extract(hdr.y);
        packet.extract(hdr.st[0]);
        packet.extract(hdr.st[1]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        h_t z;
        h_t w;
        z.setInvalid();
        w.setInvalid();
        bit<8> f = 0;
        if (hdr.x == hdr.y) {
            f = f | 1;
        }
        if (z == w) {
            f = f | 2;
        }
        if (hdr.x == z) {
            f = f | 4;
        }
        pair_t s1 = { hdr.x.a, hdr.x };
        pair_t s2 = { hdr.x.a, hdr.y };
        if (s1 == s2) {
            f = f | 8;
        }
        h_t[2] tmp;
        tmp[0] = hdr.x;
        tmp[1] = hdr.y;
        if (tmp == hdr.st) {
            f = f | 16;
        }
        if (hdr.x != hdr.y) {
            f = f | 32;
        }
        hdr.r.setValid();
        hdr.r.flags = f;
        standard_metadata.egress_spec = 1;
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
        packet.emit(hdr.r);
        packet.emit(hdr.x);
        packet.emit(hdr.y);
        packet.emit(hdr.st);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
