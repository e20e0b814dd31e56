/* ina_tna.p4: in-network aggregation for Tofino 1 (TNA), the same wire protocol, tables and
 * state machine as ../ina.p4 (docs/protocol.md), V = 64 int32 values per packet.
 * This file only includes and wires the controls; each lives in its own file here.
 *
 * Every register is touched by exactly one RegisterAction per packet and pass, holds at
 * most a pair of 32-bit halves, and no stage has more than 4 stateful ALUs.  A Tofino 1
 * stateful ALU returns one 32-bit word per packet, so 32 value-pair registers give out 32
 * values per pass: an aggregation packet takes up to three passes through ingress, the
 * later ones by recirculation (port INA_RECIRC_PORT, egress bypassed), with its verdict
 * in an 18-byte bridge header.  The wire protocol does not change.
 *
 * STAGE PLAN (ingress; POOL_CELLS = 2 * INA_POOL_SLOTS = 2048 cells by default)
 *
 *  CHECK pass (packet from the wire)
 *   stage | control          | tables / registers (RegisterActions)          | SALUs | SRAM per register
 *   0     | JobLookup        | jobs (exact, 4096), child_bit (const, 32),     | 0     |
 *         | Forwarding       | ipv4_routes (LPM, 1024; other packets)         |       |
 *   1     | JobLookup        | cell = (pool_base + slot) * 2 + set, checks    | 0     |
 *   2     | RoundCheck       | round_epoch (swap)                             | 1     | 2048 x 32b = 8 KiB
 *   3     | RoundCheck       | round_seq (check | open)                       | 1     | 2048 x 32b = 8 KiB
 *   4     | Bitmap           | bitmap pair (open0|open1|join0|join1)          | 1     | 1024 x 64b = 8 KiB
 *   5     | Bitmap           | map_result = old & me                          | 0     |
 *   6     | Exponents        | round_exponent (write|max|read),               | 2     | 2 x 8 KiB
 *         |                  | round_flags (write|or|read)                    |       |
 *   7     | Telemetry        | job_stats, drops (counters)                    | 0     | 512 + 4 cells
 *   8     | NextStep         | drop / multicast down / recirculate            | 0     |
 *
 *  CONSUME pass (recirculated contribution or repeat)
 *   0-7   | Processor x 32   | values_i pair (write|add|read1|read0), 4/stage | 4 each| 32 x 2048 x 64b = 512 KiB
 *   8     | WorkersCounter   | remaining (open|down|read)                     | 1     | 2048 x 32b = 8 KiB
 *   9     | NextStep         | drop (absorbed) or recirculate for HARVEST     | 0     |
 *   9     | Telemetry        | job_stats (RESULTS)                            | 0     |
 *
 *  HARVEST pass (complete round: result or answer)
 *   0-7   | Processor x 32   | values_i (read0): the first value of each pair | 4 each|
 *   8     | NextStep         | multicast / unicast to the sender or parent    | 0     |
 *
 *  Passes share the stages: a stage's registers are the same in every pass, and the
 *  controls of one pass never run in another, so each register sees one RegisterAction
 *  per packet and pass.  Most stateful ALUs in one stage: 4 (stages 0-7, the Processors);
 *  the deepest pass uses 10 of the 12 stages.
 *
 *  EGRESS (one stage): EgressAddressing's receivers (exact, 4096); IPv4 checksum in the
 *  deparser (Checksum).  No registers in egress, so multicast copies share nothing.
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
                    meta.verdict = VERDICT_DROP;       // our port without a whole header and values
                    meta.count_drop = 1;
                    meta.drop_reason = DROP_TRUNCATED;
                } else {
                    meta.verdict = VERDICT_FORWARD;
                    forwarding.apply(hdr, ig_dprsr_md, ig_tm_md);
                }
            } else if (ig_prsr_md.parser_err != 0) {
                meta.verdict = VERDICT_DROP;
                meta.count_drop = 1;
                meta.drop_reason = DROP_TRUNCATED;
            } else {
                hdr.udp.checksum = 0;   // values change; IPv4 lets UDP go without a checksum
                job_lookup.apply(hdr, meta, ig_intr_md);
                if (meta.verdict == VERDICT_CHECKED) {
                    round_check.apply(hdr, meta);
                }
                if (meta.verdict == VERDICT_CHECKED) {
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
                round_flags.apply(hdr, meta.low_overflow);
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
