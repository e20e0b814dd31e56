/* ina_tna.p4: in-network aggregation for Tofino 1 (TNA), the same wire protocol, tables and
 * state machine as ../ina.p4 (docs/protocol.md), V = 64 int32 values per packet.
 * This file only includes and wires the controls; each lives in its own file here.  Parse
 * states, egress addressing and the verdict vocabulary are shared with ina.p4 through ../common/.
 *
 * What Tofino 1 gives (p4target/tofino_fit checks it: `p4target-check --target tofino`): 12
 * stages that ingress and egress share, 4 stateful ALUs per stage, one 32-bit word out of each,
 * four instructions and two 32-bit comparisons in each.  ina.p4's OVERFLOW flag needs every add
 * of every lane to tell whether it left int32; that takes the value's sign, two comparisons and
 * the mark as the word out (lane.p4), so one lane per stateful ALU.  32 lane registers, each
 * twice the pool deep, carry the 64 values: lanes 0..31 at index cell, lanes 32..63 at index
 * cell + POOL_CELLS, in two passes.  All of it runs in ingress, by recirculation (port
 * INA_RECIRC_PORT, egress bypassed), with what the earlier pass decided in a bridge header:
 *
 *   CHECK       from the wire: job lookup, checks, round check, bitmap, exponent
 *   LO          a contribution: lanes 0..31 write or add; their marks; the cell's flags
 *   HI          lanes 32..63 write or add; marks; flags; the count-down.  An incomplete
 *               round's contribution is dropped here (absorbed); a repeat comes straight here
 *   HARVEST_LO  the completing packet, or an answered repeat: lanes 0..31 read
 *   HARVEST_HI  lanes 32..63 read; out through egress, which addresses each copy
 *
 * The packet's two blocks of 32 values swap places at each lane pass (parsers.p4), so every
 * lane pass touches the first block: one PHV operand per stateful ALU.  A contribution costs
 * 3 passes, a completion 5; the stage plan, as the check places it, is in README.md.
 *
 * Order: every pass after CHECK comes through the one recirculation port, which keeps order,
 * so packets meet the cell's registers in the order they passed CHECK.  The opener writes
 * before anyone adds, and the packet that counts down last (pass HI) is the last to have
 * added in LO and HI and to have met round_flags and round_exponent: its harvest reads the
 * round's sums, flags and exponent.
 *
 * Not compiled with bf-p4c here (none runs on these machines); README.md says what to watch.
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
    LaneMarks() lane_marks;
    WorkersCounter() workers_counter;
    RoundFlags() round_flags;
    Telemetry() telemetry;
    NextStep(PASS_CHECK) check_next;
    NextStep(PASS_LO) lo_next;
    NextStep(PASS_HI) hi_next;
    NextStep(PASS_HARVEST_LO) harvest_lo_next;
    NextStep(PASS_HARVEST_HI) harvest_hi_next;

    apply {
        if (meta.check_pass == 1) {
            /* CHECK pass (the parser set check_pass: the packet came from the wire) */
            hdr.bridge.setValid();
            hdr.bridge.pass = PASS_OUT;
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
            check_next.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
        } else {
            /* a lane pass: the first block of values, lanes 0..31 or 32..63 (lane.p4) */
#define PAIR(i, j) lane_##i.apply(hdr.work.v##i, hdr.bridge);
#include "pairs.p4"
#undef PAIR
            if (hdr.bridge.pass == PASS_LO || hdr.bridge.pass == PASS_HI) {
                if (hdr.bridge.op != OP_READ) {
                    lane_marks.apply(hdr.work, meta.marks);
                }
                round_flags.apply(hdr.bridge, meta.marks != 0 || (hdr.ina.flags & FLAG_OVERFLOW) != 0);
                if (hdr.bridge.pass == PASS_LO) {
                    lo_next.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
                } else {
                    workers_counter.apply(hdr.bridge, meta);
                    hi_next.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
                }
            } else if (hdr.bridge.pass == PASS_HARVEST_LO) {
                harvest_lo_next.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
            } else {
                harvest_hi_next.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
            }
        }
        telemetry.apply(meta);
    }
}

control TnaEgress(inout tna_headers hdr, inout tna_egress_metadata meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    EgressAddressing() egress_addressing;

    apply {
        egress_addressing.apply(hdr, meta, eg_intr_md);
    }
}

Pipeline(TnaIngressParser(), TnaIngress(), TnaIngressDeparser(),
         TnaEgressParser(), TnaEgress(), TnaEgressDeparser()) pipe;

Switch(pipe) main;
