/* sem_assign_order.p4: the order p4c 1.2.5.16 evaluates an assignment's parts in when they
 * have side effects (p4c's SideEffectOrdering, RemoveOpAssign, then function inlining;
 * frontend/ordering.py):
 *  - an l-value index without a call is read after the right-hand side's call: the element
 *    written is the one at the index the call left;
 *  - an l-value index that calls a function is evaluated first, before the right-hand side;
 *  - `a op= b` evaluates a's index (and its call) once, and reads a after b's call, where
 *    `a = a op b` reads a before it.
 *
 * Packet: h_t (i j k m n), then a stack of four e_t (v).  Everything goes to port 1; every
 * index stays within the stack (BMv2 aborts on one that does not). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> i;
    bit<8> j;
    bit<8> k;
    bit<8> m;
    bit<8> n;
}

header e_t {
    bit<8> v;
}

struct headers {
    h_t    h;
    e_t[4] s;
}

struct metadata { }

bit<8> bump(inout bit<8> z) {
    z = z + 1;
    return z;
}

bit<8> same(in bit<8> z) {
    return z;
}

bit<8> post(inout bit<8> z) {
    bit<8> old = z;
    z = z + 1;
    return old;
}

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        pkt.extract(hdr.s.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.s[hdr.h.i].v = bump(hdr.h.i);          // the element at i + 1 gets i + 1
        hdr.s[same(hdr.h.j)].v = bump(hdr.h.j);    // the element at j gets j + 1
        hdr.s[post(hdr.h.k) & 3].v |= 0x80;        // post runs once: k's element | 80, k + 1
        hdr.h.m += bump(hdr.h.m);                  // (m + 1) + (m + 1)
        hdr.h.n = hdr.h.n + bump(hdr.h.n);         // n + (n + 1)
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
