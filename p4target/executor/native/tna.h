/* tna.h: a Tofino 1 pipeline's packet path, as tna_switch.TnaSwitch._run runs it: ingress
 * parser (intrinsic and port metadata first), ingress, ingress deparser, the traffic manager
 * (drop_ctl, ucast_egress_port if written, mcast_grp_a/b replicas, bypass_egress), then per
 * copy the egress parser (egress intrinsic metadata first), egress and egress deparser; a copy
 * to a recirculation port enters ingress again.  The program's slots come as SLOT_* macros,
 * -1 where no block declares the field; the rest of what the switch configures (tna_switch's
 * _attach_native) as macros and arrays too.
 */
#ifndef P4T_TNA_H
#define P4T_TNA_H

#define IG_META_BYTES 16 /* ingress_intrinsic_metadata_t, then PORT_METADATA_SIZE zero bytes */
#define EG_META_BYTES 27 /* egress_intrinsic_metadata_t */

/* RECIRC_PORT_FIRST/LAST (tna_switch.RECIRCULATION_PORTS) and MAX_PASSES (switch.MAX_PASSES) come as macros */
static int is_recirculation_port(int port) { return port >= RECIRC_PORT_FIRST && port <= RECIRC_PORT_LAST; }

typedef struct {
    uint8_t *in, *packet, *eg; /* the pass's input, the packet the TM gets, an egress copy's input */
    long cap;
} scratch_t;

static int parser_flags(int err) { return err ? PARSER_FLAGS[err] : 0; }

static void egress_copy(ctx_t *ctx, scratch_t *sc, int port, int rid, int first, const uint8_t *packet, long len) {
    /* A copy's slots start as TEMPLATE.  They stay in ctx from one copy to the next, and only what the
     * egress blocks may write (lower.py's writes_*) is reset: a fraction of the slots (ina_tna.p4: 344 of
     * 3,086), where copying all of TEMPLATE was most of a pass's time. */
    v_t *E = ctx->eg_slots;
    if (!E) {
        E = ctx->eg_slots = (v_t *)malloc(sizeof(v_t) * N_SLOTS);
        if (!E) drop_packet(ctx, DROP_OUTPUT_FULL);
        memcpy(E, TEMPLATE, sizeof(v_t) * N_SLOTS);
    } else {
        writes_eg_parse(E, TEMPLATE);
        writes_egress(E, TEMPLATE);
        writes_eg_deparser(E, TEMPLATE);
#if SLOT_EG_PARSER_ERR >= 0
        E[SLOT_EG_PARSER_ERR] = TEMPLATE[SLOT_EG_PARSER_ERR];
#endif
    }
    E[SLOT_LENGTH] = len;
    uint8_t *buf = sc->eg;
    bitwriter_t w = {buf, 0};
    for (int i = 0; i < (int)(sizeof(EG_WIDTHS) / sizeof(EG_WIDTHS[0])); i++) {
        v_t value = i == EG_PORT_FIELD ? port : i == EG_RID_FIELD ? rid : i == EG_RID_FIRST_FIELD ? first
                  : i == EG_LENGTH_FIELD ? len : 0;
        bw_put(&w, value, EG_WIDTHS[i]);
    }
    memcpy(buf + EG_META_BYTES, packet, len);
    long total = EG_META_BYTES + len;
    int err = 0;
    long pos = eg_parse(ctx, E, buf, total, &err);
#if SLOT_EG_PARSER_ERR >= 0
    if (err) E[SLOT_EG_PARSER_ERR] = parser_flags(err);
#endif
    ctx->exiting = 0;
    egress(ctx, E);
    outbuf_t o = out_open(ctx);
    eg_deparser(ctx, E, &o);
#if SLOT_EG_DROP_CTL >= 0
    if (E[SLOT_EG_DROP_CTL] & 1) return;
#endif
    out_bytes(ctx, &o, buf + pos, total - pos);
    out_close(ctx, &o, port);
}

static void tna_pass(ctx_t *ctx, int port, const uint8_t *data, long len) {
    v_t S[N_SLOTS];
    scratch_t sc;
    long need = len + MAX_HEADER_BYTES + 64;
    if (ctx->scratch_cap < 3 * need) {
        free(ctx->scratch);
        ctx->scratch = (uint8_t *)malloc(3 * need);
        ctx->scratch_cap = ctx->scratch ? 3 * need : 0;
        if (!ctx->scratch) drop_packet(ctx, DROP_OUTPUT_FULL);
    }
    sc.in = ctx->scratch;
    sc.packet = sc.in + need;
    sc.eg = sc.packet + need;
    sc.cap = need;
    memcpy(S, TEMPLATE, sizeof(S));
    S[SLOT_LENGTH] = len;
    memset(sc.in, 0, IG_META_BYTES);
    store_be(sc.in, 8, ((v_t)(port & 0x1FF)) << 48);
    memcpy(sc.in + IG_META_BYTES, data, len);
    long total = IG_META_BYTES + len;
    int err = 0;
    long pos = ig_parse(ctx, S, sc.in, total, &err);
    if (err) {
        if (!KEEP_PARSER_ERRORS) {
            ctx->stats[ST_PARSER_DROPS]++;
            return;
        }
#if SLOT_IG_PARSER_ERR >= 0
        S[SLOT_IG_PARSER_ERR] = parser_flags(err);
#endif
    }
    ctx->exiting = 0;
    ingress(ctx, S);
    outbuf_t pkt = {sc.packet, 0, need};
    ig_deparser(ctx, S, &pkt);
#if SLOT_IG_DROP_CTL >= 0
    if (S[SLOT_IG_DROP_CTL] & 1) return;
#endif
    out_bytes(ctx, &pkt, sc.in + pos, total - pos);
    int32_t cport[MAX_OUTPUTS], crid[MAX_OUTPUTS], cfirst[MAX_OUTPUTS];
    int n = 0;
#if SLOT_UCAST_EGRESS_PORT >= 0
    if (S[SLOT_UCAST_EGRESS_PORT] != ((v_t)1 << 126)) {
        cport[n] = (int32_t)S[SLOT_UCAST_EGRESS_PORT];
        crid[n] = 0;
        cfirst[n++] = 0;
    }
#endif
    static const int group_slots[] = {SLOT_MCAST_GRP_A, SLOT_MCAST_GRP_B};
    for (int g = 0; g < 2; g++) {
        if (group_slots[g] < 0 || !S[group_slots[g]]) continue;
        int32_t count;
        const int32_t *at = mcast_find(&ctx->mcast, S[group_slots[g]], &count);
        for (int32_t k = 0; k < count; k++) {
            if (n >= MAX_OUTPUTS) drop_packet(ctx, DROP_OUTPUT_FULL);
            cport[n] = ctx->mcast.port[at[0] + k];
            crid[n] = ctx->mcast.rid[at[0] + k];
            cfirst[n++] = k == 0;
        }
    }
#if SLOT_BYPASS_EGRESS >= 0
    if (S[SLOT_BYPASS_EGRESS]) {
        for (int i = 0; i < n; i++) {
            outbuf_t o = out_open(ctx);
            out_bytes(ctx, &o, pkt.p, pkt.n);
            out_close(ctx, &o, cport[i]);
        }
        return;
    }
#endif
    for (int i = 0; i < n; i++) egress_copy(ctx, &sc, cport[i], crid[i], cfirst[i], pkt.p, pkt.n);
}

/* One received packet and its recirculations; returns the number of outputs left in ctx. */
int p4t_process(ctx_t *ctx, int port, const uint8_t *data, long len) {
    packet_begin(ctx);
    if (setjmp(ctx->drop)) return packet_abandoned(ctx);
    tna_pass(ctx, port, data, len);
    int passes = 1, next = 0;
    for (;;) { /* the copies that went to a recirculation port enter ingress again, in order */
        while (next < ctx->n_out && !is_recirculation_port(ctx->out_port[next])) next++;
        if (next >= ctx->n_out) break;
        if (passes >= MAX_PASSES) {
            ctx->stats[ST_LOOP_DROPS]++;
            break;
        }
        passes++;
        int32_t at = next++;
        tna_pass(ctx, ctx->out_port[at], ctx->out + ctx->out_off[at], ctx->out_size[at]);
    }
    int kept = 0; /* what leaves on a real port */
    for (int i = 0; i < ctx->n_out; i++) {
        if (is_recirculation_port(ctx->out_port[i])) continue;
        ctx->out_port[kept] = ctx->out_port[i];
        ctx->out_off[kept] = ctx->out_off[i];
        ctx->out_size[kept++] = ctx->out_size[i];
    }
    ctx->n_out = kept;
    if (!kept) ctx->stats[ST_DROPPED]++;
    ctx->stats[ST_SENT] += kept;
    return kept;
}

#endif
