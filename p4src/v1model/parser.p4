/* parser.p4: ina.p4's parser, checksum controls and deparser (v1model).
 *
 * Eth/IPv4/UDP(INA_UDP_PORT)/ina_t/values; anything else is accepted as far as it goes and
 * forwarded by IPv4.  A packet to our port without a whole header and values ends with a
 * parser error, which JobLookup counts as truncated.
 */
#ifndef INA_V1MODEL_PARSER_P4
#define INA_V1MODEL_PARSER_P4

parser InaParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { INA_UDP_PORT: parse_ina; default: accept; }
    }
    state parse_ina {
        pkt.extract(hdr.ina);
        pkt.extract(hdr.values);
        transition accept;
    }
}

control InaVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control InaComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control InaDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ina);
        pkt.emit(hdr.values);
    }
}

#endif
