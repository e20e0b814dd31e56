/* egress.p4: egress addressing.  Each copy of a result or partial sum gets the addresses of
 * its receiver: a multicast copy's egress_rid is the child's index; a unicast names its
 * receiver in meta.receiver (a child index or RECEIVER_PARENT).  The `address` action and
 * the `receivers` table are ../common/receivers.p4, shared with the TNA program.
 */
#ifndef INA_V1MODEL_EGRESS_P4
#define INA_V1MODEL_EGRESS_P4

control InaEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
#include "../common/receivers.p4"

    apply {
        if (!hdr.ina.isValid()) {
            return;
        }
        if (sm.instance_type == 5) {  // a multicast copy: egress_rid is the child's index
            meta.receiver = (bit<8>)sm.egress_rid;
            hdr.ina.child = meta.receiver;
        }
        receivers.apply();
    }
}

#endif
