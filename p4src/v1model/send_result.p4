/* send_result.p4: where an aggregation packet goes once ingress has decided (meta.verdict).
 *
 * A complete slot's sum goes to the job's children (root: multicast) or up to the parent
 * (partial sum); an answer to a repeat goes back to its sender (root, or a cell that kept the
 * result) or up again (our first partial may have been lost), or, for a recovery's copy, the
 * result goes up (the parent may have lost it); a result from the parent (or kept) goes down
 * to the children; everything else is dropped.  The actions keep their InaIngress control-plane names.
 */
#ifndef INA_V1MODEL_SEND_RESULT_P4
#define INA_V1MODEL_SEND_RESULT_P4

/* msg_type, child: the packet's hdr.ina fields (scalars: a header would be copied in and out). */
control SendResult(inout bit<8> msg_type, inout bit<8> child, inout bit<16> udp_checksum, inout metadata meta,
                   inout standard_metadata_t sm) {
    @name(".InaIngress.send_result_to_children")
    action send_result_to_children() {
        msg_type = MSG_RESULT;
        sm.mcast_grp = meta.group;
    }
    @name(".InaIngress.send_result_to_sender")
    action send_result_to_sender() {
        msg_type = MSG_RESULT;
        meta.receiver = child;
        sm.egress_spec = sm.ingress_port;
    }
    @name(".InaIngress.send_result_to_parent")
    action send_result_to_parent() {
        msg_type = MSG_RESULT;
        child = meta.index_at_parent;
        meta.receiver = RECEIVER_PARENT;
        sm.egress_spec = meta.parent_port;
    }
    @name(".InaIngress.send_partial_to_parent")
    action send_partial_to_parent() {
        msg_type = MSG_DATA;
        child = meta.index_at_parent;
        meta.receiver = RECEIVER_PARENT;
        sm.egress_spec = meta.parent_port;
    }

    apply {
        if (meta.to_peer == 1) {  // nic.p4's meeting root: half of the round in, its sum to the peer
            udp_checksum = 0;
            send_partial_to_parent();
            return;
        }
        if (meta.completed == 0 && meta.verdict != Verdict.ANSWER && meta.verdict != Verdict.PASS_DOWN
                && meta.verdict != Verdict.KEEP) {
            mark_to_drop(sm);  // refused, stale, or absorbed until the last child arrives
            return;
        }
        udp_checksum = 0;  // values change; IPv4 lets UDP go without a checksum
        if (meta.verdict == Verdict.PASS_DOWN || meta.verdict == Verdict.KEEP) {
            send_result_to_children();
        } else if (meta.verdict == Verdict.ANSWER) {
            if (meta.raise == 1) {
                send_result_to_parent();
            } else if (meta.answered == 1) {
                send_result_to_sender();
            } else {
                send_partial_to_parent();
            }
        } else if (meta.is_root == 1) {
            send_result_to_children();
        } else {
            send_partial_to_parent();
        }
    }
}

#endif
