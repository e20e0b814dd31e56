/* rw_arp_icmp.p4: the switch answers ARP requests and ICMP echo requests
 * for its own addresses and sends the answers back out of the ingress port:
 *   - my_addresses (exact on the IPv4 address asked for) -> my_mac(mac)
 *   - ARP request for one of them: ARP reply (oper 2, sender/target
 *     swapped, sender MAC = the switch's), Ethernet addresses swapped
 *   - ICMP echo request (type 8) to one of them: echo reply (type 0), IPv4
 *     addresses swapped, TTL 64, the ICMP checksum recomputed over the ICMP
 *     header and the echo data (update_checksum_with_payload)
 *   - everything else: l2 (exact on the destination MAC) or flood-less drop
 *   - update_checksum of IPv4. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETH_ARP = 0x0806;
const bit<16> ETH_IPV4 = 0x0800;
const bit<16> ARP_REQUEST = 1;
const bit<16> ARP_REPLY = 2;
const bit<8>  ICMP_ECHO_REQUEST = 8;
const bit<8>  ICMP_ECHO_REPLY = 0;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header arp_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8>  hlen;
    bit<8>  plen;
    bit<16> oper;
    bit<48> sha;
    bit<32> spa;
    bit<48> tha;
    bit<32> tpa;
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

header icmp_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
    bit<16> identifier;
    bit<16> sequence;
}

struct metadata {
    bit<32> query_ip;
}

struct headers {
    ethernet_t ethernet;
    arp_t      arp;
    ipv4_t     ipv4;
    icmp_t     icmp;
}

parser RParser(packet_in packet, out headers hdr, inout metadata meta,
               inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETH_ARP: parse_arp;
            ETH_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_arp {
        packet.extract(hdr.arp);
        meta.query_ip = hdr.arp.tpa;
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.query_ip = hdr.ipv4.dstAddr;
        transition select(hdr.ipv4.protocol) {
            1: parse_icmp;
            default: accept;
        }
    }
    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }
}

control RVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control RIngress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    bit<48> my_mac_addr = 0;
    bool    mine = false;

    action my_mac(bit<48> mac) {
        my_mac_addr = mac;
        mine = true;
    }
    table my_addresses {
        key = { meta.query_ip: exact; }
        actions = { my_mac; NoAction; }
        default_action = NoAction();
    }

    action arp_reply() {
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = my_mac_addr;
        hdr.arp.oper = ARP_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.sha = my_mac_addr;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.spa = meta.query_ip;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
    action echo_reply() {
        bit<48> tmp_mac = hdr.ethernet.dstAddr;
        hdr.ethernet.dstAddr = hdr.ethernet.srcAddr;
        hdr.ethernet.srcAddr = tmp_mac;
        bit<32> tmp_ip = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = tmp_ip;
        hdr.ipv4.ttl = 64;
        hdr.icmp.type = ICMP_ECHO_REPLY;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    action l2_forward(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { l2_forward; drop; }
        default_action = drop();
    }

    apply {
        if (hdr.arp.isValid() || hdr.ipv4.isValid()) {
            my_addresses.apply();
        }
        if (mine && hdr.arp.isValid() && hdr.arp.oper == ARP_REQUEST) {
            arp_reply();
        } else if (mine && hdr.icmp.isValid() && hdr.icmp.type == ICMP_ECHO_REQUEST) {
            echo_reply();
        } else {
            l2.apply();
        }
    }
}

control REgress(inout headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    apply { }
}

control RCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.icmp.isValid() && hdr.icmp.type == ICMP_ECHO_REPLY,
            { hdr.icmp.type, hdr.icmp.code, hdr.icmp.identifier, hdr.icmp.sequence },
            hdr.icmp.checksum, HashAlgorithm.csum16);
    }
}

control RDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.icmp);
    }
}

V1Switch(RParser(), RVerify(), RIngress(), REgress(), RCompute(), RDeparser()) main;
