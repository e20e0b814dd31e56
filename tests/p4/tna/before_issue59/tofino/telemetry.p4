/* telemetry.p4: per-job counters and drop reasons (counters, never registers), as ina.p4.
 * A Tofino counter, like a register, is counted at most once per packet and pass: the
 * CHECK pass counts what ina.p4 counts first (AGGREGATED, RETRANSMITS, STALE, BAD_*,
 * FROM_PARENT, drops) and the CONSUME pass counts RESULTS when it completes a round. */
#ifndef INA_TNA_TELEMETRY_P4
#define INA_TNA_TELEMETRY_P4

control Telemetry(in tna_ingress_metadata meta) {
    Counter<bit<64>, bit<32>>(JOB_STAT_CELLS, CounterType_t.PACKETS_AND_BYTES) job_stats;
    Counter<bit<32>, bit<32>>(DROP_REASON_COUNT, CounterType_t.PACKETS) drops;

    apply {
        if (meta.count_job == 1) {
            job_stats.count(meta.stats_base + meta.job_stat);
        }
        if (meta.count_drop == 1) {
            drops.count(meta.drop_reason);
        }
    }
}

#endif
