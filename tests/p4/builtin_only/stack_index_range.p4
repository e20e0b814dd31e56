/* stack_index_range.p4: run-time header stack indexes out of range, which no BMv2 behaviour
 * exists for, so this program runs on the built-in target only.
 *
 * p4c 1.2.5.16 (p4c-bm2-ss) compiles it and simple_switch 1.15.5 loads it, but the first packet
 * whose index is out of range aborts the switch (BMv2 reads the element with a checked vector
 * access): "std::out_of_range: vector::_M_range_check: __n (which is 3) >= this->size() (which
 * is 3)" (a negative int<W> index: tests/p4/builtin_only/stack_index_signed.p4).  p4c's HSIndexSimplifier, which would
 * rewrite such statements into one branch per index, is not among p4c-bm2-ss's passes.  The
 * built-in target keeps its own rule: a statement of an apply block (or parser state) that
 * names an element at an index outside the stack is skipped, an `if` whose condition holds
 * such an index takes its else branch, and the packet goes on (inside an action body the
 * packet is dropped and counted).
 *  - op 0: items[idx].v read into res, then items[idx].v written;
 *  - op 1: if (items[idx].v == 0C) res = 1; else res = 2;
 *  - op 2: put(items[idx].v) (an action with an out parameter), then res2 = 33 (the next
 *    statement still runs);
 *  - op 3: res = items[idx].v + items[idx2].v (both indexes must be in range).
 * Only fields of run-time-indexed elements: p4c 1.2.5 writes JSON that BMv2 cannot load for
 * a whole element or its isValid() (tests/p4/builtin_only/stack_index_header.p4).
 *
 * Packet: ctl_t (op idx idx2 res res2), then three item_t (v). */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> idx;
    bit<8> idx2;
    bit<8> res;
    bit<8> res2;
}

header item_t {
    bit<8> v;
}

struct headers {
    ctl_t     ctl;
    item_t[3] items;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ctl);
        pkt.extract(hdr.items[0]);
        pkt.extract(hdr.items[1]);
        pkt.extract(hdr.items[2]);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action put(out bit<8> x) {
        x = 0x77;
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.ctl.op == 0) {
            hdr.ctl.res = hdr.items[hdr.ctl.idx].v;
            hdr.items[hdr.ctl.idx].v = 0xEE;
        } else if (hdr.ctl.op == 1) {
            if (hdr.items[hdr.ctl.idx].v == 0x0C) {
                hdr.ctl.res = 1;
            } else {
                hdr.ctl.res = 2;
            }
        } else if (hdr.ctl.op == 2) {
            put(hdr.items[hdr.ctl.idx].v);
            hdr.ctl.res2 = 0x33;
        } else if (hdr.ctl.op == 3) {
            hdr.ctl.res = hdr.items[hdr.ctl.idx].v + hdr.items[hdr.ctl.idx2].v;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.items);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
