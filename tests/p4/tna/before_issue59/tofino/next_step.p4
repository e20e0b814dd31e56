/* next_step.p4: what each pass does with the packet once the state is updated.
 *
 *   CHECK   (from the wire): drops, results from the parent (multicast down) and plain
 *           forwarding end here; a contribution or a repeat is recirculated through egress
 *           (lanes 32..63) for CONSUME, with its verdict in the bridge.
 *   CONSUME: an absorbed packet is dropped; a completing contribution or an answerable
 *           repeat is recirculated for HARVEST.
 *   HARVEST: lanes 0..31 of the header hold the sums; send the packet (multicast, back to
 *           the sender, or up to the parent) through egress, which reads lanes 32..63 into
 *           each copy and addresses it.
 */
#ifndef INA_TNA_NEXT_STEP_P4
#define INA_TNA_NEXT_STEP_P4

control NextStep(inout tna_headers hdr, inout tna_ingress_metadata meta,
                 in ingress_intrinsic_metadata_t ig_intr_md,
                 inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                 inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action drop() {
        ig_dprsr_md.drop_ctl = 1;
        hdr.bridge.setInvalid();
    }
    /* A contribution crosses egress on its way back (lanes 32..63 live there); a completed
     * round's packet going to HARVEST does not need to. */
    action recirculate(bit<8> pass, bit<1> through_egress) {
        hdr.bridge.pass = pass;
        ig_tm_md.ucast_egress_port = RECIRC_PORT;
        ig_tm_md.bypass_egress = ~through_egress;
    }
    action to_egress(bit<8> pass) {
        hdr.bridge.pass = pass;
        ig_tm_md.bypass_egress = 0;
    }

    /* CHECK pass: a known member's DATA packet that is not stale. */
    action consume(bit<8> op, bit<32> job_stat) {
        hdr.bridge.op = op;
        hdr.bridge.cell = meta.cell;
        hdr.bridge.group = meta.group;
        hdr.bridge.children = meta.children;
        hdr.bridge.is_root = meta.is_root;
        hdr.bridge.index_at_parent = meta.index_at_parent;
        hdr.bridge.stats_base = meta.stats_base;
        meta.count_job = 1;
        meta.job_stat = job_stat;
        recirculate(PASS_CONSUME, 1);
    }

    apply {
        if (meta.check_pass == 1) {
            /* ---- CHECK pass (the top file made the bridge valid) ---- */
            if (meta.verdict == Verdict.DROP) {
                drop();
            } else if (meta.verdict == Verdict.PASS_DOWN) {
                hdr.bridge.next = NEXT_TO_CHILDREN;
                ig_tm_md.mcast_grp_a = meta.group;
                to_egress(PASS_EGRESS);
            } else if (meta.verdict == Verdict.CHECKED) {
                /* the sender's port, or the parent's, for a unicast answer later */
                if (meta.is_root == 1) {
                    hdr.bridge.out_port = ig_intr_md.ingress_port;
                } else {
                    hdr.bridge.out_port = meta.parent_port;
                }
                if (meta.map_result != 0) {
                    consume(OP_READ, JOB_STAT_RETRANSMITS);    // a repeat
                } else if (meta.round == ROUND_NEW) {
                    consume(OP_WRITE, JOB_STAT_AGGREGATED);
                } else {
                    consume(OP_ADD, JOB_STAT_AGGREGATED);
                }
            }   // Verdict.FORWARD: Forwarding chose the port
        } else if (hdr.bridge.pass == PASS_CONSUME) {
            /* ---- CONSUME pass: meta.remaining from WorkersCounter ---- */
            if (meta.remaining != 0) {
                drop();                       // absorbed until the last child arrives
            } else {
                if (hdr.bridge.op == OP_READ) {   // an answer: HARVEST marks it RETRANSMIT
                    if (hdr.bridge.is_root == 1) {
                        hdr.bridge.next = NEXT_TO_SENDER;
                    } else {
                        hdr.bridge.next = NEXT_TO_PARENT;   // our first partial may have been lost
                    }
                } else {
                    meta.count_job = 1;
                    meta.stats_base = hdr.bridge.stats_base;
                    meta.job_stat = JOB_STAT_RESULTS;
                    if (hdr.bridge.is_root == 1) {
                        hdr.bridge.next = NEXT_TO_CHILDREN;
                    } else {
                        hdr.bridge.next = NEXT_TO_PARENT;
                    }
                }
                recirculate(PASS_HARVEST, 0);
            }
        } else if (hdr.bridge.pass == PASS_HARVEST) {
            /* ---- HARVEST pass: lanes 0..31 of the header are the cell's sums ---- */
            if (hdr.bridge.op == OP_READ) {
                hdr.ina.flags = hdr.bridge.flags | FLAG_RETRANSMIT;
            } else {
                hdr.ina.flags = hdr.bridge.flags;
            }
            hdr.ina.exponent = (int<8>)(hdr.bridge.exponent ^ 8w0x80);
            if (hdr.bridge.next == NEXT_TO_CHILDREN) {
                hdr.ina.msg_type = MSG_RESULT;
                ig_tm_md.mcast_grp_a = hdr.bridge.group;
            } else if (hdr.bridge.next == NEXT_TO_SENDER) {
                hdr.ina.msg_type = MSG_RESULT;
                hdr.bridge.receiver = hdr.ina.child;
                ig_tm_md.ucast_egress_port = hdr.bridge.out_port;
            } else {
                hdr.ina.msg_type = MSG_DATA;
                hdr.ina.child = hdr.bridge.index_at_parent;
                hdr.bridge.receiver = RECEIVER_PARENT;
                ig_tm_md.ucast_egress_port = hdr.bridge.out_port;
            }
            to_egress(PASS_RESULT);
        }
    }
}

#endif
