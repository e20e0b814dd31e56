/* v1model.h: simple_switch's packet path for one received packet, as switch.Switch._run runs it:
 * parse -> verify_checksum -> ingress -> (drop | unicast | multicast replicas) -> egress ->
 * compute_checksum -> deparse.  The program's slots come as SLOT_* macros.
 */
#ifndef P4T_V1MODEL_H
#define P4T_V1MODEL_H

#define DROP_PORT 511
#define INSTANCE_NORMAL 0
#define INSTANCE_REPLICATION 5

/* What egress_path may change in S: its own slots and what egress, compute_checksum and the deparser may
 * write (lower.py's writes_*).  A multicast packet's replicas run one after another on S, each from ingress's
 * slots: these are kept before the first and put back before each next, instead of copying all of S. */
static void egress_writes(v_t *to, const v_t *from) {
    writes_egress(to, from);
    writes_compute_checksum(to, from);
    writes_deparser(to, from);
    static const int own[] = {SLOT_EGRESS_PORT, SLOT_EGRESS_SPEC, SLOT_LENGTH, SLOT_INSTANCE_TYPE, SLOT_EGRESS_RID};
    for (int i = 0; i < (int)(sizeof(own) / sizeof(own[0])); i++) to[own[i]] = from[own[i]];
}

static int egress_path(ctx_t *ctx, v_t *S, int port, const uint8_t *payload, long payload_len, long length) {
    S[SLOT_EGRESS_PORT] = port;
    S[SLOT_EGRESS_SPEC] = 0;
    S[SLOT_LENGTH] = length; /* BMv2: the packet-length register, not what ingress wrote */
    ctx->exiting = 0;
    egress(ctx, S);
    if (S[SLOT_EGRESS_SPEC] == DROP_PORT) return 0;
    ctx->payload.p = payload;
    ctx->payload.n = payload_len;
    compute_checksum(ctx, S);
    outbuf_t o = out_open(ctx);
    deparser(ctx, S, &o);
    out_bytes(ctx, &o, payload, payload_len);
    out_close(ctx, &o, port);
    return 1;
}

/* One packet: its outputs are in ctx (n_out, out_port, out_off, out_size); returns their number. */
int p4t_process(ctx_t *ctx, int port, const uint8_t *data, long len) {
    v_t S[N_SLOTS];
    packet_begin(ctx);
    if (setjmp(ctx->drop)) return packet_abandoned(ctx);
    memcpy(S, TEMPLATE, sizeof(S));
    S[SLOT_INGRESS_PORT] = port;
    S[SLOT_LENGTH] = len;
    int err = 0;
    long pos = parse(ctx, S, data, len, &err);
    S[SLOT_PARSER_ERROR] = err;
    const uint8_t *payload = data + pos;
    long payload_len = len - pos;
    ctx->payload.p = payload;
    ctx->payload.n = payload_len;
    ctx->exiting = 0;
    verify_checksum(ctx, S);
    ctx->exiting = 0;
    ingress(ctx, S);
    v_t group = S[SLOT_MCAST_GRP];
    int sent = 0;
    if (group) {
        int32_t count;
        const int32_t *at = mcast_find(&ctx->mcast, group, &count);
        v_t kept[N_SLOTS]; /* only egress_writes' slots are used */
        for (int32_t i = 0; i < count; i++) {
            int32_t k = at[0] + i;
            /* each replica's egress starts from ingress's slots */
            if (i == 0 && count > 1) egress_writes(kept, S);
            else if (i > 0) egress_writes(S, kept);
            S[SLOT_INSTANCE_TYPE] = INSTANCE_REPLICATION;
            S[SLOT_EGRESS_RID] = ctx->mcast.rid[k];
            sent += egress_path(ctx, S, ctx->mcast.port[k], payload, payload_len, len);
        }
    } else if (S[SLOT_EGRESS_SPEC] != DROP_PORT) {
        S[SLOT_INSTANCE_TYPE] = INSTANCE_NORMAL; /* BMv2 sets it, whatever ingress wrote */
        sent = egress_path(ctx, S, (int)S[SLOT_EGRESS_SPEC], payload, payload_len, len);
    }
    if (!sent) ctx->stats[ST_DROPPED]++;
    ctx->stats[ST_SENT] += sent;
    return sent;
}

#endif
