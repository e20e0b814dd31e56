/* stack_and_structs.p4: a fixed-size header stack accessed with constant
 * indexes, setValid / setInvalid / isValid, header-to-header assignment,
 * struct local variables (field writes, struct copy), an enum, a
 * program-declared error used with verify() and compared in ingress, a
 * sub-control instantiated in MyIngress and applied with arguments, an action
 * called directly with directional arguments, and exit.
 *
 * Packet: ctl_t, then ctl.cnt items (0, 1 or 2) into items[0] / items[1].
 * ctl.op selects what ingress does (see the apply block). */
#include <core.p4>
#include <v1model.p4>

error { BadOp }

header ctl_t {
    bit<8> op;      // egress sets bit 7 (shows egress ran, also after exit)
    bit<8> cnt;     // number of items; ingress sets bit 7 when it runs to the end
    bit<8> res;     // result
    bit<8> code;    // validity flags, or BD for a BadOp parser error
}

header item_t {
    bit<8> v;
    bit<8> w;
}

header extra_t {
    bit<8> e1;
    bit<8> e2;
}

struct pair_t {
    bit<8> lo;
    bit<8> hi;
}

enum Mode { Sum, Xor, Keep }

struct metadata { }

struct headers {
    ctl_t     ctl;
    item_t[2] items;
    item_t    cp;       // never parsed; becomes valid by assignment (op 5)
    extra_t   extra;    // never parsed; becomes valid by setValid (op 4)
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ctl);
        transition select(hdr.ctl.cnt) {
            0: accept;
            1: one;
            default: two;
        }
    }
    state one {
        packet.extract(hdr.items[0]);
        transition accept;
    }
    state two {
        packet.extract(hdr.items[0]);
        packet.extract(hdr.items[1]);
        verify(hdr.ctl.op != 8w0x7F, error.BadOp);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

// adds both bytes of a valid item to total
control Acc(inout bit<8> total, in item_t it) {
    apply {
        if (it.isValid()) {
            total = total + it.v + it.w;
        }
    }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    Acc() acc0;
    Acc() acc1;

    action mix(inout bit<8> x, in bit<8> y) {
        x = x ^ y;
    }

    apply {
        standard_metadata.egress_spec = 1;

        error e = standard_metadata.parser_error;
        if (e == error.BadOp) {
            hdr.ctl.code = 8w0xBD;
            standard_metadata.egress_spec = 2;
            exit;
        }

        Mode m = Mode.Keep;
        if (hdr.ctl.op == 1) {
            m = Mode.Sum;
        } else if (hdr.ctl.op == 2) {
            m = Mode.Xor;
        }

        pair_t p;
        p.lo = 8w0;
        p.hi = 8w0x0F;
        if (m == Mode.Sum) {
            acc0.apply(p.lo, hdr.items[0]);
            acc1.apply(p.lo, hdr.items[1]);
            pair_t q = p;
            q.hi = 8w0xFF;          // changes the copy only
            hdr.ctl.res = q.lo ^ p.hi ^ 8w0x0F;     // = p.lo
        } else if (m == Mode.Xor) {
            hdr.ctl.res = 0;
            if (hdr.items[0].isValid()) {
                mix(hdr.ctl.res, hdr.items[0].v);
            }
            if (hdr.items[1].isValid()) {
                mix(hdr.ctl.res, hdr.items[1].v);
            }
        }

        if (hdr.ctl.op == 3) {
            hdr.items[1].setInvalid();
        }
        if (hdr.ctl.op == 4) {
            hdr.extra.setValid();
            hdr.extra.e1 = 8w0xE1;
            hdr.extra.e2 = hdr.ctl.cnt;
        }
        if (hdr.ctl.op == 5) {
            hdr.cp = hdr.items[0];
            hdr.cp.v = hdr.cp.v + 1;    // the copy changes, items[0] does not
        }
        if (hdr.ctl.op == 6) {
            hdr.ctl.res = 8w0x66;
            standard_metadata.egress_spec = 3;
            exit;
        }

        hdr.ctl.code = (hdr.items[0].isValid() ? 8w0x01 : 8w0) |
                       (hdr.items[1].isValid() ? 8w0x02 : 8w0) |
                       (hdr.cp.isValid() ? 8w0x04 : 8w0) |
                       (hdr.extra.isValid() ? 8w0x08 : 8w0);
        hdr.ctl.cnt = hdr.ctl.cnt | 8w0x80;
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.ctl.op = hdr.ctl.op | 8w0x80;
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ctl);
        packet.emit(hdr.items[0]);
        packet.emit(hdr.items[1]);
        packet.emit(hdr.cp);
        packet.emit(hdr.extra);
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
