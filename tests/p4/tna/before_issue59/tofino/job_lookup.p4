/* job_lookup.p4: who may speak for which job, and the checks before any state is touched.
 *
 * Stage 0: `jobs` (same key and actions as ina.p4's) and `child_bit` (the sender's bit, a
 * const table because Tofino shifts only by constants).  Stage 1: the cell index and the
 * range checks, which the gateways of stage 2 read.  Sets meta.verdict and, for a drop,
 * what Telemetry counts.
 */
#ifndef INA_TNA_JOB_LOOKUP_P4
#define INA_TNA_JOB_LOOKUP_P4

control JobLookup(inout tna_headers hdr, inout tna_ingress_metadata meta,
                  in ingress_intrinsic_metadata_t ig_intr_md) {
    action member(bit<16> pool_base, bit<16> pool_size, bit<8> children, bit<1> is_root, bit<16> group,
                  bit<9> parent_port, bit<8> index_at_parent, bit<16> epoch, bit<32> stats_base) {
        meta.slot_index = (bit<32>)pool_base + (bit<32>)hdr.ina.slot;
        meta.slot_slack = (bit<17>)pool_size - (bit<17>)hdr.ina.slot;
        meta.pool_size = pool_size;
        meta.children = children;
        meta.is_root = is_root;
        meta.group = group;
        meta.parent_port = parent_port;
        meta.index_at_parent = index_at_parent;
        meta.epoch = (bit<32>)epoch;
        meta.stats_base = stats_base;
    }

    action result_from_parent(bit<16> group, bit<32> stats_base) {
        meta.from_parent = 1;
        meta.group = group;
        meta.stats_base = stats_base;
    }

    table jobs {
        key = {
            ig_intr_md.ingress_port: exact;
            hdr.ina.job_id: exact;
            hdr.ina.child: exact;
        }
        actions = { member; result_from_parent; NoAction; }
        default_action = NoAction();
        size = JOB_ENTRIES;
    }

    action set_bit(bit<32> bit_of_child) { meta.me = bit_of_child; }

    table child_bit {
        key = { hdr.ina.child: exact; }
        actions = { set_bit; NoAction; }
        default_action = NoAction();
        size = MAX_CHILDREN;
        const entries = {
            0: set_bit(32w1 << 0);   1: set_bit(32w1 << 1);   2: set_bit(32w1 << 2);   3: set_bit(32w1 << 3);
            4: set_bit(32w1 << 4);   5: set_bit(32w1 << 5);   6: set_bit(32w1 << 6);   7: set_bit(32w1 << 7);
            8: set_bit(32w1 << 8);   9: set_bit(32w1 << 9);   10: set_bit(32w1 << 10); 11: set_bit(32w1 << 11);
            12: set_bit(32w1 << 12); 13: set_bit(32w1 << 13); 14: set_bit(32w1 << 14); 15: set_bit(32w1 << 15);
            16: set_bit(32w1 << 16); 17: set_bit(32w1 << 17); 18: set_bit(32w1 << 18); 19: set_bit(32w1 << 19);
            20: set_bit(32w1 << 20); 21: set_bit(32w1 << 21); 22: set_bit(32w1 << 22); 23: set_bit(32w1 << 23);
            24: set_bit(32w1 << 24); 25: set_bit(32w1 << 25); 26: set_bit(32w1 << 26); 27: set_bit(32w1 << 27);
            28: set_bit(32w1 << 28); 29: set_bit(32w1 << 29); 30: set_bit(32w1 << 30); 31: set_bit(32w1 << 31);
        }
    }

    action reject(bit<32> reason) {
        meta.verdict = Verdict.DROP;
        meta.count_drop = 1;
        meta.drop_reason = reason;
    }
    action reject_job(bit<32> stat) {
        meta.verdict = Verdict.DROP;
        meta.count_job = 1;
        meta.job_stat = stat;
    }

    apply {
        bool known = false;
        if (hdr.ina.child < 32) {                       // stage 0
            known = jobs.apply().hit;
            child_bit.apply();
        }
        meta.cell = meta.slot_index << 1 | (bit<32>)hdr.ina.set;   // stage 1
        if (!known) {
            reject(DROP_UNKNOWN_MEMBER);
        } else if (meta.stats_base > JOB_STAT_CELLS - JOB_STAT_COUNT) {
            reject(DROP_BAD_ENTRY);      // a controller bug must not touch another job's cells
        } else if (meta.from_parent == 1) {
            if (hdr.ina.msg_type == MSG_RESULT) {
                meta.verdict = Verdict.PASS_DOWN;
                meta.count_job = 1;
                meta.job_stat = JOB_STAT_FROM_PARENT;
            } else {
                reject_job(JOB_STAT_BAD_TYPE);
            }
        } else if (hdr.ina.msg_type != MSG_DATA) {
            reject_job(JOB_STAT_BAD_TYPE);
        } else if (meta.slot_slack == 0 || meta.slot_slack[16:16] == 1) {
            reject_job(JOB_STAT_BAD_SLOT);                           // slot >= pool_size
        } else if (meta.slot_index >= INA_POOL_SLOTS) {
            reject(DROP_BAD_ENTRY);      // pool_base + pool_size beyond the pool: a controller bug
        }
    }
}

#endif
