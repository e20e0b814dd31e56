/* receivers.p4: egress addressing, shared by both programs: each copy of a result, and
 * each partial sum sent up, gets the addresses of its receiver from `receivers`, keyed
 * (job id, receiver), where the receiver is a child's index or RECEIVER_PARENT.
 *
 * Included inside the egress control (v1model/egress.p4's InaEgress,
 * tofino/egress_addressing.p4's EgressAddressing), whose apply block sets meta.receiver
 * and applies the table.  The includer names the headers `hdr` (headers.p4's field names)
 * and its metadata `meta`, with a bit<8> `receiver`.
 */
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
        size = RECEIVER_ENTRIES;
    }
