/* rw_nat.p4: source and destination NAT for TCP and UDP:
 *   - the parser computes the L4 length (totalLen - ihl * 4) and copies
 *     the L4 ports into metadata
 *   - verify_checksum_with_payload checks the TCP checksum (pseudo-header,
 *     TCP header, payload); ingress drops a bad one
 *   - snat (exact on srcAddr and the source port) rewrites the source,
 *     dnat (exact on dstAddr and the destination port) the destination;
 *     then ipv4_lpm picks the port and decrements TTL
 *   - update_checksum for IPv4, update_checksum_with_payload for TCP, and
 *     for UDP only when its checksum is not 0 (0 means "none" in UDP). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header tcp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<32> seqNo;
    bit<32> ackNo;
    bit<4>  dataOffset;
    bit<3>  res;
    bit<3>  ecn;
    bit<6>  ctrl;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgentPtr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length_;
    bit<16> checksum;
}

struct metadata {
    bit<16> l4_len;
    bit<16> l4_src;
    bit<16> l4_dst;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    tcp_t      tcp;
    udp_t      udp;
}

parser NatParser(packet_in packet, out headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.l4_len = hdr.ipv4.totalLen - ((bit<16>)hdr.ipv4.ihl << 2);
        transition select(hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (0, 6): parse_tcp;
            (0, 17): parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src = hdr.tcp.srcPort;
        meta.l4_dst = hdr.tcp.dstPort;
        transition accept;
    }
    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src = hdr.udp.srcPort;
        meta.l4_dst = hdr.udp.dstPort;
        transition accept;
    }
}

control NatVerify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum_with_payload(hdr.tcp.isValid(),
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              meta.l4_len,
              hdr.tcp.srcPort, hdr.tcp.dstPort, hdr.tcp.seqNo, hdr.tcp.ackNo,
              hdr.tcp.dataOffset, hdr.tcp.res, hdr.tcp.ecn, hdr.tcp.ctrl,
              hdr.tcp.window, hdr.tcp.urgentPtr },
            hdr.tcp.checksum, HashAlgorithm.csum16);
    }
}

control NatIngress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action snat(bit<32> ip, bit<16> port) {
        hdr.ipv4.srcAddr = ip;
        if (hdr.tcp.isValid()) {
            hdr.tcp.srcPort = port;
        } else {
            hdr.udp.srcPort = port;
        }
    }
    action dnat(bit<32> ip, bit<16> port) {
        hdr.ipv4.dstAddr = ip;
        if (hdr.tcp.isValid()) {
            hdr.tcp.dstPort = port;
        } else {
            hdr.udp.dstPort = port;
        }
    }
    table snat_t {
        key = { hdr.ipv4.srcAddr: exact; meta.l4_src: exact; }
        actions = { snat; NoAction; }
        default_action = NoAction();
    }
    table dnat_t {
        key = { hdr.ipv4.dstAddr: exact; meta.l4_dst: exact; }
        actions = { dnat; NoAction; }
        default_action = NoAction();
    }
    action forward(bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        if (!hdr.ipv4.isValid() || standard_metadata.checksum_error == 1) {
            drop();
            return;
        }
        if (hdr.tcp.isValid() || hdr.udp.isValid()) {
            snat_t.apply();
            dnat_t.apply();
        }
        ipv4_lpm.apply();
    }
}

control NatEgress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control NatCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.tcp.isValid(),
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              meta.l4_len,
              hdr.tcp.srcPort, hdr.tcp.dstPort, hdr.tcp.seqNo, hdr.tcp.ackNo,
              hdr.tcp.dataOffset, hdr.tcp.res, hdr.tcp.ecn, hdr.tcp.ctrl,
              hdr.tcp.window, hdr.tcp.urgentPtr },
            hdr.tcp.checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid() && hdr.udp.checksum != 0,
            { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, 8w0, hdr.ipv4.protocol,
              hdr.udp.length_, hdr.udp.srcPort, hdr.udp.dstPort,
              hdr.udp.length_ },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control NatDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

V1Switch(NatParser(), NatVerify(), NatIngress(), NatEgress(), NatCompute(),
         NatDeparser()) main;
