/* copy_in_out.p4: P4-16 copy-in/copy-out (spec 6.8) for actions called directly,
 * actions called from actions, and a sub-control: arguments are copied in left to
 * right, writes in the callee to the caller's variables do not change a copied-in
 * value, out/inout parameters are copied back in order on every exit (end, return,
 * exit), an out header parameter starts invalid, and slices can be out/inout
 * arguments.
 *
 * Packet: h_t (op a b c d), then o_t (v).  Ingress sends to port 1 and runs the
 * case selected by op (see apply); egress sets op bit 7, so it also shows that
 * egress runs after an exit in ingress. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

header o_t {
    bit<8> v;
}

struct headers {
    h_t h;
    o_t o;
}

struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

// Sub exits; SubAliased has the same body without the exit, applied with both arguments
// naming one field.  Each call site has a control of its own: p4c 1.2.5 crashes
// ("Overwriting definitions at <ExitStatement>") when it inlines one control with an exit
// at two call sites, and it does not copy an inlined control's parameters back on exit, so
// the aliased case (copied through temporaries) leaves the exit out.
control Sub(inout bit<8> x, out bit<8> y) {
    apply {
        x = x + 1;
        y = 8w0x66;
        exit;
    }
}

// x and y are both copies: bumping x does not show in y, and y is written back last.
control SubAliased(inout bit<8> x, out bit<8> y) {
    apply {
        x = x + 1;
        y = 8w0x66;
    }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Sub() sub;
    SubAliased() sub_aliased;

    action add2(inout bit<8> x, inout bit<8> y) {
        x = x + 1;
        y = y + 2;
    }
    action global_write(in bit<8> v) {
        hdr.h.b = 8w0x55;
        hdr.h.c = v;
    }
    action clear(out o_t o) { }
    action set_and_exit(out bit<8> x) {
        x = 8w0x44;
        exit;
    }
    action ret(inout bit<8> x, out bit<8> y) {
        x = 8w1;
        y = 8w2;
        if (x == 8w1) {
            return;
        }
        x = 8w0xEE;
        y = 8w0xEE;
    }
    action flip(inout bit<8> x) {
        x = x ^ 8w0xFF;
    }
    action outer(inout bit<8> x, inout bit<8> y) {
        flip(x);
        flip(y);
        y = y + x;
    }
    action nibble_inc(inout bit<4> n) {
        n = n + 1;
    }
    action nibble_set(out bit<4> n) {
        n = 4w0xA;
    }
    action zero_then_add(inout bit<8> x, in bit<8> v) {
        x = 0;
        x = x + v;
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.op == 1) {
            add2(hdr.h.a, hdr.h.a);
        } else if (hdr.h.op == 2) {
            global_write(hdr.h.b);
        } else if (hdr.h.op == 3) {
            clear(hdr.o);
        } else if (hdr.h.op == 4) {
            set_and_exit(hdr.h.d);
            hdr.h.d = 8w0x99;
        } else if (hdr.h.op == 5) {
            ret(hdr.h.a, hdr.h.b);
        } else if (hdr.h.op == 6) {
            sub.apply(hdr.h.a, hdr.h.b);
            hdr.h.c = 8w0xCC;
        } else if (hdr.h.op == 7) {
            outer(hdr.h.a, hdr.h.b);
        } else if (hdr.h.op == 8) {
            nibble_inc(hdr.h.a[7:4]);
            nibble_set(hdr.h.b[3:0]);
        } else if (hdr.h.op == 9) {
            zero_then_add(hdr.h.a, hdr.h.a);
        } else if (hdr.h.op == 10) {
            sub_aliased.apply(hdr.h.a, hdr.h.a);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.h.op = hdr.h.op | 8w0x80;
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.o);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
