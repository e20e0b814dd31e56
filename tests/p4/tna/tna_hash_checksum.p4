/* Hash (CRC16, CRC32, IDENTITY), Checksum (add/verify in the parser, update in the
 * deparser) and Counter.  Ingress writes crc16(src, dst) into eth.src[47:32],
 * crc32(src, dst) into eth.src[31:0], identity(ttl, protocol) into eth.dst[15:0],
 * marks a bad IPv4 checksum with diffserv 0xEE, decrements ttl, counts per protocol;
 * the ingress deparser recomputes the checksum. */
#include <core.p4>
#include <tna.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_h {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> total_len;
    bit<16> identification; bit<3> flags; bit<13> frag_offset;
    bit<8> ttl; bit<8> protocol; bit<16> hdr_checksum;
    bit<32> src_addr; bit<32> dst_addr;
}
struct headers_t { ethernet_h ethernet; ipv4_h ipv4; }
struct meta_t { bool csum_ok; }
struct eg_meta_t { }

parser IgParser(packet_in pkt, out headers_t hdr, out meta_t md, out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_csum;
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        ipv4_csum.add(hdr.ipv4);
        md.csum_ok = ipv4_csum.verify();
        transition accept;
    }
}

control Ig(inout headers_t hdr, inout meta_t md,
           in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Hash<bit<16>>(HashAlgorithm_t.CRC16) crc16;
    Hash<bit<32>>(HashAlgorithm_t.CRC32) crc32;
    Hash<bit<16>>(HashAlgorithm_t.IDENTITY) ident;
    Counter<bit<32>, bit<8>>(4, CounterType_t.PACKETS_AND_BYTES) by_proto;
    apply {
        ig_tm_md.ucast_egress_port = 1;
        if (!hdr.ipv4.isValid()) {
            by_proto.count(3);
            exit;
        }
        hdr.ethernet.src[47:32] = crc16.get({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        hdr.ethernet.src[31:0] = crc32.get({hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        hdr.ethernet.dst[15:0] = ident.get({hdr.ipv4.ttl, hdr.ipv4.protocol});
        if (!md.csum_ok) {
            hdr.ipv4.diffserv = 0xEE;
        }
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        by_proto.count((bit<8>) hdr.ipv4.protocol[1:0]);
    }
}

control IgDeparser(packet_out pkt, inout headers_t hdr, in meta_t md,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_csum;
    apply {
        hdr.ipv4.hdr_checksum = ipv4_csum.update({
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr});
        pkt.emit(hdr);
    }
}

parser EgParser(packet_in pkt, out headers_t hdr, out eg_meta_t md, out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}

control Eg(inout headers_t hdr, inout eg_meta_t md, in egress_intrinsic_metadata_t eg_intr_md) {
    apply { }
}

control EgDeparser(packet_out pkt, inout headers_t hdr, in eg_meta_t md) {
    apply { pkt.emit(hdr); }
}

Pipeline(IgParser(), Ig(), IgDeparser(), EgParser(), Eg(), EgDeparser()) pipe;
Switch(pipe) main;
