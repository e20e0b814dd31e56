/* entry_priorities.p4: initial (non-const) `entries` with explicit priorities
 * (`priority = N:`), mixed with entries that take theirs from the entry
 * before (previous priority minus `priority_delta`, default 1), as in the
 * P4-16 spec (v1.2.4, "Entry priorities"); larger priorities win. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> a;
    bit<8> b;
}

header out_t {
    bit<8> r1;
    bit<8> r2;
}

struct metadata { }

struct headers {
    in_t  i;
    out_t o;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set1(bit<8> v) { hdr.o.r1 = v; }
    action set2(bit<8> v) { hdr.o.r2 = v; }

    table t1 {
        key = { hdr.i.a: ternary; }
        actions = { set1; }
        default_action = set1(0xEE);
        entries = {
            priority = 10: 8w0x00 &&& 8w0xF0 : set1(1);  // 10
            8w0x05 &&& 8w0xFF : set1(2);                 // 9: loses to the first
            priority = 20: 8w0x06 &&& 8w0xFF : set1(3);  // 20
            8w0x07 &&& 8w0xFF : set1(4);                 // 19: beats the first
        }
    }

    table t2 {
        key = { hdr.i.b: ternary; }
        actions = { set2; }
        default_action = set2(0xEE);
        priority_delta = 5;
        entries = {
            priority = 10: 8w0x20 &&& 8w0xF0 : set2(1);  // 10
            8w0x00 &&& 8w0x00 : set2(2);                 // 10 - 5 = 5 (any value)
            priority = 7: 8w0x30 &&& 8w0xF0 : set2(3);   // 7: beats the wildcard
        }
    }

    apply {
        t1.apply();
        t2.apply();
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
        packet.emit(hdr.i);
        packet.emit(hdr.o);
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
