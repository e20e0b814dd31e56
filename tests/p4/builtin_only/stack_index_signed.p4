/* stack_index_signed.p4: a header stack indexed by an `int<8>` variable, which no BMv2 behaviour
 * exists for when the index is negative, so this program runs on the built-in target only
 * (it was part of tests/p4/stf/frontend_forms.p4).
 *
 * p4c 1.2.5.16 (p4c-bm2-ss) compiles it and simple_switch 1.15.5 loads it, but the first packet
 * with a negative index aborts the switch: "boost::wrapexcept<std::range_error>: Conversion
 * from negative integer to an unsigned type results in undefined behaviour" (BMv2 converts the
 * index to an unsigned number; a non-negative index past the end aborts it too, see
 * stack_index_range.p4).  The built-in target treats a negative index as out of range, with
 * the rule of stack_index_range.p4: the statement that names the element is skipped.
 *
 * Packet: ctl_t (idx q), three item_t (v), payload; everything goes to port 1.
 *   i = (int<8>)idx; q = items[i].v; items[i].v = EE (both skipped when i is out of range). */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> idx;  // read as int<8>: 80..FF are -128..-1
    bit<8> q;    // items[i].v, when i is in range
}

header item_t {
    bit<8> v;
}

struct headers {
    ctl_t     ctl;
    item_t[3] items;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
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

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        int<8> i = (int<8>)hdr.ctl.idx;
        hdr.ctl.q = hdr.items[i].v;
        hdr.items[i].v = 8w0xEE;
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
        packet.emit(hdr.ctl);
        packet.emit(hdr.items);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
