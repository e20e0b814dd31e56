/* core.c: worker/engine.py's protocol core in C, step for step: the same datagrams, deadlines and sums for
 * the same datagrams and times handed in (tests/test_native_core.py checks it over seeded loss, duplication
 * and reordering).  No clock, no socket: run.c drives it on sockets.  Each function names the method of
 * worker/engine.py it mirrors; the reasons for each rule are written there, once.  Floating point follows
 * numpy's order of operations (build with -ffp-contract=off), so the timers agree to the bit. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core.h"

static double dmin(double a, double b) { return b < a ? b : a; }
static double dmax(double a, double b) { return b > a ? b : a; }

static uint32_t be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static uint64_t be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static void put_be32(uint8_t *p, uint32_t v) {
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

#ifdef __SSE2__
static __m128i bswap_epi32(__m128i q) {  /* SSE2 has no byte shuffle: four shifts */
    __m128i outer = _mm_or_si128(_mm_slli_epi32(q, 24), _mm_srli_epi32(q, 24));
    __m128i inner = _mm_or_si128(_mm_and_si128(_mm_slli_epi32(q, 8), _mm_set1_epi32(0x00FF0000)),
                                 _mm_and_si128(_mm_srli_epi32(q, 8), _mm_set1_epi32(0x0000FF00)));
    return _mm_or_si128(outer, inner);
}
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define INA_AVX2 1
/* the same loops eight values at a time where the CPU has AVX2 (checked once, at run time) */
__attribute__((target("avx2"))) static void quantize_f32_avx2(uint8_t *dst, const float *src, float scale,
                                                              int64_t count, int64_t *done) {
    const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_si256((__m256i *)(dst + 4 * i),
                            _mm256_shuffle_epi8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(src + i), s)), swap));
    *done = i;
}

__attribute__((target("avx2"))) static void dequantize_f32_avx2(float *dst, const uint8_t *src, float scale,
                                                                int64_t count, int64_t *done) {
    const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,
                                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
    __m256 s = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_shuffle_epi8(
                                                    _mm256_loadu_si256((const __m256i *)(src + 4 * i)), swap)), s));
    *done = i;
}

/* max |x| over count float32 (their bits, sign cleared, compared as integers: the same order for
 * non-negative floats, and infinities and NaNs above every finite value), 32 at a time in four lanes */
__attribute__((target("avx2"))) static uint32_t peak_bits_f32_avx2(const float *x, int64_t count, int64_t *done) {
    const __m256i sign = _mm256_set1_epi32(0x7FFFFFFF);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 32 <= count; i += 32) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), sign));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), sign));
        m2 = _mm256_max_epu32(m2, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 16)), sign));
        m3 = _mm256_max_epu32(m3, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 24)), sign));
    }
    m0 = _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3));
    uint32_t lanes[8], m = 0;
    _mm256_storeu_si256((__m256i *)lanes, m0);
    for (int j = 0; j < 8; j++) m = lanes[j] > m ? lanes[j] : m;
    *done = i;
    return m;
}

static int has_avx2(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") ? 1 : 0;
    return known;
}
#endif

/* float32 values scaled and rounded (to nearest, ties to even: numpy's rint) into big-endian int32.
 * cvtps2dq rounds as MXCSR says, to nearest even unless someone changed it, and gives INT32_MIN out of
 * range, as the scalar cast does on x86. */
static void quantize_f32(uint8_t *dst, const float *src, float scale, int64_t count) {
    int64_t i = 0;
#ifdef INA_AVX2
    if (has_avx2()) quantize_f32_avx2(dst, src, scale, count, &i);
#endif
#ifdef __SSE2__
    __m128 s = _mm_set1_ps(scale);
    for (; i + 4 <= count; i += 4)
        _mm_storeu_si128((__m128i *)(dst + 4 * i), bswap_epi32(_mm_cvtps_epi32(_mm_mul_ps(_mm_loadu_ps(src + i), s))));
#endif
    for (; i < count; i++) put_be32(dst + 4 * i, (uint32_t)(int32_t)rintf(src[i] * scale));
}

/* big-endian int32 sums to float32, each cast (the one rounding) and scaled by a power of two */
static void dequantize_f32(float *dst, const uint8_t *src, float scale, int64_t count) {
    int64_t i = 0;
#ifdef INA_AVX2
    if (has_avx2()) dequantize_f32_avx2(dst, src, scale, count, &i);
#endif
#ifdef __SSE2__
    __m128 s = _mm_set1_ps(scale);
    for (; i + 4 <= count; i += 4)
        _mm_storeu_ps(dst + i, _mm_mul_ps(_mm_cvtepi32_ps(bswap_epi32(_mm_loadu_si128((const __m128i *)(src + 4 * i)))), s));
#endif
    for (; i < count; i++) dst[i] = (float)(int32_t)be32(src + 4 * i) * scale;
}

/* Python's float // (CPython's float_floor_div), which floor(a / b) does not always equal. */
static double py_floordiv(double vx, double wx) {
    double mod = fmod(vx, wx), div = (vx - mod) / wx, floordiv;
    if (mod) {
        if ((wx < 0) != (mod < 0)) div -= 1.0;
    }
    if (div) {
        floordiv = floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
        floordiv = copysign(0.0, vx / wx);
    }
    return floordiv;
}

/* --- Congestion ------------------------------------------------------------------------------- */

void ina_congestion_init(ina_congestion *c, int32_t window, int32_t initial_in_flight) {
    memset(c, 0, sizeof(*c));
    c->window = window;
    c->rtt_min = INFINITY;
    c->cwnd = (double)(window < initial_in_flight ? window : initial_in_flight);
    c->ssthresh = (double)window;
}

static double congestion_rto(const ina_congestion *c, const ina_config *cf) {  /* Congestion.rto */
    if (!c->has_srtt) return cf->initial_rto;
    double floor_ = cf->rto_floor_rtts * c->rtt_min, grow = dmax(4 * c->rttvar, c->srtt);
    return dmin(cf->rto_max, dmax(dmax(cf->rto_min, floor_), c->srtt + grow));
}

double ina_rto(const ina_tree *t) { return congestion_rto(&t->congestion, t->config); }

static void congestion_sample(ina_congestion *c, double x) {  /* Congestion.sample, one round trip */
    if (c->borrowed) {  /* our first round trip replaces a sibling's */
        c->has_srtt = 0;
        c->borrowed = 0;
    }
    if (x < c->rtt_min) c->rtt_min = x;
    if (!c->has_srtt) {
        c->srtt = x;
        c->rttvar = x / 2;
        c->has_srtt = 1;
    } else {
        c->rttvar = 0.75 * c->rttvar + 0.25 * fabs(c->srtt - x);
        c->srtt = 0.875 * c->srtt + 0.125 * x;
    }
}

static void congestion_grow(ina_congestion *c, int64_t results) {  /* Congestion.grow */
    double cwnd = c->cwnd, window = (double)c->window;
    if (cwnd >= window) return;
    if (cwnd < c->ssthresh) {
        double gap = ceil(c->ssthresh - cwnd);
        int64_t slow = (double)results < gap ? results : (int64_t)gap;
        cwnd = dmin(dmin(cwnd + (double)slow, c->ssthresh), window);
        results -= slow;
    }
    for (int64_t i = 0; i < results; i++) cwnd = dmin(window, cwnd + 1 / cwnd);
    c->cwnd = cwnd;
}

static void congestion_back_off(ina_congestion *c, const ina_config *cf, double now, ina_stats *stats) {
    int congested = c->has_srtt && c->srtt > cf->queueing * c->rtt_min;
    if (congested && now - c->last_cut > c->srtt) {
        c->cwnd = dmax(2.0, c->cwnd / 2);
        c->last_cut = now;
        c->ssthresh = c->cwnd;
        stats->window_cuts += 1;
    }
}

/* --- Pacer ------------------------------------------------------------------------------------ */

void ina_pacer_init(ina_pacer *p, double mbps, double burst) {
    memset(p, 0, sizeof(*p));
    p->mbps = mbps;
    p->rate = mbps * 1e6 / 8;
    p->burst = burst;
    p->tokens = p->burst;
}

static void pacer_refill(ina_pacer *p, double now) {
    if (p->has_updated) p->tokens = dmin(p->burst, p->tokens + (now - p->updated) * p->rate);
    p->updated = now;
    p->has_updated = 1;
}

static double pacer_ready_at(ina_pacer *p, double now) {
    pacer_refill(p, now);
    if (p->tokens >= 0) return now;
    return dmax(now + (p->burst / 2 - p->tokens) / p->rate, nextafter(now, INFINITY));
}

static int64_t pacer_allowed(ina_pacer *p, double now, int32_t frame) {
    pacer_refill(p, now);
    return p->tokens < 0 ? 0 : (int64_t)py_floordiv(p->tokens, (double)frame) + 1;
}

static void pacer_spend(ina_pacer *p, double now, int32_t frame, int64_t count) {
    pacer_refill(p, now);
    p->tokens -= (double)(count * frame);
}

/* --- Outbox ----------------------------------------------------------------------------------- */

static int64_t offer(ina_outbox *o, ina_tree *t, const uint8_t *rows, int64_t count) {  /* Outbox.offer */
    int64_t k = (double)count < o->room ? count : (int64_t)o->room;
    if (k < 0) k = 0;
    if (k && o->n_segments == o->cap_segments) k = 0;  /* no segment left: as no room */
    if (k) {
        o->segments[o->n_segments++] = (ina_segment){t, rows, k};
        o->room -= (double)k;
    }
    if (k < count) o->full = 1;
    return k;
}

/* Room for ``count`` rows to be copied into the outbox (NULL if it has none). */
static uint8_t *scratch_rows(ina_outbox *o, const ina_config *cf, int64_t count) {
    if (o->scratch_used + count > o->scratch_cap) return NULL;
    uint8_t *p = o->scratch + o->scratch_used * cf->packet_bytes;
    o->scratch_used += count;
    return p;
}

static void or_bits(uint8_t *row, const uint8_t *bits, int32_t h) {
    for (int32_t i = 0; i < h; i++) row[i] |= bits[i];
}

/* --- TreeCall: quantization -------------------------------------------------------------------- */

static int64_t shift_of(const ina_call *c, int8_t e) { return (int64_t)c->tree->config->shift_base - e; }

static void agree(ina_call *c, int64_t chunk, int8_t e) {  /* TreeCall._agree, one chunk */
    const ina_config *cf = c->tree->config;
    c->agreed[chunk] = e;
    int64_t s = e == cf->exponent_none ? 0 : shift_of(c, e);
    if (c->dtype == INA_F32 && (s > 126 || s < -126)) c->wide = 1;
    int si = s > 100000 ? 100000 : s < -100000 ? -100000 : (int)s;
    if (c->dtype == INA_F32) {
        ((float *)c->qscale)[chunk] = (float)ldexp(1.0, si);
        ((float *)c->dscale)[chunk] = (float)ldexp(1.0, -si);
    } else if (c->dtype == INA_F64) {
        ((double *)c->qscale)[chunk] = ldexp(1.0, si);
        ((double *)c->dscale)[chunk] = ldexp(1.0, -si);
    }
}

/* --- engine.lay_out ------------------------------------------------------------------------------ */

static void set_field(unsigned __int128 *w, const int32_t *field, int32_t bits, int64_t v) {
    unsigned __int128 mask = (((unsigned __int128)1) << field[1]) - 1;
    *w |= (((unsigned __int128)(uint64_t)v) & mask) << (field[0] + 128 - bits);
}

/* Packet q's header in the first header_bytes of ``wire``: the template (the fixed fields) with the packet's
 * slot, set, seq and exponent (each field as (shift, width) in the header read as one big-endian integer:
 * Protocol.layout's). */
static void header_of(const ina_call *c, int64_t q, uint8_t *wire) {
    const ina_config *cf = c->tree->config;
    int32_t H = cf->header_bytes, bits = 8 * H;
    int64_t W = cf->window, g = c->base + q, round = g / W;
    const uint8_t *t = c->header_template;
    unsigned __int128 w = ((unsigned __int128)be64(t) << 64) | be64(t + 8);
    set_field(&w, c->header_fields + 0, bits, g - round * W);
    set_field(&w, c->header_fields + 2, bits, round % 2);
    set_field(&w, c->header_fields + 4, bits, (g + 1) & 0xFFFFFFFF);
    /* the exponent field: chunk q's own, or with a hint chunk (q + span) mod n's (engine.lay_out) */
    set_field(&w, c->header_fields + 6, bits, q < c->n ? c->exponents[(q + c->span) % c->n] : cf->exponent_none);
    uint64_t hi = __builtin_bswap64((uint64_t)(w >> 64)), lo = __builtin_bswap64((uint64_t)w);
    memcpy(wire, &hi, 8);
    memcpy(wire + 8, &lo, 8);
}

/* Packet q's row: a call's packets live in a ring of ``rows`` (at least 2 W: a recovery sends again from W
 * before the oldest packet without a result, and no packet is filled W or more after it), so the rows a
 * window touches stay in cache instead of a call's worth of fresh memory. */
static uint8_t *row_of(const ina_call *c, int64_t q) {
    return c->packets + (q % c->rows) * c->tree->config->packet_bytes;
}

/* Each packet's result header, masked (engine.lay_out's ``expected``); the packets themselves are laid out
 * as they are filled (``fill``: each row is written once, just before it goes). */
void ina_lay_out(ina_call *c) {
    const ina_config *cf = c->tree->config;
    int32_t H = cf->header_bytes;
    for (int64_t q = 0; q < c->capacity; q++) {
        uint8_t wire[16], *want = c->expected + q * H;
        header_of(c, q, wire);
        for (int32_t b = 0; b < H; b++) want[b] = (uint8_t)((wire[b] ^ cf->data_to_result[b]) & cf->result_mask[b]);
    }
}

/* Chunk ch's values in ``base`` (the call's chunks or out), or in ``last`` for the final chunk if given. */
static void *chunk_at(const ina_call *c, const void *base, int64_t ch) {
    if (ch == c->n - 1 && c->last) return c->last;
    return (uint8_t *)base + ch * c->tree->config->values * (c->dtype == INA_F64 ? 8 : 4);
}

/* The chunk packet q carries: q - lead, or with a hint q (q < n) and then the redos. */
static int64_t chunk_of(const ina_call *c, int64_t q) {
    if (!c->hint) return q - c->lead;
    return q < c->n ? q : c->redo[q - c->n];
}

/* TreeCall._fill, and engine.lay_out's rows: packets filled .. end-1 with their headers and values (quantized
 * at their chunks' agreed or hinted exponents; zeros in exponent-only packets and in a hinted chunk above its
 * hint, which is sure to be redone; int32 byte-swapped). */
static void fill(ina_call *c, int64_t end) {
    const ina_config *cf = c->tree->config;
    int64_t start = c->filled, V = cf->values;
    if (end <= start) return;
    for (int64_t q = start; q < end; q++) {
        int64_t ch = chunk_of(c, q);
        uint8_t *row = row_of(c, q), *dst = row + cf->header_bytes;
        header_of(c, q, row);  /* 16 bytes: the values written next cover any beyond the header */
        if (ch < 0 || (c->hint && q < c->span && c->exponents[q] > c->hint[q])) {
            memset(dst, 0, (size_t)(4 * V));
            continue;
        }
        const void *src = chunk_at(c, c->chunks, ch);
        if (c->exact) {
            const int32_t *x = (const int32_t *)src;
            for (int64_t i = 0; i < V; i++) put_be32(dst + 4 * i, (uint32_t)x[i]);
        } else if (c->wide) {  /* quantize.quantize_rows: every route gives these integers (exact power-of-two scaling) */
            int64_t s = shift_of(c, c->agreed[ch]);
            int si = s > 100000 ? 100000 : s < -100000 ? -100000 : (int)s;
            double scale = ldexp(1.0, si);
            for (int64_t i = 0; i < V; i++) {
                double x = c->dtype == INA_F32 ? (double)((const float *)src)[i] : ((const double *)src)[i];
                put_be32(dst + 4 * i, (uint32_t)(int32_t)rint(x * scale));
            }
        } else if (c->dtype == INA_F32) {
            quantize_f32(dst, (const float *)src, ((const float *)c->qscale)[ch], V);
        } else {
            const double *x = (const double *)src;
            double scale = ((const double *)c->qscale)[ch];
            for (int64_t i = 0; i < V; i++) put_be32(dst + 4 * i, (uint32_t)(int32_t)rint(x[i] * scale));
        }
    }
    c->filled = end;
}

static void dequantize(ina_call *c, int64_t chunk, const uint8_t *values) {  /* TreeCall._dequantize, one chunk */
    const ina_config *cf = c->tree->config;
    int64_t V = cf->values;
    void *out = chunk_at(c, c->out, chunk);
    if (c->exact) {
        int32_t *dst = (int32_t *)out;
        for (int64_t i = 0; i < V; i++) dst[i] = (int32_t)be32(values + 4 * i);
    } else if (c->wide) {  /* quantize.dequantize_into: float32 when the result is normal, else through float64 */
        int64_t s = shift_of(c, c->agreed[chunk]);
        int si = s > 100000 ? 100000 : s < -100000 ? -100000 : (int)s;
        if (c->dtype == INA_F32 && s <= 126) {
            dequantize_f32((float *)out, values, (float)ldexp(1.0, -si), V);
        } else if (c->dtype == INA_F32) {
            float *dst = (float *)out;
            for (int64_t i = 0; i < V; i++) dst[i] = (float)ldexp((double)(int32_t)be32(values + 4 * i), -si);
        } else {
            double *dst = (double *)out;
            for (int64_t i = 0; i < V; i++) dst[i] = ldexp((double)(int32_t)be32(values + 4 * i), -si);
        }
    } else if (c->dtype == INA_F32) {
        dequantize_f32((float *)out, values, ((const float *)c->dscale)[chunk], V);
    } else {
        double scale = ((const double *)c->dscale)[chunk], *dst = (double *)out;
        for (int64_t i = 0; i < V; i++) dst[i] = (double)(int32_t)be32(values + 4 * i) * scale;
    }
}

/* --- TreeCall: sending ------------------------------------------------------------------------- */

void ina_call_start(ina_call *c) {  /* TreeCall.__init__'s scalars (the arrays are laid out by the caller) */
    c->filled = 0;
    c->retried = c->paced = c->held = c->closed = 0;
    c->next_q = c->finished = c->oldest = 0;
    c->n_overflowed = 0;
    c->rack_sent = -INFINITY;
    c->rack_q = -1;
    c->rack_rtt = 0.0;
    c->rack_timer = INFINITY;
    c->rack_stale = 0;
    c->once_sent = -INFINITY;
    c->once_q = -1;
    c->once_rtt = 0.0;
    c->finished_at_timeout = -1;
    c->silent_timeouts = 0;
    c->probe_until = -INFINITY;
    c->has_progress = 0;
    c->last_progress = 0.0;
    c->wide = 0;
    c->redos = 0;
    c->scanned = 0;
    if (!c->hint) c->span = 0;
    if (c->hint)
        for (int64_t ch = 0; ch < c->n; ch++) agree(c, ch, c->hint[ch]);
}

int32_t ina_complete(const ina_call *c) { return c->finished >= c->total && c->scanned >= c->span; }

static int64_t sendable(ina_call *c, double now) {  /* TreeCall._sendable */
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    int64_t hi = c->total, in_flight = c->finished + (int64_t)ceil(t->congestion.cwnd);
    int64_t slots = c->oldest + (c->lead ? c->lead : cf->window);
    if (in_flight < hi) hi = in_flight;
    if (slots < hi) hi = slots;
    int64_t k = hi - c->next_q;
    if (k > 0 && t->pacer) {
        int64_t allowed = pacer_allowed(t->pacer, now, cf->packet_bytes + cf->frame_overhead);
        if (allowed < k) k = allowed;
        if (k == 0) c->paced = 1;
    }
    return k;
}

/* TreeCall.note_sent for packets qs[0..count) (or, with qs NULL, first .. first + count). */
static void note_sent(ina_call *c, const int64_t *qs, int64_t first, int64_t count, double now, int retransmit) {
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    if (t->pacer) pacer_spend(t->pacer, now, cf->packet_bytes + cf->frame_overhead, count);
    t->stats.packets_sent += count;
    t->stats.bytes_sent += count * cf->packet_bytes;
    for (int64_t i = 0; i < count; i++) c->sent_at[qs ? qs[i] : first + i] = now;
    if (retransmit) {
        t->stats.retransmissions += count;
        c->retried = 1;
        for (int64_t i = 0; i < count; i++) c->retries[qs ? qs[i] : first + i] += 1;
    }
}

static void send_new(ina_call *c, double now, ina_outbox *o, double budget) {  /* TreeCall._send_new */
    const ina_config *cf = c->tree->config;
    int64_t sent_here = 0, k;
    while ((k = sendable(c, now)) > 0) {
        if ((double)sent_here >= budget) {
            c->held = 1;
            return;
        }
        if ((double)k > budget - (double)sent_here) k = (int64_t)(budget - (double)sent_here);
        int64_t q0 = c->next_q, before_end = c->rows - q0 % c->rows;
        fill(c, q0 + k);
        int64_t sent = offer(o, c->tree, row_of(c, q0), k < before_end ? k : before_end);
        if (sent == before_end && k > before_end) sent += offer(o, c->tree, row_of(c, q0 + sent), k - sent);
        sent_here += sent;
        if (sent) {
            note_sent(c, NULL, q0, sent, now, 0);
            c->next_q += sent;
        }
        if (sent < k) break;
    }
}

/* TreeCall._resend: these packets again, marked as copies, as many as the pacer (and the outbox) allow. */
static int64_t resend(ina_call *c, const int64_t *qs, int64_t count, double now, ina_outbox *o) {
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    if (t->pacer) {
        int64_t allowed = pacer_allowed(t->pacer, now, cf->packet_bytes + cf->frame_overhead);
        if (allowed < count) {
            c->paced = 1;
            count = allowed;
        }
    }
    if (count == 0) return 0;
    uint8_t *batch = scratch_rows(o, cf, count);
    int64_t sent = 0;
    if (batch) {
        for (int64_t i = 0; i < count; i++) {
            memcpy(batch + i * cf->packet_bytes, row_of(c, qs[i]), cf->packet_bytes);
            or_bits(batch + i * cf->packet_bytes, cf->retransmit_bits, cf->header_bytes);
        }
        sent = offer(o, t, batch, count);
    } else {
        o->full = 1;
    }
    note_sent(c, qs, 0, sent, now, 1);
    return sent;
}

/* --- TreeCall: results ------------------------------------------------------------------------- */

static void advance_oldest(ina_call *c, int64_t o) {
    if (o < c->next_q && c->done[o]) {
        while (o < c->next_q && c->done[o]) o++;
    }
    c->oldest = o;
}

/* TreeCall._rack_advance: the reference (*sent, *q, *rtt) moves to packet q if it went later, or at once and
 * later in the call. */
static void rack_advance(double *ref_sent, int64_t *ref_q, double *ref_rtt, double sent, int64_t q, double now) {
    if (sent > *ref_sent || (sent == *ref_sent && q > *ref_q)) {
        *ref_sent = sent;
        *ref_q = q;
        *ref_rtt = now - sent;
    }
}

/* TreeCall._taken for packets qs[0..count) (or, with qs NULL, the run first .. first + count). */
static void taken(ina_call *c, const int64_t *qs, int64_t first, int64_t count, int64_t last, double now) {
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    ina_congestion *cg = &t->congestion;
#define Q(i) (qs ? qs[i] : first + (i))
    for (int64_t i = 0; i < count; i++) c->done[Q(i)] = 1;
    c->finished += count;
    t->stats.results += count;
    congestion_grow(cg, count);
    double latest;
    int64_t q;
    if (c->retried) {
        int any_first = 0;
        double once = -INFINITY;
        int64_t once_q = -1;
        for (int64_t i = 0; i < count; i++) {
            if (c->retries[Q(i)] != 0) continue;
            any_first = 1;
            double sent = c->sent_at[Q(i)];
            if (sent > once || (sent == once && Q(i) > once_q)) {
                once = sent;
                once_q = Q(i);
            }
        }
        if (any_first) rack_advance(&c->once_sent, &c->once_q, &c->once_rtt, once, once_q, now);
        int all = !cg->has_srtt && !any_first;
        if (all || any_first) {
            for (int64_t i = 0; i < count; i++)
                if (all || c->retries[Q(i)] == 0) congestion_sample(cg, now - c->sent_at[Q(i)]);
            cg->unsampled = 0;
        } else {  /* Congestion.copies_answered: after a window of results without a sample, lower bounds */
            cg->unsampled += count;
            if (cg->unsampled >= cg->window) {
                double srtt = cg->srtt;
                for (int64_t i = 0; i < count; i++)
                    if (now - c->sent_at[Q(i)] > srtt) congestion_sample(cg, now - c->sent_at[Q(i)]);
            }
        }
        double queued = c->next_q < c->total ? cf->ambiguous * (cg->has_srtt ? cg->srtt : 0.0) : 0.0;
        double ambiguous = dmax(cg->rtt_min, queued);
        latest = -INFINITY;
        q = -1;
        for (int64_t i = 0; i < count; i++) {
            double sent = c->sent_at[Q(i)];
            int plain = all || c->retries[Q(i)] == 0 || now - sent >= ambiguous;
            if (!plain) continue;
            if (sent > latest) {
                latest = sent;
                q = Q(i);
            } else if (sent == latest && Q(i) > q) {
                q = Q(i);
            }
        }
        if (c->next_q >= c->total) rack_advance(&c->once_sent, &c->once_q, &c->once_rtt, latest, q, now);  /* the tail */
    } else {
        for (int64_t i = 0; i < count; i++) congestion_sample(cg, now - c->sent_at[Q(i)]);
        cg->unsampled = 0;
        latest = c->sent_at[last];
        q = last;
        rack_advance(&c->once_sent, &c->once_q, &c->once_rtt, latest, q, now);
    }
    rack_advance(&c->rack_sent, &c->rack_q, &c->rack_rtt, latest, q, now);
    c->rack_stale = 1;
    c->silent_timeouts = 0;
    int64_t o = c->oldest;
    if (!qs && first <= o && o < first + count) o = first + count;
    advance_oldest(c, o);
#undef Q
}

static int exponents_carried(const ina_call *c) { return !c->exact; }

/* TreeCall._scan: the redos found, in chunk order, among the first window's chunks all of whose packets (the
 * chunk's, and packet n - span + j with its agreed exponent) have their results; the others' held sums taken. */
static void scan(ina_call *c) {
    int64_t upto = c->oldest - (c->n - c->span);
    if (upto > c->span) upto = c->span;
    for (; c->scanned < upto; c->scanned++) {
        uint8_t w = c->wrong[c->scanned];
        if (w & 1) {
            c->redo[c->redos++] = c->scanned;
            continue;
        }
        if (w & 2) c->overflowed[c->n_overflowed++] = c->scanned;
        dequantize(c, c->scanned, c->hinted_sums + c->scanned * 4 * c->tree->config->values);
    }
    c->total = c->n + c->redos;
}

/* TreeCall._hinted_results: results of packets qs[0..count) (or, with qs NULL, first ..), in rows[idx[i]] (or
 * rows[i]): each brings the agreed exponent of chunk (q + span) mod n (a first-window chunk's checks its hint);
 * a first-window chunk's sum and OVERFLOW are held until its hint is known (scan). */
static void hinted_results(ina_call *c, const int64_t *qs, int64_t first, const int64_t *idx, int64_t count,
                           const uint8_t *rows, int64_t stride) {
    const ina_config *cf = c->tree->config;
#define Q(i) (qs ? qs[i] : first + (i))
#define ROW(i) (rows + (idx ? idx[i] : (i)) * stride)
    for (int64_t i = 0; i < count; i++) {
        int64_t q = Q(i);
        if (q >= c->n) continue;
        int64_t t = (q + c->span) % c->n;
        int8_t e = (int8_t)ROW(i)[cf->exponent_at];
        agree(c, t, e);
        if (t < c->span && e != c->hint[t] && e != cf->exponent_none) c->wrong[t] |= 1;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t q = Q(i), ch = q < c->n ? q : c->redo[q - c->n];
        if (!(ROW(i)[cf->flags_at] & cf->flag_overflow)) continue;
        if (q < c->span) c->wrong[q] |= 2;
        else c->overflowed[c->n_overflowed++] = ch;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t q = Q(i), ch = q < c->n ? q : c->redo[q - c->n];
        if (q < c->span) memcpy(c->hinted_sums + q * 4 * cf->values, ROW(i) + cf->header_bytes, (size_t)(4 * cf->values));
        else dequantize(c, ch, ROW(i) + cf->header_bytes);
    }
#undef Q
#undef ROW
    scan(c);
}

/* TreeCall._accept_run: the batch is the results of a run of packets in flight, in order. */
static int accept_run(ina_call *c, const uint8_t *rows, int64_t stride, const int64_t *lengths, int64_t k,
                      double now) {
    const ina_config *cf = c->tree->config;
    int32_t H = cf->header_bytes;
    int64_t first = (int64_t)((be32(rows + cf->seq_at) - 1 - (uint64_t)c->base) & 0xFFFFFFFFu);
    int64_t end = first + k;
    if (end > c->next_q) return 0;
    for (int64_t i = 0; i < k; i++)
        if (lengths[i] < cf->packet_bytes) return 0;
    for (int64_t i = 0; i < k; i++) {
        const uint8_t *row = rows + i * stride, *want = c->expected + (first + i) * H;
        for (int32_t b = 0; b < H; b++)
            if ((row[b] & cf->result_mask[b]) != want[b]) return 0;
        if (c->done[first + i]) return 0;
    }
    taken(c, NULL, first, k, end - 1, now);
    if (c->hint) {
        hinted_results(c, NULL, first, NULL, k, rows, stride);
        return 1;
    }
    if (first < c->n && exponents_carried(c)) {
        int64_t upto = end < c->n ? end : c->n;
        for (int64_t q = first; q < upto; q++) agree(c, q, (int8_t)rows[(q - first) * stride + cf->exponent_at]);
    }
    int64_t skip = c->lead - first;
    if (skip < 0) skip = 0;
    if (skip > k) skip = k;
    for (int64_t i = skip; i < k; i++) dequantize(c, first + i - c->lead, rows + i * stride + H);
    return 1;
}

void ina_receive(ina_call *c, const uint8_t *rows, int64_t stride, const int64_t *lengths, int64_t k, double now) {
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    int64_t before = c->finished;
    if (k > 0 && !accept_run(c, rows, stride, lengths, k, now)) {  /* TreeCall._accept */
        int32_t H = cf->header_bytes;
        int64_t qi[k], idx[k], n_ok = 0;
        for (int64_t i = 0; i < k; i++) {
            const uint8_t *row = rows + i * stride;
            int64_t q = (int64_t)((be32(row + cf->seq_at) - 1 - (uint64_t)c->base) & 0xFFFFFFFFu);
            int ok = lengths[i] >= cf->packet_bytes && q < c->next_q;
            if (!ok) continue;
            const uint8_t *want = c->expected + q * H;
            for (int32_t b = 0; b < H && ok; b++)
                if (((row[b] ^ want[b]) & cf->match_mask[b]) != 0) ok = 0;
            if (!ok || c->done[q]) continue;
            c->latest[q] = i;
            idx[n_ok] = i;
            qi[n_ok++] = q;
        }
        int64_t kept = 0, max_q = -1;
        for (int64_t j = 0; j < n_ok; j++) {  /* a duplicate within the batch counts once: its last copy */
            if (c->latest[qi[j]] != idx[j]) continue;
            idx[kept] = idx[j];
            qi[kept++] = qi[j];
            if (qi[j] > max_q) max_q = qi[j];
        }
        t->stats.ignored += k - kept;
        if (kept) {
            for (int64_t j = 0; j < kept && !c->hint; j++) {
                int64_t ch = qi[j] - c->lead;
                if ((rows[idx[j] * stride + cf->flags_at] & cf->flag_overflow) && ch >= 0)
                    c->overflowed[c->n_overflowed++] = ch;
            }
            taken(c, qi, 0, kept, max_q, now);
            if (c->hint) {
                hinted_results(c, qi, 0, idx, kept, rows, stride);
            } else {
                if (exponents_carried(c))
                    for (int64_t j = 0; j < kept; j++)
                        if (qi[j] < c->n) agree(c, qi[j], (int8_t)rows[idx[j] * stride + cf->exponent_at]);
                for (int64_t j = 0; j < kept; j++)
                    if (qi[j] >= c->lead) dequantize(c, qi[j] - c->lead, rows + idx[j] * stride + H);
            }
        }
    }
    if (c->finished > before) {
        c->last_progress = now;
        c->has_progress = 1;
    }
    if (ina_complete(c) && !c->closed) {  /* complete: the tree keeps the last window (Tree.keep) */
        c->closed = 1;
        t->next_packet = c->base + c->total;
        int64_t W = cf->window, first = c->total - W > 0 ? c->total - W : 0;
        for (int64_t q = first; q < c->total; q++)
            memcpy(t->kept + ((c->base + q) % W) * cf->packet_bytes, row_of(c, q), cf->packet_bytes);
    }
}

/* --- TreeCall: timers -------------------------------------------------------------------------- */

static double restarted(const ina_call *c) { return c->has_progress ? c->last_progress : -INFINITY; }

static double call_rto(const ina_call *c) {  /* TreeCall._rto */
    int32_t s = c->silent_timeouts < 20 ? c->silent_timeouts : 20;
    return dmin(c->tree->config->rto_max, congestion_rto(&c->tree->congestion, c->tree->config) * ldexp(1.0, s));
}

static double expiry(const ina_call *c, int64_t q, double wait) {  /* TreeCall._expiries, one packet */
    return c->done[q] ? INFINITY : dmax(c->sent_at[q], restarted(c)) + wait;
}

static double timer(const ina_call *c) {  /* TreeCall._timer */
    if (c->oldest >= c->next_q) return INFINITY;
    if (!c->retried) return dmax(c->sent_at[c->oldest], restarted(c)) + call_rto(c);
    double wait = call_rto(c), first = INFINITY;
    for (int64_t q = c->oldest; q < c->next_q; q++) first = dmin(first, expiry(c, q, wait));
    return c->finished == c->finished_at_timeout ? dmax(first, c->probe_until) : first;
}

static void resend_expired(ina_call *c, double now, ina_outbox *o) {  /* TreeCall._resend_expired */
    ina_tree *t = c->tree;
    double wait = call_rto(c);
    int64_t span = c->next_q - c->oldest, count = 0;
    int64_t due[span > 0 ? span : 1];
    for (int64_t q = c->oldest; q < c->next_q; q++)
        if (expiry(c, q, wait) <= now) due[count++] = q;
    if (!count) return;
    congestion_back_off(&t->congestion, t->config, now, &t->stats);
    int probing = c->finished == c->finished_at_timeout;
    c->finished_at_timeout = c->finished;
    c->silent_timeouts += 1;
    resend(c, due, probing ? 1 : count, now, o);
    if (probing) c->probe_until = expiry(c, due[0], call_rto(c));
}

/* Packet q went before its reference: the latest packet sent once with its result for a packet sent once (a
 * copy's result, which waited for one laggard's copy only, must not judge first sends), the latest of any
 * for a copy (TreeCall._resend_lost). */
static int rack_behind(const ina_call *c, int64_t q) {
    double s = c->sent_at[q];
    if (c->retries[q] == 0) return s < c->once_sent || (s == c->once_sent && q < c->once_q);
    return s < c->rack_sent || (s == c->rack_sent && q < c->rack_q);
}

static void resend_lost(ina_call *c, double now, ina_outbox *o) {  /* TreeCall._resend_lost (RACK, DupThresh) */
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    if (!c->rack_stale && now < c->rack_timer) return;
    c->rack_stale = 0;
    c->rack_timer = INFINITY;
    int64_t lo = c->oldest, hi = c->next_q, span = hi - lo;
    if (span <= 0) return;
    /* results still coming: a copy is judged by its own clock too, and in the tail a packet sent once (probes) */
    int any = 0, flowing = !c->silent_timeouts, tail = flowing && c->next_q >= c->total && t->congestion.has_srtt;
    for (int64_t q = lo; q < hi; q++) {
        if (!c->done[q] && (rack_behind(c, q) || (c->retries[q] ? flowing : tail))) {
            any = 1;
            break;
        }
    }
    if (!any) return;
    double rtt_min = t->congestion.rtt_min, first_due = INFINITY;
    int64_t lost[span], n_lost = 0, later = 0;
    double due[span];
    uint8_t behind[span];
    for (int64_t q = hi - 1; q >= lo; q--) {  /* later: packets after q with their results */
        double s = c->sent_at[q];
        int64_t i = q - lo;
        int once = c->retries[q] == 0, by_reference = !c->done[q] && rack_behind(c, q);
        int probe = !c->done[q] && !by_reference && (once ? tail : flowing);
        double wait = (once ? c->once_rtt : c->rack_rtt) + rtt_min / 4;  /* as engine.py rounds it */
        if (probe && once)  /* a packet sent once: RACK-TLP's probe timeout, twice srtt, capped by the timer */
            wait = dmin(2 * t->congestion.srtt, congestion_rto(&t->congestion, cf));
        else if (probe) wait = ldexp(wait, (int)(c->retries[q] - 1));  /* each later copy of it: twice */
        behind[i] = by_reference || probe;
        due[i] = s + wait;
        if (behind[i] && later >= cf->dup_thresh && once) due[i] = dmin(due[i], s + rtt_min);
        later += c->done[q];
    }
    for (int64_t i = 0; i < span; i++) {
        if (!behind[i]) continue;
        if (due[i] <= now) lost[n_lost++] = lo + i;
    }
    int64_t went = 0;
    if (n_lost) {
        went = resend(c, lost, n_lost, now, o);
        t->stats.early_retransmissions += went;
        c->rack_stale = went < n_lost;
    }
    for (int64_t i = 0; i < span; i++)
        if (behind[i] && !(due[i] <= now)) first_due = dmin(first_due, due[i]);
    if (first_due < INFINITY) c->rack_timer = first_due;
    if (flowing && went) {  /* the copies just sent are probed in their turn */
        int64_t copies = c->retries[lost[0]];
        for (int64_t i = 1; i < went; i++) copies = copies < c->retries[lost[i]] ? copies : c->retries[lost[i]];
        c->rack_timer = dmin(c->rack_timer, now + ldexp(c->rack_rtt + rtt_min / 4, (int)(copies - 1)));
    }
}

/* TreeCall.pump: what the window, the pacer and the timers let go; returns the next deadline, or NAN when
 * the call's timeout ran out. */
static double pump(ina_call *c, double now, ina_outbox *o, double budget) {
    ina_tree *t = c->tree;
    const ina_config *cf = t->config;
    if (!c->has_progress) {
        c->has_progress = 1;
        c->last_progress = now;
    } else if (now - c->last_progress >= cf->timeout) {
        return NAN;
    }
    c->paced = c->held = 0;
    send_new(c, now, o, budget);
    double tm = timer(c);
    if (now >= tm) {
        resend_expired(c, now, o);
        tm = timer(c);
    }
    resend_lost(c, now, o);
    double wake = dmin(dmin(now + cf->look_again, c->last_progress + cf->timeout), c->rack_timer);
    if (c->paced && t->pacer) return dmin(wake, pacer_ready_at(t->pacer, now));
    return dmin(wake, tm);
}

int32_t ina_stalled(const ina_call *c, double now, double after) {  /* TreeCall.stalled */
    return c->oldest < c->next_q && !ina_complete(c) && c->has_progress && now - c->last_progress >= after;
}

/* --- Tree: recovery ---------------------------------------------------------------------------- */

static int call_running(const ina_call *c) { return c && !ina_complete(c); }

static int64_t oldest_g(const ina_tree *t, const ina_call *c) {  /* Tree._oldest */
    return call_running(c) ? c->base + c->oldest : t->next_packet;
}

static int64_t base_g(const ina_tree *t, const ina_call *c) { return call_running(c) ? c->base : t->next_packet; }

/* Tree._send_again: packets g in [lo, hi) marked as a recovery's; 0 when the outbox took only some. */
static int send_again(ina_tree *t, ina_call *c, int64_t lo, int64_t hi, double now, ina_outbox *o, int results_only) {
    const ina_config *cf = t->config;
    int64_t W = cf->window, base = base_g(t, c), PB = cf->packet_bytes;
    int64_t k0 = lo > base - W ? lo : base - W, k1 = hi < base ? hi : base, n_kept = k1 > k0 ? k1 - k0 : 0;
    int64_t n_call = 0, q0 = 0, q1 = 0;
    int has_call = call_running(c) && hi > base;
    if (has_call) {
        q0 = lo - base > 0 ? lo - base : 0;
        q1 = hi - base < c->next_q ? hi - base : c->next_q;
        for (int64_t q = q0; q < q1; q++) n_call += !results_only || c->done[q];
    }
    if (!n_kept && !has_call) return 1;
    int64_t total = n_kept + n_call;
    if (!total) return 1;
    uint8_t *batch = scratch_rows(o, cf, total);
    if (!batch) {
        o->full = 1;
        return 0;
    }
    int64_t qs[n_call > 0 ? n_call : 1], r = 0, j = 0;
    for (int64_t g = k0; g < k1; g++, r++) memcpy(batch + r * PB, t->kept + (g % W) * PB, PB);
    for (int64_t q = q0; q < q1 && has_call; q++) {
        if (results_only && !c->done[q]) continue;
        memcpy(batch + r * PB, row_of(c, q), PB);
        qs[j++] = q;
        r++;
    }
    for (int64_t i = 0; i < total; i++) or_bits(batch + i * PB, cf->recover_bits, cf->header_bytes);
    int64_t sent = offer(o, t, batch, total);
    int64_t kept_sent = sent < n_kept ? sent : n_kept;
    if (sent > kept_sent) note_sent(c, qs, 0, sent - kept_sent, now, 1);
    t->stats.retransmissions += kept_sent;
    t->stats.packets_sent += kept_sent;
    t->stats.bytes_sent += kept_sent * PB;
    return sent == total;
}

static void recover(ina_tree *t, ina_call *c, double now, ina_outbox *o) {  /* Tree.recover */
    const ina_config *cf = t->config;
    int64_t oldest = oldest_g(t, c), lo = oldest - cf->window;
    int64_t end = call_running(c) ? c->base + c->next_q : t->next_packet;
    if (c) {  /* TreeCall.excuse */
        c->last_progress = now;
        c->has_progress = 1;
    }
    if (!send_again(t, c, lo > 0 ? lo : 0, end, now, o, 0)) return;
    double gap = congestion_rto(&t->congestion, cf);
    t->has_echo = 1;
    t->echo_end = end;
    t->echo_at = now + gap;
    t->echo_gap = gap;
    t->echo_stop = now + cf->timeout;
    t->stats.recoveries += 1;
    t->recovered = t->incarnation;
}

static void send_echo(ina_tree *t, ina_call *c, double now, ina_outbox *o) {  /* Tree.send_echo */
    const ina_config *cf = t->config;
    if (!t->has_echo || now < t->echo_at) return;
    int64_t oldest = oldest_g(t, c);
    if (oldest - cf->window >= t->echo_end || now >= t->echo_stop) {
        t->has_echo = 0;
        return;
    }
    int64_t lo = oldest - cf->window;
    send_again(t, c, lo > 0 ? lo : 0, t->echo_end, now, o, 1);
    t->echo_gap = dmin(cf->rto_max, 2 * t->echo_gap);
    t->echo_at = now + t->echo_gap;
}

static void tend(ina_tree *t, ina_call *c, double now, ina_outbox *o) {  /* Tree.tend */
    if (t->incarnation != t->recovered) recover(t, c, now, o);
    send_echo(t, c, now, o);
}

/* --- step -------------------------------------------------------------------------------------- */

int32_t ina_step(ina_call **calls, int32_t ncalls, ina_tree **idle, int32_t nidle, double now, ina_outbox *o) {
    o->wake = INFINITY;
    o->full = 0;
    o->n_segments = 0;
    o->scratch_used = 0;
    for (int32_t i = 0; i < ncalls; i++) tend(calls[i]->tree, calls[i], now, o);
    for (int32_t i = 0; i < nidle; i++) tend(idle[i], NULL, now, o);
    ina_call *running[ncalls > 0 ? ncalls : 1];
    double wakes[ncalls > 0 ? ncalls : 1];
    int32_t nr = 0;
    for (int32_t i = 0; i < ncalls; i++)
        if (!ina_complete(calls[i])) running[nr++] = calls[i];
    const ina_congestion *known = NULL;  /* _share_round_trip */
    for (int32_t i = 0; i < nr && !known; i++)
        if (running[i]->tree->congestion.has_srtt && !running[i]->tree->congestion.borrowed)
            known = &running[i]->tree->congestion;
    if (known)
        for (int32_t i = 0; i < nr; i++) {
            ina_congestion *cg = &running[i]->tree->congestion;
            if (!cg->has_srtt || cg->borrowed) {  /* Congestion.adopt, at every step until our own round trip */
                cg->srtt = known->srtt;
                cg->rttvar = known->rttvar;
                cg->rtt_min = known->rtt_min;
                cg->has_srtt = 1;
                cg->borrowed = 1;
            }
        }
    double budget = nr > 1 ? (double)running[0]->tree->config->turn : INFINITY;
    int32_t failed = -1;
    for (int32_t i = 0; i < nr && failed < 0; i++) {
        wakes[i] = pump(running[i], now, o, budget);
        if (isnan(wakes[i])) failed = i;
    }
    for (int more = 1; more && failed < 0;) {
        more = 0;
        for (int32_t i = 0; i < nr; i++) more |= running[i]->held;
        if (!more) break;
        for (int32_t i = 0; i < nr && failed < 0; i++)
            if (running[i]->held) {
                wakes[i] = pump(running[i], now, o, budget);
                if (isnan(wakes[i])) failed = i;
            }
    }
    if (failed >= 0) {
        for (int32_t i = 0; i < ncalls; i++) calls[i]->tree->broken = 1;
        for (int32_t i = 0; i < ncalls; i++)
            if (calls[i] == running[failed]) return i;
        return 0;
    }
    for (int32_t i = 0; i < nr; i++) o->wake = dmin(o->wake, wakes[i]);
    for (int32_t i = 0; i < nidle; i++)
        if (idle[i]->has_echo) o->wake = dmin(o->wake, idle[i]->echo_at);
    return -1;
}

/* --- calls.prepare ---------------------------------------------------------------------------- */

/* A call's input copied into ``dst`` (``padded`` elements: zeros after ``count``), and each float chunk's
 * exponent (quantize.peak_exponents: e with max|x| < 2**e, at least emin, enone for a zero chunk), in
 * one pass.  With ``dst`` NULL (a call that reads the caller's array as it goes), the exponents alone,
 * read from ``src``: ``padded`` is then ``count`` rounded up to whole chunks, the last one's missing
 * values taken as zeros.  Returns 0; 1 if some value is not finite, 2 if some exponent is above emax
 * (the caller raises, with its own words). */
int32_t ina_prepare(const void *src, int64_t count, int32_t dtype, void *dst, int64_t padded, int32_t values,
                    int8_t *exps, int32_t emin, int32_t emax, int32_t enone) {
    size_t item = dtype == INA_F64 ? 8 : 4;
    if (dtype == INA_I32) {
        if (!dst) return 0;
        memcpy(dst, src, (size_t)count * item);
        memset((uint8_t *)dst + count * item, 0, (size_t)(padded - count) * item);
        return 0;
    }
    int bad = 0;
    for (int64_t c = 0; c * values < padded; c++) {  /* a chunk at a time: copied, then read while in cache */
        int64_t first = c * values, have = count - first < values ? count - first : values;
        const uint8_t *chunk = (const uint8_t *)src + first * item;
        if (dst) {
            memcpy((uint8_t *)dst + first * item, chunk, (size_t)have * item);
            memset((uint8_t *)dst + (first + have) * item, 0, (size_t)(values - have) * item);
            chunk = (const uint8_t *)dst + first * item;
            have = values;
        }
        double peak = 0;
        if (dtype == INA_F32) {
            const float *x = (const float *)chunk;
            float m = 0;
            int64_t i = 0;
#ifdef INA_AVX2
            if (has_avx2()) {
                uint32_t bits = peak_bits_f32_avx2(x, have, &i);
                bad |= bits > 0x7F7FFFFFu;  /* above FLT_MAX's bits: an infinity or a NaN */
                memcpy(&m, &bits, 4);
                if (!(m <= FLT_MAX)) m = 0;
            }
#endif
#ifdef __SSE2__
            __m128 sign = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF)), big = _mm_set1_ps(FLT_MAX), mm = _mm_setzero_ps();
            __m128i nonfinite = _mm_setzero_si128();
            for (; i + 4 <= have; i += 4) {
                __m128 a = _mm_and_ps(_mm_loadu_ps(x + i), sign);
                mm = _mm_max_ps(mm, a);
                nonfinite = _mm_or_si128(nonfinite, _mm_castps_si128(_mm_cmpnle_ps(a, big)));
            }
            float lanes[4];
            _mm_storeu_ps(lanes, mm);
            for (int j = 0; j < 4; j++) m = lanes[j] > m ? lanes[j] : m;
            bad |= _mm_movemask_epi8(nonfinite) != 0;
#endif
            for (; i < have; i++) {
                float a = fabsf(x[i]);
                bad |= !(a <= FLT_MAX);
                m = a > m ? a : m;
            }
            peak = m;
        } else {
            const double *x = (const double *)chunk;
            for (int64_t i = 0; i < have; i++) {
                double a = fabs(x[i]);
                bad |= !(a <= DBL_MAX);
                peak = a > peak ? a : peak;
            }
        }
        int e;
        frexp(peak, &e);
        if (peak == 0) {
            exps[c] = (int8_t)enone;
            continue;
        }
        if (e > emax) return bad ? 1 : 2;
        exps[c] = (int8_t)(e < emin ? emin : e);
    }
    return bad ? 1 : 0;
}

