/* frontend_forms.p4: P4-16 forms p4c's frontend accepts that are easy to overlook.
 *  - nested slices: the l-value `w[15:8][3:0][1:0]` (bits 9:8 of w) and the r-value
 *    `w[7:0][6:3][2:1]` (bits 5:4 of w);
 *  - extern instances declared at the top level of the program (`register` and
 *    `counter`), used from ingress and egress: one register, shared by both;
 *  - direct type invocation (P4-16 v1.2.5 "Direct type invocation"): `Bump.apply(x)`
 *    in a control's apply block (each call is its own anonymous instance, as if
 *    `Bump() b;` were declared) and `ParseTail.apply(pkt, t)` in a parser state;
 *  - an instance made by a constructor call with arguments: `AddK(8w5) add5;`;
 *  - `extract<skip_t>(_)`: the header's bytes are read (a packet too short for it is
 *    PacketTooShort) and dropped: nothing stores or emits them.
 * A header stack indexed by an `int<8>` variable is in tests/p4/builtin_only/
 * stack_index_signed.p4: with a negative index, simple_switch aborts.
 *
 * Packet: skip_t (2 bytes, never emitted), h_t (w n a t e d k), three item_t,
 * tail_t, payload.  Ingress and egress act only when h is valid; ingress then sends the
 * packet to port 1. */
#include <core.p4>
#include <v1model.p4>

header skip_t {
    bit<16> junk;
}

header h_t {
    bit<16> w;    // bits 9:8 set to 11 through a nested slice
    bit<8>  n;    // = bits 5:4 of w (read before w is written)
    bit<8>  a;    // added to total[0]
    bit<8>  t;    // total[0] after ingress added a
    bit<8>  e;    // total[0] as egress reads it
    bit<8>  d;    // Bump.apply twice: d + 2
    bit<8>  k;    // add5.apply: k + 5
}

header item_t {
    bit<8> v;
}

header tail_t {
    bit<8> x;
}

struct headers {
    h_t       h;
    item_t[3] items;
    tail_t    tail;
}

struct metadata { }

// Top-level instances: not inside any control, named "total" and "seen" (as in p4c's P4Info).
register<bit<8>>(4) total;
counter(4, CounterType.packets) seen;

parser ParseTail(packet_in p, out tail_t t) {
    state start {
        p.extract(t);
        transition accept;
    }
}

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract<skip_t>(_);
        pkt.extract(hdr.h);
        pkt.extract(hdr.items[0]);
        pkt.extract(hdr.items[1]);
        pkt.extract(hdr.items[2]);
        ParseTail.apply(pkt, hdr.tail);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control Bump(inout bit<8> x) {
    apply { x = x + 1; }
}

control AddK(inout bit<8> x)(bit<8> k) {
    apply { x = x + k; }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    AddK(8w5) add5;

    apply {
        if (hdr.h.isValid()) {
            standard_metadata.egress_spec = 1;
            hdr.h.n = (bit<8>)hdr.h.w[7:0][6:3][2:1];
            hdr.h.w[15:8][3:0][1:0] = 2w3;
            bit<8> sum;
            total.read(sum, 0);
            sum = sum + hdr.h.a;
            total.write(0, sum);
            hdr.h.t = sum;
            seen.count(0);
            Bump.apply(hdr.h.d);
            Bump.apply(hdr.h.d);
            add5.apply(hdr.h.k);
            hdr.tail.x = hdr.tail.x + 8w0x10;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.h.isValid()) {
            bit<8> now;
            total.read(now, 0);
            hdr.h.e = now;
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
        packet.emit(hdr.items);
        packet.emit(hdr.tail);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
