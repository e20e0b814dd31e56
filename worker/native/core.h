/* core.h: the worker's protocol core in C, declared once for the C file and for cffi (worker/native/__init__.py
 * parses this text: plain declarations only, no #include and no #if).  The structures mirror worker/engine.py's
 * state, split as there: a tree's configuration (fixed for the job), its congestion, counters and recovery, and
 * a call's per-packet arrays (owned by numpy, lent to C) beside its scalars.  Every constant the core uses is
 * read from worker/engine.py and worker/protocol.py into ina_config, never re-typed here. */

#define INA_F32 0
#define INA_F64 1
#define INA_I32 2

typedef struct ina_config {
    int32_t window, workers, header_bytes, packet_bytes, values;
    double timeout;
    int32_t seq_at, flags_at, exponent_at;      /* byte offsets: seq a big-endian u32, flags a byte, exponent an int8 */
    int32_t flag_overflow;
    int32_t shift_base;                          /* HEADROOM_BITS - headroom(workers): s = shift_base - E */
    int32_t exponent_none;
    int32_t frame_overhead;                      /* Ethernet, IPv4 and UDP bytes in front of a payload */
    /* worker/engine.py's tuning */
    double rto_min, rto_max, rto_floor_rtts, queueing, ambiguous, look_again, initial_rto;
    int32_t initial_in_flight, dup_thresh, turn;
    uint8_t retransmit_bits[16], recover_bits[16], result_mask[16], match_mask[16], data_to_result[16];
} ina_config;

typedef struct ina_stats {
    int64_t packets_sent, retransmissions, early_retransmissions, window_cuts, results, ignored, bytes_sent,
        syscalls, polls, recoveries;
} ina_stats;

typedef struct ina_congestion {
    int32_t window, has_srtt, borrowed;          /* borrowed: srtt, rttvar and rtt_min are a sibling tree's */
    double srtt, rttvar, rtt_min, cwnd, ssthresh, last_cut;
    int64_t unsampled;                           /* results since the last round trip of a packet sent once */
} ina_congestion;

typedef struct ina_pacer {
    double mbps, rate, burst, tokens, updated;
    int32_t has_updated;
} ina_pacer;

typedef struct ina_tree {
    const ina_config *config;
    ina_congestion congestion;
    ina_stats stats;
    ina_pacer *pacer;                            /* NULL: unpaced; shared by a worker's trees */
    int64_t next_packet;
    int32_t broken, incarnation, recovered;
    int32_t has_echo;
    int64_t echo_end;
    double echo_at, echo_gap, echo_stop;
    uint8_t *kept;                               /* window x packet_bytes */
} ina_tree;

typedef struct ina_call {
    ina_tree *tree;
    int64_t n, lead, total, base;
    int32_t exact, dtype, wide;
    const void *chunks;                          /* n x values of dtype (float32, float64 or int32) */
    void *out;                                   /* n x values of dtype */
    void *last;                                  /* NULL, or chunk n-1 (input, then sum), where chunks and out
                                                    are a row short (TreeCall's ``last``) */
    int8_t *agreed;
    void *qscale, *dscale;                       /* n of dtype (float types) */
    uint8_t *packets;                            /* rows x packet_bytes: packet q in row q % rows (core.c's row_of) */
    int64_t rows;
    uint8_t *expected;                           /* total x header_bytes: each result's header, masked */
    const uint8_t *header_template;              /* 16 bytes: the fixed fields of every packet's header, zeros after */
    const int32_t *header_fields;                /* (shift, width) of slot, set, seq, exponent */
    const int8_t *exponents;                     /* n: the chunks' own */
    const int8_t *hint;                          /* NULL, or n: the exponents the last call of this size agreed
                                                    (lead 0; packet q < n is chunk q, at hint[q] for q < span, and
                                                    carries chunk (q + span) mod n's exponent) */
    int64_t span;                                /* with a hint, D = min(W, n): the first window (else 0) */
    uint8_t *wrong;                              /* n: 1 the hint was wrong, the chunk is redone; 2 its hinted
                                                    sum wrapped */
    int64_t *redo;                               /* n: packet n + j redoes chunk redo[j] */
    uint8_t *hinted_sums;                        /* span rows of 4 V bytes: the first window's sums as they
                                                    come, taken once their hints are known right */
    int64_t redos, scanned;                      /* redos found in the first-window chunks below scanned */
    int64_t capacity;                            /* packets laid out (2 n with a hint) */
    int64_t filled;
    int64_t *latest;
    uint8_t *done;
    double *sent_at;
    int64_t *retries;
    int64_t *overflowed;                         /* room for n */
    int64_t n_overflowed;
    int32_t retried, paced, held, closed;
    int64_t next_q, finished, oldest;
    double rack_sent, rack_rtt, rack_timer;      /* RACK's reference, copies too: judges copies */
    int64_t rack_q;
    int32_t rack_stale;
    double once_sent, once_rtt;                  /* the reference among packets sent once: judges those */
    int64_t once_q;
    int64_t finished_at_timeout;
    int32_t silent_timeouts;
    double probe_until;
    int32_t has_progress;
    double last_progress;
} ina_call;

typedef struct ina_segment {
    ina_tree *tree;
    const uint8_t *rows;
    int64_t count;
} ina_segment;

/* What one step lets go (worker/engine.py's Outbox): segments of rows in order, copies in ``scratch``. */
typedef struct ina_outbox {
    double room, wake;
    int32_t full;
    int32_t n_segments, cap_segments;
    ina_segment *segments;
    uint8_t *scratch;
    int64_t scratch_used, scratch_cap;           /* rows */
} ina_outbox;

void ina_congestion_init(ina_congestion *c, int32_t window, int32_t initial_in_flight);
double ina_rto(const ina_tree *t);
void ina_pacer_init(ina_pacer *p, double mbps, double burst);
void ina_call_start(ina_call *c);
int32_t ina_complete(const ina_call *c);
void ina_receive(ina_call *c, const uint8_t *rows, int64_t stride, const int64_t *lengths, int64_t k, double now);
/* -1, or the index of the call whose timeout ran out (every call's tree is then marked broken) */
int32_t ina_step(ina_call **calls, int32_t ncalls, ina_tree **idle, int32_t nidle, double now, ina_outbox *out);
int32_t ina_stalled(const ina_call *c, double now, double after);
void ina_lay_out(ina_call *c);
int32_t ina_prepare(const void *src, int64_t count, int32_t dtype, void *dst, int64_t padded, int32_t values,
                    int8_t *exps, int32_t emin, int32_t emax, int32_t enone);

/* run.c: the loop on sockets (worker/driver.py's run_calls in C) */
#define INA_RUN_DONE 0
#define INA_RUN_FAILED 1
#define INA_RUN_STOPPED 2
#define INA_RUN_SLICE 3
#define INA_RUN_OS_ERROR 4

typedef struct ina_port {                        /* a tree's socket */
    int32_t fd, gso;
    uint32_t address;                            /* the switch's, in network order */
    uint16_t port;                               /* network order */
    ina_tree *tree;
    ina_call *call;                              /* the tree's part of the running call, or NULL */
    uint8_t *pending_rows;                       /* what a full send buffer held back */
    int64_t pending, pending_cap;
    uint8_t *rx;                                 /* receive buffers */
    int64_t rx_bytes;
} ina_port;

typedef struct ina_run_args {
    ina_call **calls;
    int32_t ncalls;
    ina_tree **idle;
    int32_t nidle;
    ina_port *ports;
    int32_t nports;
    volatile int32_t *stop;                      /* set from another thread: give up */
    double until, max_wait;                      /* return by then (monotonic seconds); wait at most this long */
    ina_outbox *out;
    int32_t failed, error;                       /* the call that timed out; errno of a socket error */
} ina_run_args;

double ina_now(void);
int32_t ina_run(ina_run_args *a);
