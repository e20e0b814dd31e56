/* telemetry.p4: the counters the controller reads (protocol.p4 names the cells).
 *
 * job_stats has JOB_STAT_COUNT cells per job from its stats_base; drops counts what was
 * dropped before a job was known.  The other controls only say what to count (meta), so
 * each counter is touched in one place, at the end of ingress.
 */
#ifndef INA_V1MODEL_TELEMETRY_P4
#define INA_V1MODEL_TELEMETRY_P4

control Telemetry(in metadata meta) {
    @name(".InaIngress.job_stats")
    counter(JOB_STAT_CELLS, CounterType.packets_and_bytes) job_stats;
    @name(".InaIngress.drops")
    counter(DROP_REASON_COUNT, CounterType.packets) drops;

    apply {
        if (meta.count_drop == 1) {
            drops.count(meta.drop_reason);
        }
        if (meta.count_job == 1) {
            job_stats.count(meta.stats_base + meta.job_stat);
        }
        if (meta.completed == 1) {
            job_stats.count(meta.stats_base + JOB_STAT_RESULTS);
        }
    }
}

#endif
