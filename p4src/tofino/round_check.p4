/* round_check.p4: which round does the cell hold?  (docs/protocol.md, step 1)
 *
 * ina.p4 reads round_epoch and round_seq, compares, and writes both back later.  On Tofino
 * a register is touched once per packet by one RegisterAction, whose stateful ALU has two
 * comparisons and returns one word, while the verdict needs three tests (epoch equal, seq
 * equal, seq older) and three answers.  So the check takes two registers and a third stage:
 *   `round_epoch`: swap in the job's epoch, return the old one (no condition: a packet of
 *            the same epoch writes what is there; any other epoch opens a new round, which
 *            writes it anyway);
 *   `round_seq`, chosen by old epoch == epoch (a gateway):
 *            same epoch: store the packet's seq if it is newer (one comparison), and return
 *                        stored - seq, the distance as it was;
 *            new epoch:  store seq (no comparison), return 0 (NEW below needs no distance);
 *   the verdict, from the distance (gateways): 0 SAME, positive STALE, negative NEW; a new
 *            epoch is always NEW.
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

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_seq) check_seq = {
        void apply(inout bit<32> value, out bit<32> distance) {
            distance = value - hdr.ina.seq;
            if ((int<32>)(value - hdr.ina.seq) < 0) {
                value = hdr.ina.seq;          // a newer round: the cell is the packet's now
            }
        }
    };

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_seq) open_seq = {
        void apply(inout bit<32> value, out bit<32> distance) {
            value = hdr.ina.seq;
            distance = 0;
        }
    };

    action epoch_check() { meta.old_epoch = swap_epoch.execute(meta.cell); }
    action seq_check() { meta.seq_distance = check_seq.execute(meta.cell); }
    action seq_open() {
        open_seq.execute(meta.cell);
        meta.round = ROUND_NEW;
    }

    apply {
        epoch_check();
        if (meta.old_epoch == meta.epoch) {
            seq_check();
            if (meta.seq_distance == 0) {
                meta.round = ROUND_SAME;
            } else if (meta.seq_distance[31:31] == 0) {
                meta.round = ROUND_STALE;       // the stored round is newer: a late duplicate
                meta.verdict = Verdict.DROP;
                meta.count_job = 1;
                meta.job_stat = JOB_STAT_STALE;
            } else {
                meta.round = ROUND_NEW;
            }
        } else {
            seq_open();
        }
    }
}

#endif
