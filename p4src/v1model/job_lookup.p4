/* job_lookup.p4: which job and tree position an aggregation packet belongs to, and whether
 * it is acceptable at all.
 *
 * The jobs table has one entry per child of a job at this switch (member) and one for the
 * results coming down from the parent (result_from_parent, which also names the cell a result is kept in).  Everything that cannot be
 * aggregated is refused here with its reason (meta.verdict = Verdict.DROP and the counter
 * Telemetry bumps), before any slot state is read: bad input leaves the registers untouched.
 */
#ifndef INA_V1MODEL_JOB_LOOKUP_P4
#define INA_V1MODEL_JOB_LOOKUP_P4

control JobLookup(in ina_t ina, in bit<9> ingress_port, in error parser_error, inout metadata meta) {
    @name(".InaIngress.member")
    action member(bit<16> pool_base, bit<16> pool_size, bit<8> children, bit<1> is_root, bit<16> group,
                  bit<9> parent_port, bit<8> index_at_parent, bit<16> epoch, bit<32> stats_base) {
        meta.cell = (((bit<32>)pool_base + (bit<32>)ina.slot) << 1) | (bit<32>)ina.set;
        meta.me = (bit<32>)1 << ina.child;
        meta.children = children;
        meta.is_root = is_root;
        meta.group = group;
        meta.parent_port = parent_port;
        meta.index_at_parent = index_at_parent;
        meta.epoch = epoch;
        meta.stats_base = stats_base;
        meta.pool_size = pool_size;
    }

    /* The parent's results: pool_base, pool_size, children and epoch name the cell a result is kept
     * in, so a repeat from below is answered here (docs/protocol.md, "Results kept on the way down"). */
    @name(".InaIngress.result_from_parent")
    action result_from_parent(bit<16> pool_base, bit<16> pool_size, bit<8> children, bit<16> epoch,
                              bit<16> group, bit<32> stats_base) {
        meta.cell = (((bit<32>)pool_base + (bit<32>)ina.slot) << 1) | (bit<32>)ina.set;
        meta.from_parent = 1;
        meta.children = children;
        meta.epoch = epoch;
        meta.pool_size = pool_size;
        meta.group = group;
        meta.stats_base = stats_base;
    }

    @name(".InaIngress.jobs")
    table jobs {
        key = {
            ingress_port: exact @name("sm.ingress_port");
            ina.job_id: exact @name("hdr.ina.job_id");
            ina.child: exact @name("hdr.ina.child");
        }
        actions = { member; result_from_parent; NoAction; }
        default_action = NoAction();
        size = JOB_ENTRIES;
    }

    /* A refusal before the job is known counts in drops; one after, in the job's own cells
     * (the same two actions as the TNA program's JobLookup).  Called from apply only, and
     * @hidden: they are not the controller's, and ina.p4's P4Info stays as it was. */
    @hidden
    action reject(bit<32> reason) {
        meta.verdict = Verdict.DROP;
        meta.count_drop = 1;
        meta.drop_reason = reason;
    }
    @hidden
    action reject_job(bit<32> stat) {
        meta.verdict = Verdict.DROP;
        meta.count_job = 1;
        meta.job_stat = stat;
    }

    /* The metadata starts zeroed: a packet that passes every check keeps Verdict.CHECKED and
     * counts nothing yet (the round check says which cell counts). */
    apply {
        if (parser_error != error.NoError) {
            reject(DROP_TRUNCATED);
            return;
        }
        bool known = false;
        if (ina.child < 32) {
            known = jobs.apply().hit;
        }
        if (!known) {
            reject(DROP_UNKNOWN_MEMBER);
        } else if (meta.stats_base > JOB_STAT_CELLS - JOB_STAT_COUNT) {
            reject(DROP_BAD_ENTRY);      // a controller bug must not touch another job's cells
        } else if (meta.from_parent == 1 && ina.msg_type != MSG_RESULT) {
            reject_job(JOB_STAT_BAD_TYPE);
        } else if (meta.from_parent == 0 && ina.msg_type != MSG_DATA
                   && (ina.msg_type != MSG_RESULT || (ina.flags & FLAG_RECOVER) == 0)) {
            reject_job(JOB_STAT_BAD_TYPE);   // a child sends DATA, or its copy of a result after a restart
        } else if (ina.slot >= meta.pool_size) {
            reject_job(JOB_STAT_BAD_SLOT);
        } else if (meta.cell >= POOL_CELLS) {
            reject(DROP_BAD_ENTRY);      // pool_base + pool_size beyond the pool: a controller bug
        } else if (meta.from_parent == 1) {
            meta.verdict = Verdict.PASS_DOWN;  // the round check may keep it in the cell (Verdict.KEEP)
            meta.count_job = 1;
            meta.job_stat = JOB_STAT_FROM_PARENT;
        }
    }
}

#endif
