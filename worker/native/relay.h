/* relay.h: a host's relay (worker/relay.py) in C, declared once for relay.c and for cffi (worker/native/__init__.py
 * reads this text after core.h: plain declarations only, no #include and no #if).  A tree's cells and the counters
 * are numpy's arrays (worker.relay.Cells and RelayStats), lent to C.  Every protocol number is read from
 * worker.protocol.Protocol into ina_relay_layout (its upper-case fields by their constants' names), never re-typed. */

typedef struct ina_relay_layout {
    int32_t header_bytes, packet_bytes, values;
    /* each field's (shift in the header read as one big-endian integer, width, signed): Protocol.layout */
    int32_t msg_type[3], flags[3], job_id[3], child[3], set[3], slot[3], seq[3], exponent[3];
    int32_t MSG_DATA, MSG_RESULT, FLAG_RETRANSMIT, FLAG_RECOVER, FLAG_OVERFLOW, RECEIVER_PARENT;
    int32_t JOB_STAT_AGGREGATED, JOB_STAT_RESULTS, JOB_STAT_RETRANSMITS, JOB_STAT_STALE, JOB_STAT_BAD_SLOT,
        JOB_STAT_BAD_TYPE, JOB_STAT_FROM_PARENT;
    int32_t DROP_TRUNCATED, DROP_UNKNOWN_MEMBER;
} ina_relay_layout;

typedef struct ina_relay_tree {                  /* worker.relay.RelayTree, and its Cells and counters */
    int32_t job_id, pool_size, is_root, epoch;
    int32_t has_parent, parent_port, index_at_parent;
    int32_t peer;                                /* -1: no peer */
    int32_t n_children;
    int32_t child_index[32], child_port[32];     /* in multicast order */
    uint32_t *bitmap, *round_seq, *asked;        /* cells (2 x pool_size) each */
    uint8_t *arrivals, *answered, *flags;
    uint16_t *round_epoch;
    int8_t *exponent;
    int32_t *lanes;                              /* cells x values */
    int64_t *job_stats;                          /* JOB_STAT_* */
} ina_relay_tree;

typedef struct ina_relay {
    const ina_relay_layout *layout;
    ina_relay_tree *trees;
    int32_t n_trees;
    int32_t fanout;                              /* the most outputs one datagram can cause */
    int64_t *drops;                              /* DROP_* */
} ina_relay;

/* Where a batch's outputs go (the caller's arrays): output j is out of ports[j], to receivers[j], the
 * packet_bytes of payloads row j. */
typedef struct ina_relay_outputs {
    int32_t *ports, *receivers;
    uint8_t *payloads;
    int64_t n, cap;                              /* outputs written; room for */
    int64_t taken;                               /* datagrams of the batch consumed (all, unless the room ran out) */
} ina_relay_outputs;

/* k datagrams that came in on ``port`` (row i: lengths[i] bytes at rows + i * stride), in order, each as
 * Relay.receive takes it; stops early (out->taken < k) only when out has no room for one more's outputs. */
void ina_relay_receive(ina_relay *r, int64_t port, const uint8_t *rows, int64_t stride, const int64_t *lengths,
                       int64_t k, ina_relay_outputs *out);
