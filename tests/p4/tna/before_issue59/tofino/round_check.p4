/* round_check.p4: which round does the cell hold?  (docs/protocol.md, step 1)
 *
 * ina.p4 reads round_epoch and round_seq, compares, and writes both back later.  On Tofino
 * a register is touched once per packet by one RegisterAction, and a stateful ALU has two
 * comparisons, while the verdict needs three (epoch equal, seq equal, seq older).  So the
 * check takes two registers in two stages:
 *   stage 2  `round_epoch`: swap in the job's epoch, return the old one (no condition;
 *            a packet of the same epoch writes what is there; any other epoch opens a
 *            new round, which writes it anyway);
 *   stage 3  `round_seq`: chosen by old epoch == epoch (a gateway):
 *            same epoch:  seq equal -> SAME; stored seq newer -> STALE (unchanged);
 *                         else -> NEW, store seq            (two comparisons)
 *            new epoch:   store seq -> NEW                   (no comparison)
 * The cell's state is unchanged for SAME and STALE, as in ina.p4.
 */
#ifndef INA_TNA_ROUND_CHECK_P4
#define INA_TNA_ROUND_CHECK_P4

control RoundCheck(inout tna_headers hdr, inout tna_ingress_metadata meta) {
    Register<bit<32>, bit<32>>(POOL_CELLS) round_epoch;
    Register<bit<32>, bit<32>>(POOL_CELLS) round_seq;

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_epoch) swap_epoch = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = meta.epoch;
        }
    };

    RegisterAction<bit<32>, bit<32>, bit<8>>(round_seq) check_seq = {
        void apply(inout bit<32> value, out bit<8> rv) {
            if (value == hdr.ina.seq) {
                rv = ROUND_SAME;
            } else if ((int<32>)(value - hdr.ina.seq) > 0) {
                rv = ROUND_STALE;            // the stored round is newer: a late duplicate
            } else {
                value = hdr.ina.seq;
                rv = ROUND_NEW;
            }
        }
    };

    RegisterAction<bit<32>, bit<32>, bit<8>>(round_seq) open_seq = {
        void apply(inout bit<32> value, out bit<8> rv) {
            value = hdr.ina.seq;
            rv = ROUND_NEW;
        }
    };

    action epoch_check() { meta.old_epoch = swap_epoch.execute(meta.cell); }
    action seq_check() { meta.round = check_seq.execute(meta.cell); }
    action seq_open() { meta.round = open_seq.execute(meta.cell); }

    apply {
        epoch_check();                     // stage 2
        if (meta.old_epoch == meta.epoch) { // stage 3
            seq_check();
        } else {
            seq_open();
        }
        if (meta.round == ROUND_STALE) {
            meta.verdict = Verdict.DROP;
            meta.count_job = 1;
            meta.job_stat = JOB_STAT_STALE;
        }
    }
}

#endif
