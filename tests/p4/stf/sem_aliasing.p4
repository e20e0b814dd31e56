/* sem_aliasing.p4: copy-in/copy-out when arguments alias each other or the
 * callee's globals (P4-16 spec 6.8), and operand order around function calls.
 *
 * Packet: h_t (op a b c d e f g), then a stack of four e_t (v).  Ingress sends to
 * port 1 and runs the case selected by op. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
    bit<8> e;
    bit<8> f;
    bit<8> g;
}

header e_t {
    bit<8> v;
}

struct headers {
    h_t    h;
    e_t[4] s;
}

struct metadata { }

struct pair_t {
    e_t    x;
    bit<8> y;
}

bit<8> twice_next(inout bit<8> z) {
    z = z + 1;
    return z * 2;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.s[0]);
        packet.extract(hdr.s[1]);
        packet.extract(hdr.s[2]);
        packet.extract(hdr.s[3]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    bit<8> gl;

    action next_index(inout bit<8> xv, inout bit<8> i) {
        i = i + 1;
        xv = 0x11;
    }
    action field_then_header(inout bit<8> f, inout h_t hh) {
        f = 0x22;
        hh.c = 0x33;
    }
    action header_then_field(inout h_t hh, inout bit<8> f) {
        f = 0x22;
        hh.c = 0x33;
    }
    action member_then_struct(inout e_t x, inout pair_t p) {
        x.v = 0x44;
        p.y = 0x55;
        p.x.v = 0x66;
    }
    action bump_read_global(inout bit<8> x) {
        x = x + 1;
        hdr.h.b = gl;
    }
    action two_outs(out bit<8> x, out bit<8> y) {
        y = 2;
        x = 1;
    }
    action add_in(inout bit<8> x, in bit<8> y) {
        x = x + y;
    }
    action add_in_rev(in bit<8> y, inout bit<8> x) {
        x = x + y;
    }
    action out_read_global(out bit<8> x) {
        x = 7;
        hdr.h.g = hdr.h.a;
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.op == 1) {
            bit<8> i = hdr.h.a;
            next_index(hdr.s[i].v, i);  // a field: BMv2 cannot load p4c's output for a whole element
            hdr.h.b = i;
        } else if (hdr.h.op == 2) {
            field_then_header(hdr.h.d, hdr.h);
            header_then_field(hdr.h, hdr.h.e);
        } else if (hdr.h.op == 3) {
            pair_t p;
            p.x = hdr.s[0];
            p.y = 1;
            member_then_struct(p.x, p);
            hdr.s[1] = p.x;
            hdr.h.b = p.y;
        } else if (hdr.h.op == 4) {
            gl = hdr.h.a;
            bump_read_global(gl);
            hdr.h.c = gl;
        } else if (hdr.h.op == 5) {
            two_outs(hdr.h.e, hdr.h.e);
        } else if (hdr.h.op == 6) {
            add_in(hdr.h.f, twice_next(hdr.h.f));
            add_in_rev(twice_next(hdr.h.g), hdr.h.g);
        } else if (hdr.h.op == 7) {
            out_read_global(hdr.h.a);
        } else if (hdr.h.op == 8) {
            hdr.h.b = hdr.h.a + twice_next(hdr.h.a);
            hdr.h.c = hdr.h.d[3:0] ++ twice_next(hdr.h.d)[3:0];
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
        packet.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
