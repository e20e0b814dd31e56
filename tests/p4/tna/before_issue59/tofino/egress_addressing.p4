/* egress_addressing.p4: address each copy of a result, and each partial sent up, for its
 * receiver (ina.p4's InaEgress): `receivers` keyed (job id, receiver), where a multicast
 * copy's receiver is its replication id (the child's index) and a unicast one's comes in
 * the bridge.  The action and the table are ../common/receivers.p4, the same text as
 * ina.p4's.  The egress deparser recomputes the IPv4 checksum; UDP's is 0. */
#ifndef INA_TNA_EGRESS_ADDRESSING_P4
#define INA_TNA_EGRESS_ADDRESSING_P4

control EgressAddressing(inout tna_headers hdr, inout tna_egress_metadata meta,
                         in egress_intrinsic_metadata_t eg_intr_md) {
#include "../common/receivers.p4"

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
