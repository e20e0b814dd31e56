/* nic.p4: a streaming NIC (SmartNIC, DPU) that sums as data passes through it (NTT's NIC streaming).
 *
 * A NIC is an aggregation switch of ina.p4's semantics whose children are its own host and its upstream
 * neighbours on circuits, and whose parent is a downstream neighbour: a partial sum arriving on one
 * circuit has the host's slice added and leaves on another, and the result flows back the same way.
 * One addition to ina.p4: meeting roots (v1model/meeting.p4), the two ends of a circuit that exchange
 * their halves' sums, which NTT's optimised topologies need (docs/direct.md).  Everything else, tables,
 * counters, the wire (protocol.p4), is ina.p4's, so the controller writes a NIC's jobs as a switch's.
 *
 * Knobs (-D): ina.p4's; INA_MAX_JOBS defaults to 256 here (a mesh has a tree per meeting circuit).
 */
#ifndef INA_MAX_JOBS
#define INA_MAX_JOBS 256
#endif
#include <core.p4>
#include <v1model.p4>
#include "headers.p4"
#include "v1model/metadata.p4"
#include "v1model/parser.p4"
#include "v1model/forwarding.p4"
#include "v1model/job_lookup.p4"
#include "v1model/round_check.p4"
#include "v1model/meeting.p4"
#include "v1model/value_lanes.p4"
#include "v1model/exponent_overflow.p4"
#include "v1model/send_result.p4"
#include "v1model/telemetry.p4"
#include "v1model/egress.p4"

control InaIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Forwarding() forwarding;
    JobLookup() job_lookup;
    RoundCheck() round_check;
    Meeting() meeting;                          // the meeting roots' half sums
    ValueLanes() value_lanes;
    ExponentAndOverflow() exponent_overflow;
    SendResult() send_result;
    Telemetry() telemetry;

    apply {
        if (!hdr.ina.isValid()) {
            forwarding.apply(hdr.ethernet, hdr.ipv4, hdr.udp, meta, sm);
        } else {
            job_lookup.apply(hdr.ina, sm.ingress_port, sm.parser_error, meta);
            if (meta.verdict == Verdict.CHECKED || meta.verdict == Verdict.PASS_DOWN) {
                round_check.apply(hdr.ina.msg_type, hdr.ina.flags, hdr.ina.seq, meta);
                meeting.apply(hdr.ina.job_id, hdr.ina.msg_type, meta);
            }
            if (meta.verdict == Verdict.ANSWER || meta.verdict == Verdict.FIRST || meta.verdict == Verdict.ADD
                    || meta.verdict == Verdict.KEEP) {
                value_lanes.apply(meta.verdict, meta.cell, hdr.values, meta.lane_overflow);
                exponent_overflow.apply(meta.verdict, meta.cell, meta.lane_overflow, meta.completed | meta.to_peer,
                                        hdr.ina.flags, hdr.ina.exponent);
            }
            send_result.apply(hdr.ina.msg_type, hdr.ina.child, hdr.udp.checksum, meta, sm);
        }
        telemetry.apply(meta);
    }
}

V1Switch(InaParser(), InaVerifyChecksum(), InaIngress(), InaEgress(), InaComputeChecksum(), InaDeparser()) main;
