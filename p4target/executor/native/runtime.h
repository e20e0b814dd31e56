/* runtime.h: what the C lowered from a program's generated Python runs on.
 *
 * Included once per program, after the program's sizes (N_SLOTS, N_TABLES, N_REGS, N_COUNTERS,
 * N_VSETS, MAX_HEADER_BYTES) are #defined.  Every slot of the state list is a v_t: 128 bits,
 * so each bit<W>/int<W> (W <= 64) and every intermediate result the Python computes before it
 * masks fits, and with -fwrapv the wrap-around of +, -, * and << is modular, as the Python's
 * masks expect.  Tables, registers, counters, value sets and multicast groups are arrays that
 * Python owns (numpy) and hands over with the setters at the end of this file.
 */
#ifndef P4T_RUNTIME_H
#define P4T_RUNTIME_H

#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef __int128 v_t;
typedef unsigned __int128 u_t;

typedef struct {
    const uint8_t *p;
    long n;
} bytes_t;

/* Why a packet is given up before it leaves: the Python executor's exceptions. */
enum { DROP_NONE = 0, DROP_STACK_INDEX = 1, DROP_ASSERT = 2, DROP_REGISTER_CONFLICT = 3, DROP_OUTPUT_FULL = 4,
       DROP_LOOP = 5 };

/* Counters the switch reports (Switch.stats); the names are in engine.py's STAT_NAMES. */
enum {
    ST_RECEIVED, ST_SENT, ST_DROPPED, ST_INTERNAL_ERRORS, ST_ASSERT_FAILURES, ST_LOOP_DROPS,
    ST_REGISTER_CONFLICTS, ST_PARSER_DROPS, ST_COUNT
};

typedef struct {
    int32_t nkeys, n, nargs, exact;
    const uint8_t *range; /* [n][nkeys]: 1 for a range match (a = lo, b = hi), else a = value, b = mask */
    const uint64_t *a, *b; /* [n][nkeys], in lookup order */
    const int32_t *action; /* [n + 1]: global action ids; row n is the default entry */
    const int32_t *slot; /* [n + 1]: direct counter row, or -1 */
    const uint64_t *args; /* [n + 1][nargs] */
    int64_t *counters; /* [rows][2]: packets, bytes */
    int32_t *hash; /* exact tables: open addressing over rows, -1 empty */
    uint64_t hmask;
} table_t;

typedef struct {
    int32_t n;
    const int64_t *group; /* [n], ascending */
    const int32_t *start; /* [n + 1]: replicas of group i are start[i] .. start[i + 1] - 1 */
    const int32_t *port, *rid;
} mcast_t;

typedef struct {
    int32_t n, nkeys;
    const uint64_t *value, *mask; /* [n][nkeys] */
} vset_t;

#define MAX_OUTPUTS 1024

/* Before a loop over a header's run of fields of one type (lower.py: a value array's load_be/store_be).
 * A program built at -O1 (build.py defines P4T_UNROLL_FIELDS) unrolls it in full, as the straight line it
 * replaced: -O1 does not unroll, and the loop of calls cost TNA's parser and deparser 2.5k instructions a
 * packet.  At -O3 gcc unrolls and vectorises it as it sees fit. */
#ifdef P4T_UNROLL_FIELDS
#define UNROLL_FIELDS _Pragma("GCC unroll 4096")
#else
#define UNROLL_FIELDS
#endif

typedef struct {
    jmp_buf drop; /* a fatal condition (DROP_*) abandons the packet */
    int drop_reason;
    int exiting; /* P4 `exit` unwinding to the control's top */
    bytes_t payload; /* what the parser left of this packet (the *_with_payload checksums) */
    void *reg[N_REGS + 1];
    int64_t *cnt_packets[N_COUNTERS + 1], *cnt_bytes[N_COUNTERS + 1];
    table_t tables[N_TABLES + 1];
    vset_t vsets[N_VSETS + 1];
    mcast_t mcast;
    int64_t stats[ST_COUNT];
    /* this packet's outputs: port and extent in `out` */
    uint8_t *out;
    long out_cap, out_len;
    uint8_t *scratch; /* TNA: one pass's buffers */
    v_t *eg_slots; /* TNA: an egress copy's slots, kept from one copy to the next (tna.h egress_copy) */
    long scratch_cap;
    int32_t n_out;
    int32_t out_port[MAX_OUTPUTS];
    int64_t out_off[MAX_OUTPUTS], out_size[MAX_OUTPUTS];
} ctx_t;

static void drop_packet(ctx_t *ctx, int reason) {
    ctx->drop_reason = reason;
    longjmp(ctx->drop, 1);
}

/* A packet starts with no outputs. */
static void packet_begin(ctx_t *ctx) {
    ctx->n_out = 0;
    ctx->out_len = 0;
    ctx->stats[ST_RECEIVED]++;
}

/* After drop_packet: the packet's outputs are gone, its reason counted as the Python switches
 * count their exceptions; returns -reason for p4t_process. */
static int packet_abandoned(ctx_t *ctx) {
    int reason = ctx->drop_reason;
    ctx->n_out = 0;
    if (reason == DROP_ASSERT) ctx->stats[ST_ASSERT_FAILURES]++;
    else if (reason == DROP_STACK_INDEX) ctx->stats[ST_DROPPED]++;
    else if (reason == DROP_LOOP) ctx->stats[ST_LOOP_DROPS]++;
    else if (reason == DROP_REGISTER_CONFLICT) {
        ctx->stats[ST_REGISTER_CONFLICTS]++;
        ctx->stats[ST_DROPPED]++;
    } else ctx->stats[ST_INTERNAL_ERRORS]++;
    return -reason;
}

/* ------------------------------------------------------------------ integers */
static inline v_t v_min(v_t a, v_t b) { return a < b ? a : b; }
static inline v_t v_max(v_t a, v_t b) { return a > b ? a : b; }
/* Python's shifts have no upper bound: a shift by 128 or more is all sign (>>) or zero (<<). */
static inline v_t v_shl(v_t a, v_t b) { return b >= 128 ? 0 : (v_t)((u_t)a << (int)b); }
static inline v_t v_shr(v_t a, v_t b) { return b >= 127 ? (a < 0 ? -1 : 0) : a >> (int)b; }
static inline v_t v_div(v_t a, v_t b) { return a / b; }
static inline v_t v_mod(v_t a, v_t b) { return a % b; }

static inline v_t stack_index(ctx_t *ctx, v_t i, v_t size) {
    if (i < 0 || i >= size) drop_packet(ctx, DROP_STACK_INDEX);
    return i;
}

/* (int.from_bytes(p[:n], 'big') >> shift) & (2**width - 1), for width <= 120. */
static inline v_t get_bits(const uint8_t *p, long n, long shift, int width) {
    long top = n * 8 - shift - width; /* bit offset of the field's top from the buffer's top */
    u_t acc = 0;
    long first = top >> 3, last = (n * 8 - shift - 1) >> 3;
    for (long i = first; i <= last; i++) acc = (acc << 8) | (i >= 0 && i < n ? p[i] : 0);
    int tail = (int)(7 - ((n * 8 - shift - 1) & 7));
    acc >>= tail;
    if (width < 128) acc &= (((u_t)1) << width) - 1;
    return (v_t)acc;
}

/* OR v's low `width` bits into p[:n] from bit `shift`, a byte's worth at a time (v: any unsigned type,
   already masked; consumed). */
#define PUT_BITS_BYTEWISE(p, n, shift, width, v)                          \
    for (long bit = (shift); (width) > 0;) {                              \
        long byte = (n) - 1 - (bit >> 3);                                 \
        int off = (int)(bit & 7);                                         \
        int take = 8 - off < (width) ? 8 - off : (width);                 \
        (p)[byte] |= (uint8_t)(((v) & ((1u << take) - 1)) << off);        \
        (v) >>= take;                                                     \
        (width) -= take;                                                  \
        bit += take;                                                      \
    }

/* OR `value`'s low `width` bits into the big-endian number p[:n] at bit `shift` from its end. */
static inline void put_bits(uint8_t *p, long n, long shift, int width, v_t value) {
    if (width <= 64) { /* a field of at most 64 bits: the same in 64-bit arithmetic, about half the instructions */
        uint64_t v = (uint64_t)value;
        if (width < 64) v &= (((uint64_t)1) << width) - 1;
        PUT_BITS_BYTEWISE(p, n, shift, width, v);
        return;
    }
    u_t v = (u_t)value;
    if (width < 128) v &= (((u_t)1) << width) - 1;
    PUT_BITS_BYTEWISE(p, n, shift, width, v);
}

static inline v_t load_be(const uint8_t *p, int n, int is_signed) {
    switch (n) { /* the struct formats' sizes: one load and a byte swap */
    case 1: return is_signed ? (v_t)(int8_t)p[0] : (v_t)p[0];
    case 2: {
        uint16_t x;
        memcpy(&x, p, 2);
        x = __builtin_bswap16(x);
        return is_signed ? (v_t)(int16_t)x : (v_t)x;
    }
    case 4: {
        uint32_t x;
        memcpy(&x, p, 4);
        x = __builtin_bswap32(x);
        return is_signed ? (v_t)(int32_t)x : (v_t)x;
    }
    case 8: {
        uint64_t x;
        memcpy(&x, p, 8);
        x = __builtin_bswap64(x);
        return is_signed ? (v_t)(int64_t)x : (v_t)x;
    }
    }
    u_t acc = 0;
    for (int i = 0; i < n; i++) acc = (acc << 8) | p[i];
    if (is_signed && n < 16 && (p[0] & 0x80)) return (v_t)acc - ((v_t)1 << (8 * n));
    return (v_t)acc;
}

static inline void store_be(uint8_t *p, int n, v_t value) {
    switch (n) {
    case 1: p[0] = (uint8_t)value; return;
    case 2: {
        uint16_t x = __builtin_bswap16((uint16_t)value);
        memcpy(p, &x, 2);
        return;
    }
    case 4: {
        uint32_t x = __builtin_bswap32((uint32_t)value);
        memcpy(p, &x, 4);
        return;
    }
    case 8: {
        uint64_t x = __builtin_bswap64((uint64_t)value);
        memcpy(p, &x, 8);
        return;
    }
    }
    u_t v = (u_t)value;
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* ------------------------------------------------------------------ byte strings */
/* pack_bits(): fields MSB first, zero-padded at the end to a byte; a skipped field adds nothing. */
typedef struct {
    uint8_t *p;
    long nbits;
} bitwriter_t;

/* value's low `width` bits, most significant first, a byte's worth at a time (an IPv4 header: 20 steps, not
 * 160); a byte is cleared when the writer enters it. */
static inline void bw_put(bitwriter_t *w, v_t value, int width) {
    u_t v = (u_t)value;
    while (width > 0) {
        long at = w->nbits;
        int off = (int)(at & 7);
        int take = 8 - off < width ? 8 - off : width;
        uint8_t bits = (uint8_t)((v >> (width - take)) & ((1u << take) - 1));
        if (off == 0) w->p[at >> 3] = 0;
        w->p[at >> 3] |= (uint8_t)(bits << (8 - off - take));
        w->nbits += take;
        width -= take;
    }
}

static inline bytes_t bw_bytes(bitwriter_t *w) {
    bytes_t b = {w->p, (w->nbits + 7) >> 3};
    return b;
}

static inline bytes_t bytes_empty(void) {
    bytes_t b = {(const uint8_t *)"", 0};
    return b;
}

static inline v_t bytes_int(bytes_t b, int first_n) {
    long n = first_n >= 0 && b.n > first_n ? first_n : b.n;
    u_t acc = 0;
    for (long i = 0; i < n; i++) acc = (acc << 8) | b.p[i];
    return (v_t)acc;
}

static uint32_t csum_sum(uint32_t acc, bytes_t b) {
    for (long i = 0; i + 1 < b.n; i += 2) acc += ((uint32_t)b.p[i] << 8) | b.p[i + 1];
    if (b.n & 1) acc += (uint32_t)b.p[b.n - 1] << 8;
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return acc;
}

static inline v_t csum16(bytes_t b) { return (~csum_sum(0, b)) & 0xFFFF; }

/* csum16(a + b): an odd-length a pairs its last byte with b's first. */
static v_t csum16_concat(bytes_t a, bytes_t b) {
    uint32_t acc = 0;
    long i = 0;
    for (; i + 1 < a.n; i += 2) acc += ((uint32_t)a.p[i] << 8) | a.p[i + 1];
    long j = 0;
    if (a.n & 1) {
        acc += ((uint32_t)a.p[a.n - 1] << 8) | (b.n ? b.p[0] : 0);
        j = 1;
    }
    for (; j + 1 < b.n; j += 2) acc += ((uint32_t)b.p[j] << 8) | b.p[j + 1];
    if (j < b.n) acc += (uint32_t)b.p[j] << 8;
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return (~acc) & 0xFFFF;
}
static inline v_t csum_add(v_t acc, bytes_t b) { return csum_sum((uint32_t)acc, b); }

static inline v_t csum_sub(v_t acc, bytes_t b) {
    uint32_t total = (uint32_t)acc;
    for (long i = 0; i < b.n; i += 2) {
        uint32_t word = ((uint32_t)b.p[i] << 8) | (i + 1 < b.n ? b.p[i + 1] : 0);
        total += 0xFFFF ^ word;
    }
    while (total >> 16) total = (total & 0xFFFF) + (total >> 16);
    return total;
}

static v_t crc16(bytes_t b) {
    uint32_t crc = 0;
    for (long i = 0; i < b.n; i++) {
        crc ^= b.p[i];
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0xA001 : crc >> 1;
    }
    return crc;
}

static v_t crc32(bytes_t b) {
    uint32_t crc = 0xFFFFFFFFu;
    for (long i = 0; i < b.n; i++) {
        crc ^= b.p[i];
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

static inline v_t identity_hash(bytes_t b) { return bytes_int(b, 8); }

/* v1model hash(): base + (h mod max), max 0 taken as 1 (BMv2). */
static inline v_t hash_offset(v_t h, v_t base, v_t size) { return base + h % (size ? size : 1); }

/* ------------------------------------------------------------------ tables */
static inline uint64_t key_hash(const uint64_t *k, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n; i++) {
        h ^= k[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xBF58476D1CE4E5B9ull;
    }
    return h ^ (h >> 31);
}

/* The first row whose match covers `key` (rows are in lookup order); -1 if none. */
static int32_t table_lookup(const table_t *t, const uint64_t *key) {
    int nk = t->nkeys;
    if (t->exact) {
        if (!t->hash) return -1;
        for (uint64_t i = key_hash(key, nk) & t->hmask;; i = (i + 1) & t->hmask) {
            int32_t row = t->hash[i];
            if (row < 0) return -1;
            if (!memcmp(t->a + (long)row * nk, key, sizeof(uint64_t) * nk)) return row;
        }
    }
    for (int32_t row = 0; row < t->n; row++) {
        const uint64_t *a = t->a + (long)row * nk, *b = t->b + (long)row * nk;
        const uint8_t *range = t->range + (long)row * nk;
        int k = 0;
        for (; k < nk; k++) {
            if (range[k] ? key[k] < a[k] || key[k] > b[k] : (key[k] & b[k]) != a[k]) break;
        }
        if (k == nk) return row;
    }
    return -1;
}

static inline void count_entry(ctx_t *ctx, const table_t *t, int32_t row, v_t length) {
    int32_t s = t->slot[row];
    (void)ctx;
    if (s >= 0) {
        t->counters[2 * s] += 1;
        t->counters[2 * s + 1] += (int64_t)length;
    }
}

static int vset_matches(const vset_t *vs, const uint64_t *key) {
    for (int32_t m = 0; m < vs->n; m++) {
        int k = 0;
        for (; k < vs->nkeys; k++) {
            long at = (long)m * vs->nkeys + k;
            if ((key[k] & vs->mask[at]) != vs->value[at]) break;
        }
        if (k == vs->nkeys) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ outputs */
typedef struct {
    uint8_t *p;
    long n, cap;
} outbuf_t;

/* Open an output record; the deparser appends to it (out_bytes/out_zero), out_close ends it. */
static outbuf_t out_open(ctx_t *ctx) {
    outbuf_t o = {ctx->out + ctx->out_len, 0, ctx->out_cap - ctx->out_len};
    return o;
}

static inline uint8_t *out_reserve(ctx_t *ctx, outbuf_t *o, long n) {
    if (o->n + n > o->cap) drop_packet(ctx, DROP_OUTPUT_FULL);
    uint8_t *at = o->p + o->n;
    o->n += n;
    return at;
}

static inline uint8_t *out_zero(ctx_t *ctx, outbuf_t *o, long n) {
    uint8_t *at = out_reserve(ctx, o, n);
    memset(at, 0, n);
    return at;
}

static inline void out_bytes(ctx_t *ctx, outbuf_t *o, const uint8_t *p, long n) {
    memcpy(out_reserve(ctx, o, n), p, n);
}

static void out_close(ctx_t *ctx, outbuf_t *o, int port) {
    if (ctx->n_out >= MAX_OUTPUTS) drop_packet(ctx, DROP_OUTPUT_FULL);
    ctx->out_port[ctx->n_out] = port;
    ctx->out_off[ctx->n_out] = ctx->out_len;
    ctx->out_size[ctx->n_out] = o->n;
    ctx->n_out++;
    ctx->out_len += o->n;
}

static const int32_t *mcast_find(const mcast_t *m, v_t group, int32_t *count) {
    int32_t lo = 0, hi = m->n;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (m->group[mid] < group) lo = mid + 1;
        else hi = mid;
    }
    if (lo < m->n && m->group[lo] == group) {
        *count = m->start[lo + 1] - m->start[lo];
        return m->start + lo;
    }
    *count = 0;
    return 0;
}

/* ------------------------------------------------------------------ what Python calls */
ctx_t *p4t_new(void) { return (ctx_t *)calloc(1, sizeof(ctx_t)); }
void p4t_free(ctx_t *ctx) {
    for (int i = 0; i < N_TABLES; i++) free(ctx->tables[i].hash);
    free(ctx->scratch);
    free(ctx->eg_slots);
    free(ctx);
}
long p4t_ctx_size(void) { return sizeof(ctx_t); }
int64_t *p4t_stats(ctx_t *ctx) { return ctx->stats; }
int32_t *p4t_out_port(ctx_t *ctx) { return ctx->out_port; }
int64_t *p4t_out_off(ctx_t *ctx) { return ctx->out_off; }
int64_t *p4t_out_size(ctx_t *ctx) { return ctx->out_size; }
void p4t_set_out(ctx_t *ctx, uint8_t *buf, long cap) {
    ctx->out = buf;
    ctx->out_cap = cap;
}
void p4t_set_register(ctx_t *ctx, int i, void *cells) { ctx->reg[i] = cells; }
void p4t_set_counter(ctx_t *ctx, int i, int64_t *packets, int64_t *bytes) {
    ctx->cnt_packets[i] = packets;
    ctx->cnt_bytes[i] = bytes;
}
void p4t_set_vset(ctx_t *ctx, int i, int32_t n, int32_t nkeys, const uint64_t *value, const uint64_t *mask) {
    vset_t v = {n, nkeys, value, mask};
    ctx->vsets[i] = v;
}
void p4t_set_mcast(ctx_t *ctx, int32_t n, const int64_t *group, const int32_t *start, const int32_t *port,
                   const int32_t *rid) {
    mcast_t m = {n, group, start, port, rid};
    ctx->mcast = m;
}

/* The architecture's packet entry (v1model.h or tna.h, included after this file). */
int p4t_process(ctx_t *ctx, int port, const uint8_t *data, long len);

/* n frames one after another (frame i: len[i] bytes at data + off[i], received on port[i]), in one
 * call: the pipeline alone, timed with no Python call per packet (bench_ina --batch).  Each packet's
 * outputs replace the previous packet's; returns the outputs of all n together (an abandoned packet
 * adds none: its reason is counted in stats as p4t_process counts it). */
long p4t_process_batch(ctx_t *ctx, int n, const int32_t *port, const uint8_t *data, const int64_t *off,
                       const int64_t *len) {
    long sent = 0;
    for (int i = 0; i < n; i++) {
        int r = p4t_process(ctx, port[i], data + off[i], (long)len[i]);
        if (r > 0) sent += r;
    }
    return sent;
}

/* Rows in lookup order; exact tables get a hash index over them. */
int p4t_set_table(ctx_t *ctx, int i, int32_t nkeys, int32_t n, int32_t nargs, int32_t exact, const uint8_t *range,
                  const uint64_t *a, const uint64_t *b, const int32_t *action, const int32_t *slot,
                  const uint64_t *args, int64_t *counters) {
    table_t *t = &ctx->tables[i];
    free(t->hash);
    table_t fresh = {nkeys, n, nargs, exact, range, a, b, action, slot, args, counters, 0, 0};
    if (exact) {
        uint64_t cap = 8;
        while (cap < (uint64_t)n * 2) cap <<= 1;
        fresh.hash = (int32_t *)malloc(sizeof(int32_t) * cap);
        if (!fresh.hash) return -1;
        memset(fresh.hash, 0xFF, sizeof(int32_t) * cap);
        fresh.hmask = cap - 1;
        for (int32_t row = 0; row < n; row++) {
            uint64_t h = key_hash(a + (long)row * nkeys, nkeys) & fresh.hmask;
            while (fresh.hash[h] >= 0) h = (h + 1) & fresh.hmask;
            fresh.hash[h] = row;
        }
    }
    *t = fresh;
    return 0;
}

#endif
