/* egress_addressing.p4: address each copy of a result, and each partial sent up, for its
 * receiver (ina.p4's InaEgress): `receivers` keyed (job id, receiver), where a multicast
 * copy's receiver is its replication id (the child's index) and a unicast one's comes in
 * the bridge.  The egress deparser recomputes the IPv4 checksum; UDP's is 0. */
#ifndef INA_TNA_EGRESS_ADDRESSING_P4
#define INA_TNA_EGRESS_ADDRESSING_P4

control EgressAddressing(inout tna_headers hdr, inout tna_egress_metadata meta,
                         in egress_intrinsic_metadata_t eg_intr_md) {
    action address(bit<48> dst_mac, bit<48> src_mac, bit<32> dst_ip, bit<32> src_ip, bit<16> dst_port) {
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.src = src_mac;
        hdr.ipv4.dst = dst_ip;
        hdr.ipv4.src = src_ip;
        hdr.udp.dst_port = dst_port;
    }

    table receivers {
        key = {
            hdr.ina.job_id: exact;
            meta.receiver: exact;
        }
        actions = { address; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (hdr.ina.isValid() && hdr.bridge.next != 0) {
            if (hdr.bridge.next == NEXT_TO_CHILDREN) {
                meta.receiver = eg_intr_md.egress_rid[7:0];
                hdr.ina.child = meta.receiver;
            } else {
                meta.receiver = hdr.bridge.receiver;
            }
            receivers.apply();
        }
        hdr.bridge.setInvalid();
    }
}

#endif
