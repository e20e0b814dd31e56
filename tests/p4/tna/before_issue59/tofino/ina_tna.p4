/* Frozen: p4src/tofino/ as of commit 8e2b659, before issue 59 (tests/test_tofino_fit.py). */
/* ina_tna.p4: in-network aggregation for Tofino 1 (TNA), the same wire protocol, tables and
 * state machine as ../ina.p4 (docs/protocol.md), V = 64 int32 values per packet.
 * This file only includes and wires the controls; each lives in its own file here (14
 * controls, where ina.p4 has 9: the split differs because the state is laid out for
 * Tofino, see README.md).  Parse states, egress addressing and the verdict vocabulary are
 * shared with ina.p4 through ../common/.
 *
 * Every register is touched by exactly one RegisterAction per packet and pass, holds at
 * most a pair of 32-bit halves, and no stage has more than 4 stateful ALUs.  A Tofino 1
 * stateful ALU returns one 32-bit word per packet, and ina.p4's OVERFLOW flag needs every
 * add of every lane to report whether it left int32: so one register per lane, returning
 * the add's overflow mark, and a later pass reads the sums.  64 lanes need 64 stateful
 * ALUs: lanes 0..31 are in ingress, lanes 32..63 in egress.  An aggregation packet takes
 * up to three passes through ingress, the later ones by recirculation (port
 * INA_RECIRC_PORT), with its verdict in an 18-byte bridge header.  The wire protocol does
 * not change.
 *
 * STAGE PLAN, the only copy (README.md's "Stage plan" points here; each control's file names
 * its stages as this plan does).  POOL_CELLS = 2 * INA_POOL_SLOTS = 2048 cells by default.  A stage's
 * registers are the same in every pass, so the passes' registers share the 4 stateful
 * ALUs of each stage: CHECK's four registers sit beside three lanes each.
 *
 *  INGRESS  stage | CHECK pass (from the wire)      | CONSUME pass             | HARVEST pass   | SALUs
 *   0             | jobs, child_bit, ipv4_routes    | lane_0..3 (write|add)    | lane_0..3 read | 4
 *   1             | cell, range checks              | lane_4..7                | lane_4..7      | 4
 *   2             | round_epoch (swap)              | lane_8..10               | lane_8..10     | 1+3
 *   3             | round_seq (check|open)          | lane_11..13              | lane_11..13    | 1+3
 *   4             | bitmap pair (open|join)         | lane_14..16              | lane_14..16    | 1+3
 *   5             | map_result = old & me           | lane_17..20              | lane_17..20    | 4
 *   6             | round_exponent (write|max|read) | lane_21..23              | lane_21..23    | 1+3
 *   7             | job_stats, drops (counters)     | lane_24..27              | lane_24..27    | 4
 *   8             | next step: recirculate          | lane_28..31              | lane_28..31    | 4
 *   9             |                                 | remaining; marks hash    | next step      | 1
 *  10             |                                 | low_overflow; next step; |                | 0
 *                 |                                 | job_stats (RESULTS)      |                |
 *  11             |                                 | round_flags (write|or|read) |             | 1
 *
 *  EGRESS   stage | a contribution on its way to CONSUME | a result going out (each copy)       | SALUs
 *   0-7           | lane_32..63 (write|add), 4 per stage | lane_32..63 (read); receivers (exact) | 4
 *   8             | marks hash                           |                                      | 0
 *   9             | high_overflow into the bridge        |                                      | 0
 *   deparser: the IPv4 checksum (Checksum); the bridge is kept only for the recirculation port.
 *
 *  Stateful ALUs: 38 of ingress's 48 (32 lanes and 6 others), 32 of egress's 48.  SRAM:
 *  each lane is 2048 x 64 b (sum, mark) = 16 KiB, 1 MiB for the 64; the six other registers
 *  (round_epoch, round_seq, bitmap, round_exponent, remaining, round_flags) 8 KiB each:
 *  2048 x 32 b, bitmap 1024 x 64 b.  Tofino 1 has about 15 MiB per pipe.  The deepest pass
 *  (CONSUME) uses all 12 ingress stages; if bf-p4c needs one more, round_flags can take
 *  the marks word itself as its input and drop stage 10's condition.
 *
 *  Not verified: compiling with bf-p4c (p4src/tofino/README.md says what may move).
 */
#include <core.p4>
#include <tna.p4>

#include "types.p4"
#include "parsers.p4"
#include "forwarding.p4"
#include "job_lookup.p4"
#include "round_check.p4"
#include "bitmap.p4"
#include "exponents.p4"
#include "lane.p4"
#include "lane_marks.p4"
#include "round_flags.p4"
#include "workers_counter.p4"
#include "telemetry.p4"
#include "next_step.p4"
#include "egress_addressing.p4"

control TnaIngress(inout tna_headers hdr, inout tna_ingress_metadata meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Forwarding() forwarding;
    JobLookup() job_lookup;
    RoundCheck() round_check;
    Bitmap() bitmap;
    Exponents() exponents;
#define PAIR(i, j) Lane() lane_##i;
#include "pairs.p4"
#undef PAIR
    LaneMarks(false) lane_marks;
    WorkersCounter() workers_counter;
    RoundFlags() round_flags;
    Telemetry() telemetry;
    NextStep() next_step;

    apply {
        if (!hdr.bridge.isValid()) {
            /* CHECK pass */
            meta.check_pass = 1;
            hdr.bridge.setValid();
            hdr.bridge.pass = PASS_FORWARD;
            if (!hdr.ina.isValid()) {
                if (hdr.udp.isValid() && hdr.udp.dst_port == INA_UDP_PORT) {
                    meta.verdict = Verdict.DROP;       // our port without a whole header and values
                    meta.count_drop = 1;
                    meta.drop_reason = DROP_TRUNCATED;
                } else {
                    meta.verdict = Verdict.FORWARD;
                    forwarding.apply(hdr, ig_dprsr_md, ig_tm_md);
                }
            } else if (ig_prsr_md.parser_err != 0) {
                meta.verdict = Verdict.DROP;
                meta.count_drop = 1;
                meta.drop_reason = DROP_TRUNCATED;
            } else {
                hdr.udp.checksum = 0;   // values change; IPv4 lets UDP go without a checksum
                job_lookup.apply(hdr, meta, ig_intr_md);
                if (meta.verdict == Verdict.CHECKED) {
                    round_check.apply(hdr, meta);
                }
                if (meta.verdict == Verdict.CHECKED) {
                    bitmap.apply(hdr, meta);
                    exponents.apply(hdr, meta);
                }
            }
        } else {
            /* CONSUME and HARVEST passes: lanes 0..31 */
            meta.lane_op = lane_op_for(hdr.bridge, PASS_HARVEST);
#define PAIR(i, j) lane_##i.apply(hdr.values.v##i, meta.lane_op, hdr.bridge.cell);
#include "pairs.p4"
#undef PAIR
            if (hdr.bridge.pass == PASS_CONSUME) {
                if (meta.lane_op != LANE_NONE) {
                    lane_marks.apply(hdr.values, meta.low_overflow);
                }
                workers_counter.apply(hdr.bridge, meta);
                round_flags.apply(hdr, own_overflow(meta.low_overflow, hdr));
            }
        }
        next_step.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
        telemetry.apply(meta);
    }
}

control TnaEgress(inout tna_headers hdr, inout tna_egress_metadata meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
#define PAIR(i, j) Lane() lane_##j;
#include "pairs.p4"
#undef PAIR
    LaneMarks(true) lane_marks;
    EgressAddressing() egress_addressing;

    apply {
        /* lanes 32..63: a contribution on its way to CONSUME adds, a result going out reads */
        meta.lane_op = lane_op_for(hdr.bridge, PASS_RESULT);
#define PAIR(i, j) lane_##j.apply(hdr.values.v##j, meta.lane_op, hdr.bridge.cell);
#include "pairs.p4"
#undef PAIR
        if (hdr.bridge.pass == PASS_CONSUME) {
            if (meta.lane_op != LANE_NONE) {
                lane_marks.apply(hdr.values, hdr.bridge.high_overflow);
            }
        } else {
            egress_addressing.apply(hdr, meta, eg_intr_md);
        }
    }
}

Pipeline(TnaIngressParser(), TnaIngress(), TnaIngressDeparser(),
         TnaEgressParser(), TnaEgress(), TnaEgressDeparser()) pipe;

Switch(pipe) main;
