/* vocabulary.p4: the names both aggregation programs use for what they decide about a
 * packet, and the sizes of their tables.  headers.p4 includes it, so ina.p4 (v1model) and
 * tofino/ina_tna.p4 (TNA) say VERDICT, cell and size the same way.  None of these types
 * is a table key or an action parameter, so none shows in the P4Info.
 */
#ifndef INA_COMMON_VOCABULARY_P4
#define INA_COMMON_VOCABULARY_P4

/* A cell of the pool registers: (pool_base + slot) * 2 + set, i.e. one set of one slot. */
typedef bit<32> cell_t;

/* meta.verdict: what ingress decided about an aggregation packet.  Both programs start it
 * at CHECKED (0); each uses the values below that its controls can reach. */
enum bit<8> Verdict {
    CHECKED   = 0,  // a known member's DATA packet: the round check decides
    DROP      = 1,  // dropped (and counted, see count_drop / count_job)
    PASS_DOWN = 2,  // the parent's result: multicast to this switch's children
    ANSWER    = 3,  // v1model: a repeat of a complete round, answered with the stored result
    FIRST     = 4,  // v1model: the first contribution of a round, overwrites the cell
    ADD       = 5,  // v1model: a further contribution, adds to the cell
    FORWARD   = 6,  // TNA: plain IPv4, the routes decide
    KEEP      = 7   // v1model: a result the cell lacked, stored in it, then multicast to the children
}

/* Table sizes (entries). */
const bit<32> JOB_ENTRIES      = 4096;  // jobs: one per (port, job, child) and per job's parent link
const bit<32> RECEIVER_ENTRIES = 4096;  // receivers: one per (job, child) and per job's parent
const bit<32> ROUTE_ENTRIES    = 1024;  // ipv4_routes
@noWarn("unused")  // nic.p4 only
const bit<32> MEETING_ENTRIES  = 1024;  // nic.p4's meetings: one per meeting root

#endif
