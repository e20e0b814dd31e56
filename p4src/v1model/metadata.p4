/* metadata.p4: what ina.p4's ingress controls tell each other about one packet.
 *
 * The controls run one after another (ina.p4's InaIngress wires them); each reads what the
 * ones before decided from here.  `verdict` replaces the early returns of a single apply
 * block: a control that decides the packet's fate sets it, the later ones look at it.
 */
#ifndef INA_V1MODEL_METADATA_P4
#define INA_V1MODEL_METADATA_P4

/* meta.verdict: what happens to an aggregation packet (Verdict, ../common/vocabulary.p4:
 * CHECKED, DROP, PASS_DOWN, ANSWER, FIRST, ADD, KEEP).  The metadata starts zeroed: CHECKED. */

struct metadata {
    cell_t  cell;          // (pool base + slot) * 2 + set: this round's copy
    bit<32> me;            // the sender's bit in the slot bitmap
    bit<8>  children;      // how many children must contribute
    bit<1>  is_root;
    bit<16> group;         // multicast group of the job's children
    bit<9>  parent_port;
    bit<8>  index_at_parent;
    bit<16> epoch;         // job incarnation: a new one starts every slot afresh
    bit<32> stats_base;    // first job_stats cell of the job
    bit<16> pool_size;
    bit<8>  receiver;      // whom egress addresses: a child index or RECEIVER_PARENT
    bit<1>  from_parent;
    bit<1>  answered;      // the cell holds the round's result (a root's complete cell, or kept from a RESULT)
    bit<1>  raise;         // a repeat answered upwards: the result goes to the parent (FLAG_RECOVER)
    /* Between the ingress controls. */
    Verdict verdict;
    bit<1>  completed;     // this contribution completed the round: send the sum
    bit<1>  lane_overflow; // some lane's sum left the int32 range (ValueLanes)
    bit<1>  count_drop;    // Telemetry: count drops[drop_reason]
    bit<32> drop_reason;   // DROP_*
    bit<1>  count_job;     // Telemetry: count job_stats[stats_base + job_stat]
    bit<32> job_stat;      // JOB_STAT_*
    /* The round as the round check left it, for a meeting root (nic.p4's Meeting; ina.p4 never reads them). */
    bit<8>  arrived;       // children counted in this round after this packet
    bit<32> counted;       // their bits
    bit<1>  to_peer;       // nic.p4: this contribution's sum goes to the meeting peer (half of the round in)
}

#endif
