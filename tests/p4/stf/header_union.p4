/* header_union.p4: header unions as p4c + BMv2 run them.
 *  - extract into one member of a union; u.isValid() is true when any member is;
 *  - setValid() / extract / header assignment / { ... } on one member invalidate the
 *    others; setInvalid() on an invalid member leaves the valid one alone;
 *  - assignment of a whole union (u2 = u);
 *  - a stack of unions (us[2]) written through constant indexes;
 *  - emit of a union writes its valid member (if any).
 *
 * Packet: ctl_t (op, kind, res), then u.v4 (kind 1) or u.v6 (kind 2).
 * The deparser emits ctl, u, u2, us. */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> kind;
    bit<8> res;
}

header v4_t {
    bit<16> a;
    bit<16> b;
}

header v6_t {
    bit<8> a;
    bit<8> b;
}

header_union ip_u {
    v4_t v4;
    v6_t v6;
}

struct headers {
    ctl_t ctl;
    ip_u u;
    ip_u u2;
    ip_u[2] us;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ctl);
        transition select(hdr.ctl.kind) {
            1: parse_v4;
            2: parse_v6;
            default: accept;
        }
    }
    state parse_v4 {
        pkt.extract(hdr.u.v4);
        transition accept;
    }
    state parse_v6 {
        pkt.extract(hdr.u.v6);
        transition accept;
    }
}

control MyVerify(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.ctl.op == 1) {
            hdr.u.v6.setValid();               // v4 becomes invalid, v6 = 00 00
        } else if (hdr.ctl.op == 2) {
            hdr.u2 = hdr.u;
            hdr.u.v6.setInvalid();             // u2 keeps its copy
        } else if (hdr.ctl.op == 3) {
            hdr.us[0].v4 = hdr.u.v4;
            hdr.us[1].v6.setValid();
            hdr.us[1].v6.a = 0x99;
        } else if (hdr.ctl.op == 4) {
            hdr.u.v4 = { 0x1111, 0x2222 };     // v6 becomes invalid
        } else if (hdr.ctl.op == 5) {
            hdr.u.v6.setInvalid();             // v6 was not valid: v4 stays valid
        }
        bit<8> r = 0;
        if (hdr.u.isValid()) { r = r | 1; }
        if (hdr.u.v4.isValid()) { r = r | 2; }
        if (hdr.u.v6.isValid()) { r = r | 4; }
        if (hdr.u2.isValid()) { r = r | 8; }
        hdr.ctl.res = r;
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyCompute(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.u);
        pkt.emit(hdr.u2);
        pkt.emit(hdr.us);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
