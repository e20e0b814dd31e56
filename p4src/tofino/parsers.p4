/* parsers.p4: ingress and egress parsers and deparsers.
 *
 * A packet from the wire starts at Ethernet.  A packet coming back from the recirculation
 * port starts with the bridge header (what its previous pass decided).  From Ethernet on,
 * both parsers use the states ina.p4's parser uses (../common/parse_wire.p4), up to the INA
 * header; the values are this file's.
 *
 * The values, 64 int32 in two blocks of 32.  The lanes touch `work` and the deparser emits
 * `rest` then `work`.  From the wire, the first block goes to `rest` and the second to `work`,
 * so the packet leaves as it came.  Back from the recirculation port (a lane pass), the first
 * block goes to `work`: the lanes take it, and the packet leaves with its blocks swapped.  So
 * pass LO touches lanes 0..31 and pass HI, next, lanes 32..63; the two harvest passes read
 * them in the same order and swap the blocks back.  One header for the lanes means one PHV
 * operand per stateful ALU; `rest` is only carried, so it may sit in tag-along containers.
 *
 * Egress only addresses: it parses up to the INA header and leaves the values in the payload.
 */
#ifndef INA_TNA_PARSERS_P4
#define INA_TNA_PARSERS_P4

parser TnaIngressParser(packet_in pkt, out tna_headers hdr, out tna_ingress_metadata meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        // Tofino does not zero metadata: every field starts at 0 here (types.p4 lists them)
        meta.check_pass = 0; meta.verdict = Verdict.CHECKED; meta.me = 0; meta.slot_index = 0; meta.cell = 0;
        meta.slot_slack = 0; meta.children = 0; meta.is_root = 0;
        meta.group = 0; meta.parent_port = 0; meta.index_at_parent = 0; meta.epoch = 0;
        meta.stats_base = 0; meta.from_parent = 0; meta.old_epoch = 0; meta.seq_distance = 0; meta.round = 0;
        meta.old_bitmap = 0; meta.map_result = 0; meta.marks = 0;
        meta.remaining = 0; meta.exponent_code = 0; meta.count_drop = 0; meta.drop_reason = 0;
        meta.count_job = 0; meta.job_stat = 0;
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition select(ig_intr_md.ingress_port) {
            INA_RECIRC_PORT: parse_bridge;
            default: from_wire;
        }
    }
    state from_wire {
        meta.check_pass = 1;     // set here, so the passes' gateways depend on no table
        transition parse_ethernet;
    }
    state parse_bridge {
        pkt.extract(hdr.bridge);
        transition parse_ethernet;
    }
#define INA_VALUES_STATE parse_values
#include "../common/parse_wire.p4"
    state parse_values {
        transition select(ig_intr_md.ingress_port) {
            INA_RECIRC_PORT: parse_lane_pass;
            default: parse_as_sent;
        }
    }
    state parse_as_sent {
        pkt.extract(hdr.rest);
        pkt.extract(hdr.work);
        transition accept;
    }
    state parse_lane_pass {
        pkt.extract(hdr.work);
        pkt.extract(hdr.rest);
        transition accept;
    }
}

control TnaIngressDeparser(packet_out pkt, inout tna_headers hdr, in tna_ingress_metadata meta,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply {
        pkt.emit(hdr.bridge);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ina);
        pkt.emit(hdr.rest);
        pkt.emit(hdr.work);
    }
}

parser TnaEgressParser(packet_in pkt, out tna_headers hdr, out tna_egress_metadata meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        meta.receiver = 0;
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.bridge);   // ingress bridges every packet it sends to egress
        transition parse_ethernet;
    }
#define INA_VALUES_STATE accept
#include "../common/parse_wire.p4"
}

control TnaEgressDeparser(packet_out pkt, inout tna_headers hdr, in tna_egress_metadata meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_checksum;
    apply {
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.checksum = ipv4_checksum.update({
                hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
                hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst });
        }
        pkt.emit(hdr.bridge);     // egress invalidates it: nothing inside the switch follows egress
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ina);
    }
}

#endif
