/* registers_counters.p4: state kept across packets.
 *   acc:   register<bit<32>>(4), a running sum per index (read, add, write),
 *          with the old and new values echoed in the packet
 *   seen:  register<bit<8>>(1), a packet counter echoed in the packet
 *   cnt:   counter(4, packets_and_bytes), counted per index
 *   dcnt:  direct_counter(packets) attached to table t_dc
 * Counters are not observable from STF without check_counter (not used); the
 * packets only show that the program runs and the registers accumulate.
 * Only in-range register indexes are used. */
#include <core.p4>
#include <v1model.p4>

header d_t {
    bit<8>  idx;    // register / counter index (0..3)
    bit<32> val;    // added to acc[idx]
    bit<32> prev;   // written: acc[idx] before this packet
    bit<32> sum;    // written: acc[idx] after this packet
    bit<8>  n;      // written: number of packets seen so far, this one included
    bit<8>  hit;    // written: 1 if t_dc hit, else 0
}

struct metadata { }

struct headers {
    d_t d;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.d);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(4) acc;
    register<bit<8>>(1) seen;
    counter(4, CounterType.packets_and_bytes) cnt;
    direct_counter(CounterType.packets) dcnt;

    action dc_hit() {
        dcnt.count();
        hdr.d.hit = 1;
    }
    action dc_miss() {
        dcnt.count();
        hdr.d.hit = 0;
    }

    table t_dc {
        key = {
            hdr.d.idx: exact;
        }
        actions = {
            dc_hit;
            dc_miss;
        }
        default_action = dc_miss();
        counters = dcnt;
    }

    apply {
        bit<32> cur;
        acc.read(cur, (bit<32>)hdr.d.idx);
        hdr.d.prev = cur;
        cur = cur + hdr.d.val;
        acc.write((bit<32>)hdr.d.idx, cur);
        hdr.d.sum = cur;

        bit<8> n;
        seen.read(n, 0);
        n = n + 1;
        seen.write(0, n);
        hdr.d.n = n;

        cnt.count((bit<32>)hdr.d.idx);
        t_dc.apply();
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
        packet.emit(hdr.d);
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
