/* round_check.p4: the slot's round and bitmap (SwitchML's bitmap pair): is this packet a
 * new contribution, a repeat, a result to keep, or a stale duplicate?
 *
 * Which round does this cell hold?  Same (epoch, seq): this one.  Same epoch and an older
 * seq: the packet is a delayed duplicate of a finished round.  Else: a new round.  A child
 * already counted in this round, or any packet for a complete round, is a repeat: it
 * changes nothing and is answered only once the slot is complete (docs/protocol.md).
 * A complete cell below the root also keeps the result when it comes down, so a repeat is
 * answered where it arrives, not by every switch up to the root.
 * Sets meta.verdict to Verdict.FIRST / Verdict.ADD (a contribution, meta.completed when it
 * was the last), Verdict.ANSWER (meta.answered: with the result, else with the partial sum;
 * meta.raise: the result goes up), Verdict.KEEP, or Verdict.DROP (stale, or a repeat before
 * completion); a parent's result the cell does not keep stays Verdict.PASS_DOWN.
 */
#ifndef INA_V1MODEL_ROUND_CHECK_P4
#define INA_V1MODEL_ROUND_CHECK_P4

control RoundCheck(in bit<8> msg_type, in bit<8> flags, in bit<32> seq, inout metadata meta) {
    /* One cell per (slot, set). */
    @name(".InaIngress.bitmap")
    register<bit<32>>(POOL_CELLS) bitmap;     // children that contributed to this round
    @name(".InaIngress.arrivals")
    register<bit<8>>(POOL_CELLS) arrivals;    // how many of them
    @name(".InaIngress.round_seq")
    register<bit<32>>(POOL_CELLS) round_seq;  // the round's chunk number
    @name(".InaIngress.round_epoch")
    register<bit<16>>(POOL_CELLS) round_epoch;
    @name(".InaIngress.answered")
    register<bit<1>>(POOL_CELLS) answered;    // below the root: the lanes hold the round's result
    @name(".InaIngress.asked")
    register<bit<32>>(POOL_CELLS) asked;      // below the root, complete, no result yet: who repeated

    apply {
        bit<32> stored_seq;
        bit<16> stored_epoch;
        round_seq.read(stored_seq, meta.cell);
        round_epoch.read(stored_epoch, meta.cell);
        bool same_round = stored_epoch == meta.epoch && stored_seq == seq;
        if (!same_round && stored_epoch == meta.epoch && (seq - stored_seq)[31:31] == 1) {
            meta.count_job = 1;
            meta.job_stat = JOB_STAT_STALE;
            meta.verdict = Verdict.DROP;
            return;
        }
        bit<32> old = 0;
        bit<8> count = 0;
        bit<1> kept = 0;
        if (same_round) {
            bitmap.read(old, meta.cell);
            arrivals.read(count, meta.cell);
            answered.read(kept, meta.cell);
        }
        bool complete = count == meta.children;
        meta.arrived = count;
        meta.counted = old;
        if (complete && (meta.is_root == 1 || kept == 1)) {
            meta.answered = 1;
        }
        if (msg_type == MSG_RESULT) {
            /* The parent's result, or a child's copy (FLAG_RECOVER: this switch lost the round).
             * A cell that lacks it keeps it; the children get it either way. */
            if (meta.answered == 1) {
                if (meta.from_parent == 0) {
                    meta.count_job = 1;
                    meta.job_stat = JOB_STAT_RETRANSMITS;
                    meta.verdict = Verdict.ANSWER;  // the child's copy: ours goes back down
                }
                return;  // the parent's again (someone below asked): down to every child
            }
            meta.verdict = Verdict.KEEP;
            if (meta.from_parent == 0) {  // a recovery's copy: counted as the repeats are
                meta.count_job = 1;
                meta.job_stat = JOB_STAT_RETRANSMITS;
            }
            round_seq.write(meta.cell, seq);
            round_epoch.write(meta.cell, meta.epoch);
            arrivals.write(meta.cell, meta.children);
            bitmap.write(meta.cell, ((bit<32>)1 << meta.children) - 1);  // every child counted, as arrivals says
            answered.write(meta.cell, 1);
            return;
        }
        meta.count_job = 1;
        if ((old & meta.me) != 0 || complete) {
            meta.job_stat = JOB_STAT_RETRANSMITS;
            meta.verdict = Verdict.ANSWER;
            if (!complete) {
                meta.verdict = Verdict.DROP;  // absorbed: the result will come when the others arrive
            } else if (meta.answered == 1) {
                /* Answered from the cell.  A recovery's copy below the root also sends the result up:
                 * the parent may have lost the round with its registers (docs/protocol.md). */
                if (meta.is_root == 0 && (flags & FLAG_RECOVER) != 0) {
                    meta.raise = 1;
                }
            } else {
                /* The partial sum goes up again (the first may have been lost), for one child at a
                 * time: the first to repeat, then any child repeating a second time.  A repeat from
                 * every child would carry the partial up once per child, and the answer down as often. */
                bit<32> who;
                asked.read(who, meta.cell);
                asked.write(meta.cell, who | meta.me);
                if (who != 0 && (who & meta.me) == 0) {
                    meta.verdict = Verdict.DROP;
                }
            }
            return;
        }
        /* A contribution: mark me in this cell (a new round starts from old = 0).  The other
         * set's cell is left alone, unlike SwitchML's self-cleaning pair: the round check above
         * is what makes reuse safe, and a worker that sends packet g again after g + W (when a
         * switch restarted, docs/protocol.md) must not unmark itself in round g + W. */
        meta.job_stat = JOB_STAT_AGGREGATED;
        bitmap.write(meta.cell, old | meta.me);
        if (!same_round) {  // the first of a round overwrites whatever the cell held
            count = 1;
            round_seq.write(meta.cell, seq);
            round_epoch.write(meta.cell, meta.epoch);
            answered.write(meta.cell, 0);
            asked.write(meta.cell, 0);
            meta.verdict = Verdict.FIRST;
        } else {
            count = count + 1;
            meta.verdict = Verdict.ADD;
        }
        arrivals.write(meta.cell, count);
        meta.arrived = count;
        meta.counted = old | meta.me;
        if (count == meta.children) {
            meta.completed = 1;
        }
    }
}

#endif
