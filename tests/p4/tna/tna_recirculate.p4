/* Recirculation: a copy sent to a recirculation port (68) comes back into ingress on
 * that port, with what the ingress deparser emitted; each pass may use its registers
 * afresh. Egress writes the egress port into ether_type (as tna_forward.p4). */
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
    apply {
        // Each pass through ingress adds one to the top byte of dst; a frame from a
        // front port goes round the loopback (port 68) until that byte is 3.
        hdr.ethernet.dst = hdr.ethernet.dst + 48w0x010000000000;
        if (hdr.ethernet.dst[47:40] != 3) {
            ig_tm_md.ucast_egress_port = 68;
            ig_tm_md.bypass_egress = 1;
        } else {
            ig_tm_md.ucast_egress_port = 1;
        }
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
