/* ina.p4: in-network aggregation of int32 gradient chunks (v1model).
 *
 * A chunk of INA_VALUES int32 values travels as Eth/IPv4/UDP(INA_UDP_PORT)/ina_t/values.
 * The switch sums the chunks of a job's children slot by slot, SwitchML-style (two sets
 * per slot, a bitmap pair per slot so the shadow set clears itself), and when all children
 * have contributed either multicasts the result (root) or sends the partial sum to its
 * parent (non-root).  docs/protocol.md states the state machine and why it stays exact
 * under loss, duplication and reordering.  Everything else is forwarded by IPv4 LPM.
 *
 * This file only wires the controls; each function is one control in v1model/.  (The TNA
 * program in tofino/ splits differently, 14 controls for these 9, as its state is laid out
 * for Tofino; both include ../common/: parse states, egress addressing, Verdict.)  Tables, registers and counters keep their
 * InaIngress.* control-plane names through @name, so the P4Info is that of a single control.
 *
 * Knobs (-D): INA_VALUES (default 256), INA_UDP_PORT_NUMBER, INA_POOL_SLOTS (default 1024
 * slots for all jobs together), INA_MAX_JOBS (default 64, telemetry cells).
 */
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"
#include "v1model/metadata.p4"
#include "v1model/parser.p4"
#include "v1model/forwarding.p4"
#include "v1model/job_lookup.p4"
#include "v1model/round_check.p4"
#include "v1model/value_lanes.p4"
#include "v1model/exponent_overflow.p4"
#include "v1model/send_result.p4"
#include "v1model/telemetry.p4"
#include "v1model/egress.p4"

control InaIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Forwarding() forwarding;                    // plain IPv4; truncated aggregation packets
    JobLookup() job_lookup;                     // jobs table; refuses what cannot be aggregated
    RoundCheck() round_check;                   // round, bitmap pair, arrivals
    ExponentAndOverflow() exponent_overflow;    // the slot's flags and max exponent
    ValueLanes() value_lanes;                   // the INA_VALUES sums
    SendResult() send_result;                   // multicast, unicast, up to the parent, or drop
    Telemetry() telemetry;                      // job_stats and drops counters

    apply {
        if (!hdr.ina.isValid()) {
            forwarding.apply(hdr.ethernet, hdr.ipv4, hdr.udp, meta, sm);
        } else {
            job_lookup.apply(hdr.ina, sm.ingress_port, sm.parser_error, meta);
            if (meta.verdict == Verdict.CHECKED || meta.verdict == Verdict.PASS_DOWN) {
                round_check.apply(hdr.ina.msg_type, hdr.ina.flags, hdr.ina.seq, meta);
            }
            if (meta.verdict == Verdict.ANSWER || meta.verdict == Verdict.FIRST || meta.verdict == Verdict.ADD
                    || meta.verdict == Verdict.KEEP) {
                value_lanes.apply(meta.verdict, meta.cell, hdr.values, meta.lane_overflow);
                exponent_overflow.apply(meta.verdict, meta.cell, meta.lane_overflow, meta.completed,
                                        hdr.ina.flags, hdr.ina.exponent);
            }
            send_result.apply(hdr.ina.msg_type, hdr.ina.child, hdr.udp.checksum, meta, sm);
        }
        telemetry.apply(meta);
    }
}

V1Switch(InaParser(), InaVerifyChecksum(), InaIngress(), InaEgress(), InaComputeChecksum(), InaDeparser()) main;
