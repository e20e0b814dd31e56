/* next_step.p4: what each pass does with the packet once the state is updated.
 *
 *   CHECK      (from the wire): drops, results from the parent (multicast down) and plain
 *              forwarding end here; a contribution goes round to LO, a repeat to HI.
 *   LO         on to HI.
 *   HI         an absorbed contribution is dropped; the round's completing contribution, or
 *              a repeat of a complete round, goes round to HARVEST_LO.
 *   HARVEST_LO on to HARVEST_HI.
 *   HARVEST_HI the packet holds the sums: send it (multicast, back to the sender, or up to the
 *              parent) through egress, which addresses each copy.
 * Every round trip is by the recirculation port with egress bypassed (the bridge rides along).
 *
 * One instance per pass (`pass`, a constructor argument), applied inside that pass's branch of
 * ina_tna.p4: the passes are then branches of one if-else, so a compiler (and the fit check)
 * sees that, say, HARVEST_HI's flags do not wait for the round_flags write of LO and HI.
 */
#ifndef INA_TNA_NEXT_STEP_P4
#define INA_TNA_NEXT_STEP_P4

control NextStep(inout tna_headers hdr, inout tna_ingress_metadata meta,
                 in ingress_intrinsic_metadata_t ig_intr_md,
                 inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                 inout ingress_intrinsic_metadata_for_tm_t ig_tm_md)(bit<8> pass) {
    action drop() {
        ig_dprsr_md.drop_ctl = 1;
        hdr.bridge.setInvalid();
    }
    /* lane_offset: 0 for lanes 0..31, POOL_CELLS for lanes 32..63 (lane.p4) */
    action go_round(bit<8> pass, bit<32> lane_offset) {
        hdr.bridge.pass = pass;
        hdr.bridge.lane_cell = hdr.bridge.cell + lane_offset;
        ig_tm_md.ucast_egress_port = RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
    }
    action to_egress() {
        hdr.bridge.pass = PASS_OUT;
        ig_tm_md.bypass_egress = 0;
    }

    /* CHECK pass: a known member's DATA packet that is not stale. */
    action consume(bit<8> op, bit<8> pass, bit<32> job_stat) {
        hdr.bridge.op = op;
        hdr.bridge.cell = meta.cell;
        hdr.bridge.group = meta.group;
        hdr.bridge.children = meta.children;
        hdr.bridge.is_root = meta.is_root;
        hdr.bridge.index_at_parent = meta.index_at_parent;
        hdr.bridge.stats_base = meta.stats_base;
        meta.count_job = 1;
        meta.job_stat = job_stat;
        hdr.bridge.pass = pass;
        hdr.bridge.lane_cell = meta.cell;   // lanes 0..31 (a repeat's HI pass touches no lane)
        ig_tm_md.ucast_egress_port = RECIRC_PORT;
        ig_tm_md.bypass_egress = 1;
    }

    apply {
        if (pass == PASS_CHECK) {
            /* ---- CHECK pass (the top file made the bridge valid) ---- */
            if (meta.verdict == Verdict.DROP) {
                drop();
            } else if (meta.verdict == Verdict.PASS_DOWN) {
                hdr.bridge.next = NEXT_TO_CHILDREN;
                ig_tm_md.mcast_grp_a = meta.group;
                to_egress();
            } else if (meta.verdict == Verdict.CHECKED) {
                /* the sender's port, or the parent's, for a unicast answer later */
                if (meta.is_root == 1) {
                    hdr.bridge.out_port = ig_intr_md.ingress_port;
                } else {
                    hdr.bridge.out_port = meta.parent_port;
                }
                if (meta.map_result != 0) {
                    consume(OP_READ, PASS_HI, JOB_STAT_RETRANSMITS);    // a repeat
                } else if (meta.round == ROUND_NEW) {
                    consume(OP_WRITE, PASS_LO, JOB_STAT_AGGREGATED);
                } else {
                    consume(OP_ADD, PASS_LO, JOB_STAT_AGGREGATED);
                }
            } else {
                to_egress();               // Verdict.FORWARD: Forwarding chose the port
            }
        } else if (pass == PASS_LO) {
            go_round(PASS_HI, POOL_CELLS);
        } else if (pass == PASS_HI) {
            /* ---- meta.remaining from WorkersCounter ---- */
            if (meta.remaining != 0) {
                drop();                       // absorbed until the last child arrives
            } else {
                if (hdr.bridge.op == OP_READ) {   // an answer: marked RETRANSMIT on the way out
                    hdr.bridge.repeat = 1;
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
                hdr.bridge.op = OP_HARVEST;
                go_round(PASS_HARVEST_LO, 0);
            }
        } else if (pass == PASS_HARVEST_LO) {
            go_round(PASS_HARVEST_HI, POOL_CELLS);
        } else {
            /* ---- HARVEST_HI: the packet's values are the cell's sums ---- */
            if (hdr.bridge.repeat == 1) {
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
            to_egress();
        }
    }
}

#endif
