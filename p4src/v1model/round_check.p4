/* round_check.p4: the slot's round and bitmap (SwitchML's bitmap pair): is this packet a
 * new contribution, a repeat, or a stale duplicate?
 *
 * Which round does this cell hold?  Same (epoch, seq): this one.  Same epoch and an older
 * seq: the packet is a delayed duplicate of a finished round.  Else: a new round.  A child
 * already counted in this round, or any packet for a complete round, is a repeat: it
 * changes nothing and is answered only once the slot is complete (docs/protocol.md).
 * Sets meta.verdict to Verdict.FIRST / Verdict.ADD (a contribution, meta.completed when it
 * was the last), Verdict.ANSWER, or Verdict.DROP (stale, or a repeat before completion).
 */
#ifndef INA_V1MODEL_ROUND_CHECK_P4
#define INA_V1MODEL_ROUND_CHECK_P4

control RoundCheck(in bit<32> seq, inout metadata meta) {
    /* One cell per (slot, set). */
    @name(".InaIngress.bitmap")
    register<bit<32>>(POOL_CELLS) bitmap;     // children that contributed to this round
    @name(".InaIngress.arrivals")
    register<bit<8>>(POOL_CELLS) arrivals;    // how many of them
    @name(".InaIngress.round_seq")
    register<bit<32>>(POOL_CELLS) round_seq;  // the round's chunk number
    @name(".InaIngress.round_epoch")
    register<bit<16>>(POOL_CELLS) round_epoch;

    apply {
        bit<32> stored_seq;
        bit<16> stored_epoch;
        round_seq.read(stored_seq, meta.cell);
        round_epoch.read(stored_epoch, meta.cell);
        bool same_round = stored_epoch == meta.epoch && stored_seq == seq;
        meta.count_job = 1;
        if (!same_round && stored_epoch == meta.epoch && (seq - stored_seq)[31:31] == 1) {
            meta.job_stat = JOB_STAT_STALE;
            meta.verdict = Verdict.DROP;
            return;
        }
        bit<32> old = 0;
        bit<8> count = 0;
        if (same_round) {
            bitmap.read(old, meta.cell);
            arrivals.read(count, meta.cell);
        }
        if ((old & meta.me) != 0 || count == meta.children) {
            meta.job_stat = JOB_STAT_RETRANSMITS;
            if (count != meta.children) {
                meta.verdict = Verdict.DROP;  // absorbed: the result will come when the others arrive
            } else {
                meta.verdict = Verdict.ANSWER;
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
            meta.verdict = Verdict.FIRST;
        } else {
            count = count + 1;
            meta.verdict = Verdict.ADD;
        }
        arrivals.write(meta.cell, count);
        if (count == meta.children) {
            meta.completed = 1;
        }
    }
}

#endif
