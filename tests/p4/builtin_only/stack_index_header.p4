/* stack_index_header.p4: a run-time-indexed header stack element used whole, which no
 * BMv2-loadable form exists for, so this program runs on the built-in target only.
 *
 * p4c 1.2.5 (p4c-bm2-ss) compiles each of these, but simple_switch 1.15 cannot load what it
 * writes: isValid() of items[i] becomes a "field" whose header is an expression ("Json::
 * LogicError: Type is not convertible to string"), and a whole items[i] as an action argument
 * or assignment target is an unwrapped expression ("Invalid 'type' in expression").  The
 * built-in target runs them as p4c means them, with the same rule for an index out of range as
 * stack_index_range.p4 here: the statement is skipped, an if takes its else branch.
 *  - op 1: if (items[idx].isValid()) res = 1; else res = 2;
 *  - op 2: items[idx].setInvalid(); then res2 = 33;
 *  - op 3: bump(items[idx], idx): a whole element as an inout argument; the callee changes idx,
 *    the element written back is the one named at the call.
 *
 * Packet: ctl_t (op idx res res2), then three item_t (v). */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> idx;
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
    action bump(inout item_t it, inout bit<8> i) {
        i = i + 1;
        it.v = it.v + 0x10;
    }

    apply {
        sm.egress_spec = 1;
        if (hdr.ctl.op == 1) {
            if (hdr.items[hdr.ctl.idx].isValid()) {
                hdr.ctl.res = 1;
            } else {
                hdr.ctl.res = 2;
            }
        } else if (hdr.ctl.op == 2) {
            hdr.items[hdr.ctl.idx].setInvalid();
            hdr.ctl.res2 = 0x33;
        } else if (hdr.ctl.op == 3) {
            bump(hdr.items[hdr.ctl.idx], hdr.ctl.idx);
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
