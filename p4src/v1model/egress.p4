/* egress.p4: egress addressing.  Each copy of a result or partial sum gets the addresses of
 * its receiver: a multicast copy's egress_rid is the child's index; a unicast names its
 * receiver in meta.receiver (a child index or RECEIVER_PARENT).
 */
#ifndef INA_V1MODEL_EGRESS_P4
#define INA_V1MODEL_EGRESS_P4

control InaEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action address(bit<48> dst_mac, bit<48> src_mac, bit<32> dst_ip, bit<32> src_ip, bit<16> dst_port) {
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.src = src_mac;
        hdr.ipv4.dst = dst_ip;
        hdr.ipv4.src = src_ip;
        hdr.udp.dst_port = dst_port;
    }

    /* Where each receiver of a job lives: children by index, the parent as RECEIVER_PARENT. */
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
