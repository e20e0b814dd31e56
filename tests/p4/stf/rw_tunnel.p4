/* rw_tunnel.p4: two kinds of tunnels:
 *   - the P4 tutorials' basic_tunnel header (EtherType 0x1212: proto_id,
 *     dst_id): encap in ipv4_lpm (setValid, copy the EtherType into
 *     proto_id), forward or decap (EtherType back, setInvalid) by dst_id
 *   - IP-in-IP (protocol 4): encap copies the inner IPv4 header into a new
 *     outer one (header assignment) and changes some of its fields; decap
 *     (exact on the outer destination = a local endpoint) removes it
 * The parser tells an IP-in-IP packet from plain IPv4 by a lookahead of the
 * IPv4 header.  Both IPv4 checksums are updated.  Emit order: ethernet,
 * tunnel, outer IPv4, IPv4; unparsed payload follows. */
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_MYTUNNEL = 0x1212;
const bit<16> TYPE_IPV4 = 0x800;
const bit<8>  PROTO_IPIP = 4;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header myTunnel_t {
    bit<16> proto_id;
    bit<16> dst_id;
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

struct metadata { }

struct headers {
    ethernet_t ethernet;
    myTunnel_t myTunnel;
    ipv4_t     outer_ipv4;
    ipv4_t     ipv4;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_MYTUNNEL: parse_myTunnel;
            TYPE_IPV4: parse_ip;
            default: accept;
        }
    }
    state parse_myTunnel {
        packet.extract(hdr.myTunnel);
        transition select(hdr.myTunnel.proto_id) {
            TYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ip {
        transition select(packet.lookahead<ipv4_t>().protocol) {
            PROTO_IPIP: parse_outer;
            default: parse_ipv4;
        }
    }
    state parse_outer {
        packet.extract(hdr.outer_ipv4);
        transition parse_ipv4;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action ipv4_forward(bit<48> dstAddr, bit<9> port) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = dstAddr;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action myTunnel_encap(bit<16> dst_id, bit<9> port) {
        hdr.myTunnel.setValid();
        hdr.myTunnel.dst_id = dst_id;
        hdr.myTunnel.proto_id = hdr.ethernet.etherType;
        hdr.ethernet.etherType = TYPE_MYTUNNEL;
        standard_metadata.egress_spec = port;
    }
    action ipip_encap(bit<32> src, bit<32> dst, bit<9> port) {
        hdr.outer_ipv4 = hdr.ipv4;
        hdr.outer_ipv4.totalLen = hdr.ipv4.totalLen + 20;
        hdr.outer_ipv4.identification = 0;
        hdr.outer_ipv4.flags = 2;
        hdr.outer_ipv4.fragOffset = 0;
        hdr.outer_ipv4.ttl = 64;
        hdr.outer_ipv4.protocol = PROTO_IPIP;
        hdr.outer_ipv4.srcAddr = src;
        hdr.outer_ipv4.dstAddr = dst;
        standard_metadata.egress_spec = port;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { ipv4_forward; myTunnel_encap; ipip_encap; drop; NoAction; }
        size = 1024;
        default_action = drop();
    }

    action myTunnel_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action myTunnel_decap(bit<9> port) {
        hdr.ethernet.etherType = hdr.myTunnel.proto_id;
        hdr.myTunnel.setInvalid();
        standard_metadata.egress_spec = port;
    }
    table myTunnel_exact {
        key = { hdr.myTunnel.dst_id: exact; }
        actions = { myTunnel_forward; myTunnel_decap; drop; }
        size = 1024;
        default_action = drop();
    }

    action ipip_decap(bit<9> port) {
        hdr.outer_ipv4.setInvalid();
        standard_metadata.egress_spec = port;
    }
    table tunnel_term {
        key = { hdr.outer_ipv4.dstAddr: exact; }
        actions = { ipip_decap; drop; }
        default_action = drop();
    }

    apply {
        if (hdr.myTunnel.isValid()) {
            myTunnel_exact.apply();
        } else if (hdr.outer_ipv4.isValid()) {
            tunnel_term.apply();
        } else if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
        } else {
            drop();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.outer_ipv4.isValid(),
            { hdr.outer_ipv4.version, hdr.outer_ipv4.ihl, hdr.outer_ipv4.diffserv,
              hdr.outer_ipv4.totalLen, hdr.outer_ipv4.identification,
              hdr.outer_ipv4.flags, hdr.outer_ipv4.fragOffset, hdr.outer_ipv4.ttl,
              hdr.outer_ipv4.protocol, hdr.outer_ipv4.srcAddr, hdr.outer_ipv4.dstAddr },
            hdr.outer_ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.myTunnel);
        packet.emit(hdr.outer_ipv4);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
