/* parser.p4: ina.p4's parser, checksum controls and deparser (v1model).
 *
 * Eth/IPv4/UDP(INA_UDP_PORT)/ina_t/values: the states are ../common/parse_wire.p4, which
 * the TNA program's parsers include too.  A packet to our port without a whole header and
 * values ends with a parser error, which JobLookup counts as truncated.
 */
#ifndef INA_V1MODEL_PARSER_P4
#define INA_V1MODEL_PARSER_P4

parser InaParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    /* the packet begins at Ethernet: the shared states start there */
#define INA_PARSE_ETHERNET start
#include "../common/parse_wire.p4"
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
