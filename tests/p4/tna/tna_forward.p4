/* TNA basics: the ingress parser skips the port metadata, a table sets
 * ucast_egress_port (or nothing: no copy), drop_ctl drops in ingress and in egress,
 * bypass_egress skips egress, mcast_grp_a replicates with egress_rid/egress_rid_first.
 * Ingress writes the ingress port into src; egress writes the egress port into
 * ether_type and ORs egress_rid << 16 and egress_rid_first << 40 into src. */
#include <core.p4>
#include <tna.p4>

header ethernet_h {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t { ethernet_h ethernet; }
struct ig_meta_t { bit<8> unused; }
struct eg_meta_t { }

parser SwitchIngressParser(packet_in pkt, out headers_t hdr, out ig_meta_t ig_md,
                           out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control SwitchIngress(inout headers_t hdr, inout ig_meta_t ig_md,
                      in ingress_intrinsic_metadata_t ig_intr_md,
                      in ingress_intrinsic_metadata_from_parser_t ig_intr_md_from_prsr,
                      inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                      inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action forward(PortId_t port) { ig_tm_md.ucast_egress_port = port; }
    action drop() { ig_dprsr_md.drop_ctl = 1; }
    action fast(PortId_t port) { ig_tm_md.ucast_egress_port = port; ig_tm_md.bypass_egress = 1; }
    action flood(MulticastGroupId_t group) { ig_tm_md.mcast_grp_a = group; }
    table fwd {
        key = { hdr.ethernet.dst : exact; }
        actions = { forward; drop; fast; flood; NoAction; }
        const entries = {
            48w0x000000000001 : forward(1);
            48w0x000000000002 : drop();
            48w0x000000000003 : fast(3);
            48w0x000000000004 : forward(4);
            48w0x000000000005 : flood(1);
        }
        default_action = NoAction();
    }
    apply {
        fwd.apply();
        hdr.ethernet.src = (bit<48>) ig_intr_md.ingress_port;
    }
}

control SwitchIngressDeparser(packet_out pkt, inout headers_t hdr, in ig_meta_t ig_md,
                              in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr); }
}

parser SwitchEgressParser(packet_in pkt, out headers_t hdr, out eg_meta_t eg_md,
                          out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control SwitchEgress(inout headers_t hdr, inout eg_meta_t eg_md,
                     in egress_intrinsic_metadata_t eg_intr_md,
                     in egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr,
                     inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                     inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply {
        hdr.ethernet.ether_type = (bit<16>) eg_intr_md.egress_port;
        hdr.ethernet.src = hdr.ethernet.src | ((bit<48>) eg_intr_md.egress_rid << 16)
                           | ((bit<48>) eg_intr_md.egress_rid_first << 40);
        if (hdr.ethernet.dst == 4) {
            eg_dprsr_md.drop_ctl = 1;
        }
    }
}

control SwitchEgressDeparser(packet_out pkt, inout headers_t hdr, in eg_meta_t eg_md,
                             in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr); }
}

Pipeline(SwitchIngressParser(), SwitchIngress(), SwitchIngressDeparser(),
         SwitchEgressParser(), SwitchEgress(), SwitchEgressDeparser()) pipe;

Switch(pipe) main;
