/* relay.c: worker/relay.py's Relay in C, function for function (each names the method it mirrors; the reasons
 * for each rule are written there, once): the same outputs and counters for the same datagrams, checked by
 * tests/test_native_relay.py over the seeded traffic tests/test_relay.py checks the reference with against
 * ina.p4.  No clock, no socket, no allocation: the cells and counters are numpy's, the outputs the caller's. */
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "relay.h"

typedef unsigned __int128 relay_word;  /* a header of up to 16 bytes, read as one big-endian integer */

enum relay_verdict { CHECKED, DROP, PASS_DOWN, ANSWER, FIRST, ADD, KEEP };  /* Verdict */

typedef struct relay_packet {  /* Packet */
    relay_word word;
    int64_t msg_type, flags, job_id, child, set, slot, seq, exponent;
    const uint8_t *values;     /* big-endian int32: the datagram's, or an output row's once one was written */
    int values_in_cell;        /* the packet's values are the cell's lanes (an ADD's sum, an ANSWER's read) */
    int64_t port;
    ina_relay_tree *tree;
    int from_parent;
    int64_t cell;
    int verdict;
    int32_t job_stat;          /* -1: None */
    int completed, answered, raise_up, lane_overflow, to_peer;  /* to_peer: meeting rule 1 */
} relay_packet;

static uint32_t relay_be32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static int64_t relay_field_of(relay_word word, const int32_t *f) {  /* Protocol.field: f is (shift, width, signed) */
    uint64_t v = (uint64_t)(word >> f[0]) & ((1ull << f[1]) - 1);
    return f[2] && (v >> (f[1] - 1)) & 1 ? (int64_t)v - (int64_t)(1ull << f[1]) : (int64_t)v;
}

static relay_word relay_with_field(relay_word word, const int32_t *f, int64_t value) {
    relay_word mask = (((relay_word)1) << f[1]) - 1;
    return (word & ~(mask << f[0])) | ((((relay_word)(uint64_t)value) & mask) << f[0]);
}

/* Relay._count: the one JOB_STAT_* the controls chose, and a completion */
static void relay_count(const ina_relay *r, const relay_packet *p) {
    if (p->job_stat >= 0) p->tree->job_stats[p->job_stat] += 1;
    if (p->completed) p->tree->job_stats[r->layout->JOB_STAT_RESULTS] += 1;
}

/* Relay._look_up: which tree and cell (ina.p4's jobs table: one tree per job, then its children and parent) */
static void relay_look_up(ina_relay *r, relay_packet *p) {
    const ina_relay_layout *L = r->layout;
    ina_relay_tree *found = NULL;
    int from_parent = 0;
    for (int32_t k = 0; k < r->n_trees && p->child < 32 && !found; k++) {
        ina_relay_tree *t = r->trees + k;
        if (t->job_id != p->job_id) continue;
        for (int32_t c = 0; c < t->n_children && !found; c++)
            if (t->child_index[c] == p->child && t->child_port[c] == p->port) found = t;
        if (!found && t->has_parent && t->parent_port == p->port && t->index_at_parent == p->child) {
            found = t;
            from_parent = 1;
        }
        break;
    }
    if (!found) {
        r->drops[L->DROP_UNKNOWN_MEMBER] += 1;
        p->verdict = DROP;
        return;
    }
    p->tree = found;
    p->from_parent = from_parent;
    p->cell = p->slot << 1 | p->set;
    if (p->msg_type != (from_parent ? L->MSG_RESULT : L->MSG_DATA)) {
        p->job_stat = L->JOB_STAT_BAD_TYPE;
        p->verdict = DROP;
    } else if (p->slot >= found->pool_size) {
        p->job_stat = L->JOB_STAT_BAD_SLOT;
        p->verdict = DROP;
    } else if (from_parent) {
        p->job_stat = L->JOB_STAT_FROM_PARENT;
        p->verdict = PASS_DOWN;
    }
}

/* Relay._peer_lacks_our_half: meeting rules 1 and 3 */
static int relay_peer_lacks_our_half(const ina_relay_tree *t, uint32_t bitmap, int32_t n) {
    return t->peer >= 0 && n == t->n_children - 1 && !(bitmap & (1u << t->peer));
}

/* Relay._keep */
static void relay_keep(relay_packet *p) {
    if (p->answered) return;  /* PASS_DOWN */
    ina_relay_tree *t = p->tree;
    int64_t i = p->cell;
    p->verdict = KEEP;
    t->round_seq[i] = (uint32_t)p->seq;
    t->round_epoch[i] = (uint16_t)t->epoch;
    t->arrivals[i] = (uint8_t)t->n_children;
    t->bitmap[i] = (uint32_t)((1ull << t->n_children) - 1);
    t->answered[i] = 1;
}

/* Relay._repeat */
static void relay_repeat(const ina_relay_layout *L, relay_packet *p, uint32_t old, int32_t n, int complete) {
    ina_relay_tree *t = p->tree;
    uint32_t me = 1u << p->child;
    p->job_stat = L->JOB_STAT_RETRANSMITS;
    p->verdict = ANSWER;
    if (!complete) {
        if (!relay_peer_lacks_our_half(t, old, n)) p->verdict = DROP;
        /* else meeting rule 3: our half again, to the peer, answered as a partial sum up is (ANSWER) */
    } else if (p->answered) {
        if (!t->is_root && (p->flags & L->FLAG_RECOVER)) p->raise_up = 1;
    } else {
        uint32_t who = t->asked[p->cell];
        t->asked[p->cell] = who | me;
        if (who != 0 && !(who & me)) p->verdict = DROP;
    }
}

/* Relay._contribute */
static void relay_contribute(const ina_relay_layout *L, relay_packet *p, uint32_t old, int32_t n, int same_round) {
    ina_relay_tree *t = p->tree;
    int64_t i = p->cell;
    p->job_stat = L->JOB_STAT_AGGREGATED;
    uint32_t counted = old | 1u << p->child;
    t->bitmap[i] = counted;
    if (!same_round) {
        n = 1;
        t->round_seq[i] = (uint32_t)p->seq;
        t->round_epoch[i] = (uint16_t)t->epoch;
        t->answered[i] = 0;
        t->asked[i] = 0;
        p->verdict = FIRST;
    } else {
        n += 1;
        p->verdict = ADD;
    }
    t->arrivals[i] = (uint8_t)n;
    if (n == t->n_children)
        p->completed = 1;
    else if (relay_peer_lacks_our_half(t, counted, n))
        p->to_peer = 1;
}

/* Relay._check_round */
static void relay_check_round(const ina_relay_layout *L, relay_packet *p) {
    ina_relay_tree *t = p->tree;
    int64_t i = p->cell;
    uint32_t seq = (uint32_t)p->seq, stored_seq = t->round_seq[i];
    int32_t stored_epoch = t->round_epoch[i];
    int same_round = stored_epoch == t->epoch && stored_seq == seq;
    if (!same_round && stored_epoch == t->epoch && ((seq - stored_seq) & 0x80000000u)) {
        p->job_stat = L->JOB_STAT_STALE;
        p->verdict = DROP;
        return;
    }
    uint32_t old = same_round ? t->bitmap[i] : 0;
    int32_t n = same_round ? t->arrivals[i] : 0;
    int kept = same_round ? t->answered[i] != 0 : 0;
    int complete = n == t->n_children;
    p->answered = complete && ((t->is_root && !p->from_parent) || kept);
    if (p->from_parent)
        relay_keep(p);
    else if ((old & 1u << p->child) || complete)
        relay_repeat(L, p, old, n, complete);
    else
        relay_contribute(L, p, old, n, same_round);
}

/* Relay._value_lanes: FIRST and KEEP overwrite the cell, ADD adds (wrapping, overflow when the true sum leaves
 * int32: both addends' signs differ from the wrapped sum's), ANSWER reads the cell */
static void relay_value_lanes(const ina_relay_layout *L, relay_packet *p) {
    int32_t V = L->values, *lanes = p->tree->lanes + p->cell * V;
    if (p->verdict == ANSWER) {
        p->values_in_cell = 1;
    } else if (p->verdict == FIRST || p->verdict == KEEP) {
        for (int32_t j = 0; j < V; j++) lanes[j] = (int32_t)relay_be32(p->values + 4 * j);
    } else {
        uint32_t overflow = 0;
        for (int32_t j = 0; j < V; j++) {
            uint32_t a = (uint32_t)lanes[j], b = relay_be32(p->values + 4 * j), s = a + b;
            overflow |= (a ^ s) & (b ^ s);
            lanes[j] = (int32_t)s;
        }
        p->lane_overflow = overflow >> 31;
        p->values_in_cell = 1;
    }
}

/* Relay._exponent_and_overflow */
static void relay_exponent_and_overflow(const ina_relay_layout *L, relay_packet *p) {
    ina_relay_tree *t = p->tree;
    int64_t i = p->cell;
    if (p->verdict == ANSWER) {
        p->flags = t->flags[i] | L->FLAG_RETRANSMIT | (p->flags & L->FLAG_RECOVER);
        p->exponent = t->exponent[i];
        return;
    }
    int64_t merged_flags = p->flags & L->FLAG_OVERFLOW, merged_exponent = p->exponent;
    if (p->verdict == ADD) {
        merged_flags |= t->flags[i];
        if (t->exponent[i] > merged_exponent) merged_exponent = t->exponent[i];
    }
    if (p->lane_overflow) merged_flags |= L->FLAG_OVERFLOW;
    t->flags[i] = (uint8_t)merged_flags;
    t->exponent[i] = (int8_t)merged_exponent;
    if (p->completed || p->to_peer) {
        p->flags = merged_flags;
        p->exponent = merged_exponent;
    }
}

/* Relay._emit: the packet's header with four fields written, then its values */
static void relay_emit(const ina_relay *r, relay_packet *p, int64_t port, int64_t receiver, int64_t msg_type,
                 int64_t child, ina_relay_outputs *out) {
    const ina_relay_layout *L = r->layout;
    int64_t j = out->n++;
    int32_t H = L->header_bytes, V = L->values;
    uint8_t *row = out->payloads + j * L->packet_bytes;
    out->ports[j] = (int32_t)port;
    out->receivers[j] = (int32_t)receiver;
    relay_word word = p->word;
    word = relay_with_field(word, L->msg_type, msg_type);
    word = relay_with_field(word, L->child, child);
    word = relay_with_field(word, L->flags, p->flags);
    word = relay_with_field(word, L->exponent, p->exponent);
    for (int32_t b = H - 1; b >= 0; b--, word >>= 8) row[b] = (uint8_t)word;
    if (p->values_in_cell) {
        const int32_t *lanes = p->tree->lanes + p->cell * V;
        for (int32_t v = 0; v < V; v++) {
            uint32_t be = __builtin_bswap32((uint32_t)lanes[v]);
            memcpy(row + H + 4 * v, &be, 4);
        }
        p->values_in_cell = 0;  /* the next copy (a multicast's) takes this row's */
    } else {
        memmove(row + H, p->values, 4 * (size_t)V);
    }
    p->values = row + H;
}

/* Relay._to_children: a multicast RESULT, one copy per child in the group's order */
static void relay_to_children(const ina_relay *r, relay_packet *p, int with_peer, ina_relay_outputs *out) {
    const ina_relay_tree *t = p->tree;
    for (int32_t c = 0; c < t->n_children; c++)
        if (with_peer || t->child_index[c] != t->peer)
            relay_emit(r, p, t->child_port[c], t->child_index[c], r->layout->MSG_RESULT, t->child_index[c], out);
}

/* Relay._send */
static void relay_send(const ina_relay *r, relay_packet *p, ina_relay_outputs *out) {
    const ina_relay_layout *L = r->layout;
    const ina_relay_tree *t = p->tree;
    int sends = p->completed || p->to_peer || p->verdict == ANSWER || p->verdict == PASS_DOWN || p->verdict == KEEP;
    if (!sends) return;
    if (p->verdict == PASS_DOWN || p->verdict == KEEP)
        relay_to_children(r, p, 0, out);
    else if (p->to_peer || (p->verdict == ANSWER && !p->answered))
        relay_emit(r, p, t->parent_port, L->RECEIVER_PARENT, L->MSG_DATA, t->index_at_parent, out);
    else if (p->verdict == ANSWER && p->raise_up)
        relay_emit(r, p, t->parent_port, L->RECEIVER_PARENT, L->MSG_RESULT, t->index_at_parent, out);
    else if (p->verdict == ANSWER)
        relay_emit(r, p, p->port, p->child, L->MSG_RESULT, p->child, out);
    else if (t->is_root)
        relay_to_children(r, p, p->child != t->peer, out);
    else
        relay_emit(r, p, t->parent_port, L->RECEIVER_PARENT, L->MSG_DATA, t->index_at_parent, out);
}

/* Relay.receive: one datagram */
static void relay_receive(ina_relay *r, int64_t port, const uint8_t *payload, int64_t length, ina_relay_outputs *out) {
    const ina_relay_layout *L = r->layout;
    if (length < L->packet_bytes) {
        r->drops[L->DROP_TRUNCATED] += 1;
        return;
    }
    relay_packet p;
    memset(&p, 0, sizeof(p));
    for (int32_t b = 0; b < L->header_bytes; b++) p.word = p.word << 8 | payload[b];
    p.msg_type = relay_field_of(p.word, L->msg_type);
    p.flags = relay_field_of(p.word, L->flags);
    p.job_id = relay_field_of(p.word, L->job_id);
    p.child = relay_field_of(p.word, L->child);
    p.set = relay_field_of(p.word, L->set);
    p.slot = relay_field_of(p.word, L->slot);
    p.seq = relay_field_of(p.word, L->seq);
    p.exponent = relay_field_of(p.word, L->exponent);
    p.values = payload + L->header_bytes;
    p.port = port;
    p.verdict = CHECKED;
    p.job_stat = -1;
    relay_look_up(r, &p);
    if (p.verdict == CHECKED || p.verdict == PASS_DOWN) relay_check_round(L, &p);
    if (p.verdict == ANSWER || p.verdict == FIRST || p.verdict == ADD || p.verdict == KEEP) {
        relay_value_lanes(L, &p);
        relay_exponent_and_overflow(L, &p);
    }
    relay_send(r, &p, out);
    relay_count(r, &p);
}

/* Relay.receive_batch: a datagram's bytes are its row's first lengths[i] (at most the stride) */
void ina_relay_receive(ina_relay *r, int64_t port, const uint8_t *rows, int64_t stride, const int64_t *lengths,
                       int64_t k, ina_relay_outputs *out) {
    out->n = 0;
    out->taken = 0;
    for (int64_t i = 0; i < k && out->n + r->fanout <= out->cap; i++) {
        int64_t length = lengths[i] < 0 ? 0 : lengths[i] > stride ? stride : lengths[i];
        relay_receive(r, port, rows + i * stride, length, out);
        out->taken = i + 1;
    }
}
