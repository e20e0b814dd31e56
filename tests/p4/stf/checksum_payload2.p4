/* checksum_payload2.p4: checksums whose inputs hold varbit fields, as
 * real L4 programs need them:
 *   - IPv4 options are a varbit<320> of the IPv4 header (length from ihl);
 *     verify_checksum and update_checksum sum them with the base header
 *   - TCP options are a varbit<320> of a header of their own (length from
 *     dataOffset); verify_checksum_with_payload and
 *     update_checksum_with_payload sum the pseudo-header, the TCP header,
 *     the options and then the payload (what follows the parsed headers)
 *   - UDP: update_checksum_with_payload after IPv4 options
 *   - a checksum error of either kind sends the packet unchanged to port 3
 *     (the update conditions read a metadata flag); otherwise TTL - 1 and
 *     L4 source port + 1, to port 2, with all checksums recomputed. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      diffserv;
    bit<16>     totalLen;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     fragOffset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdrChecksum;
    bit<32>     srcAddr;
    bit<32>     dstAddr;
    varbit<320> options;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header tcp_options_t {
    varbit<320> data;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length_;
    bit<16> checksum;
}

struct headers {
    ethernet_t    ethernet;
    ipv4_t        ipv4;
    tcp_t         tcp;
    tcp_options_t tcp_options;
    udp_t         udp;
}

struct metadata {
    bit<16> l4_len;
    bit<1>  keep;
}

parser CkParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    bit<8> ver_ihl;

    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        ver_ihl = packet.lookahead<bit<8>>();
        /* options: ihl * 32 - 160 bits */
        packet.extract(hdr.ipv4, ((bit<32>)ver_ihl[3:0] << 5) - 160);
        meta.l4_len = hdr.ipv4.totalLen - ((bit<16>)hdr.ipv4.ihl << 2);
        transition select(hdr.ipv4.protocol) {
            6: parse_tcp;
            17: parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        packet.extract(hdr.tcp_options, ((bit<32>)hdr.tcp.dataOffset << 5) - 160);
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control CkVerify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
              hdr.ipv4.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        verify_checksum_with_payload(hdr.tcp.isValid(),
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              meta.l4_len,
              hdr.tcp.srcPort, hdr.tcp.dstPort, hdr.tcp.seqNo, hdr.tcp.ackNo,
              hdr.tcp.dataOffset, hdr.tcp.res, hdr.tcp.flags,
              hdr.tcp.window, 16w0, hdr.tcp.urgentPtr,
              hdr.tcp_options.data },
            hdr.tcp.checksum, HashAlgorithm.csum16);
    }
}

control CkIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.checksum_error == 1) {
            meta.keep = 1;
            standard_metadata.egress_spec = 3;
            return;
        }
        standard_metadata.egress_spec = 2;
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
        if (hdr.tcp.isValid()) {
            hdr.tcp.srcPort = hdr.tcp.srcPort + 1;
        }
        if (hdr.udp.isValid()) {
            hdr.udp.srcPort = hdr.udp.srcPort + 1;
        }
    }
}

control CkEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control CkCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && meta.keep == 0,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
              hdr.ipv4.options },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.tcp.isValid() && meta.keep == 0,
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              meta.l4_len,
              hdr.tcp.srcPort, hdr.tcp.dstPort, hdr.tcp.seqNo, hdr.tcp.ackNo,
              hdr.tcp.dataOffset, hdr.tcp.res, hdr.tcp.flags,
              hdr.tcp.window, 16w0, hdr.tcp.urgentPtr,
              hdr.tcp_options.data },
            hdr.tcp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid() && meta.keep == 0,
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              meta.l4_len,
              hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.length_, 16w0 },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control CkDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.tcp_options);
        packet.emit(hdr.udp);
    }
}

V1Switch(CkParser(), CkVerify(), CkIngress(), CkEgress(), CkCompute(),
         CkDeparser()) main;
