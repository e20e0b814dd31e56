/* rw_mpls.p4: an MPLS label edge/switch router:
 *   - parser: a label stack of up to 4 entries with extract(next) in a
 *     loop that selects on last.bos; at the bottom, lastIndex + 1 gives the
 *     depth and a lookahead of the IP version nibble decides IPv4; a 5th
 *     label is StackOutOfBounds and ingress drops parser errors
 *   - labelled packets: lfib (exact on the top label): swap, pop (PHP: the
 *     TTL goes to the next label, or to IPv4 at the bottom of the stack)
 *     and swap_push (push an outer label above a swapped one); a full
 *     4-label stack goes to port 9 untouched; a miss drops
 *   - IPv4 packets: ftn (lpm on dstAddr): push one label (TTL - 1, copied
 *     to the label) or push two labels; a miss is routed as plain IPv4
 *     out of port 8 with TTL - 1
 *   - update_checksum of IPv4. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETH_IPV4 = 0x0800;
const bit<16> ETH_MPLS = 0x8847;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header mpls_t {
    bit<20> label;
    bit<3>  tc;
    bit<1>  bos;
    bit<8>  ttl;
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

struct metadata {
    bit<8> depth;
}

struct headers {
    ethernet_t ethernet;
    mpls_t[4]  mpls;
    ipv4_t     ipv4;
}

parser MplsParser(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETH_MPLS: parse_mpls;
            ETH_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_mpls {
        packet.extract(hdr.mpls.next);
        transition select(hdr.mpls.last.bos) {
            0: parse_mpls;
            1: parse_mpls_bos;
        }
    }
    state parse_mpls_bos {
        meta.depth = (bit<8>)hdr.mpls.lastIndex + 1;
        transition select(packet.lookahead<bit<4>>()) {
            4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MplsVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control MplsIngress(inout headers hdr, inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action swap(bit<20> label, bit<9> port) {
        hdr.mpls[0].label = label;
        hdr.mpls[0].ttl = hdr.mpls[0].ttl - 1;
        standard_metadata.egress_spec = port;
    }
    action pop(bit<9> port) {
        if (hdr.mpls[0].bos == 1) {
            hdr.ipv4.ttl = hdr.mpls[0].ttl - 1;
            hdr.ethernet.etherType = ETH_IPV4;
        } else {
            hdr.mpls[1].ttl = hdr.mpls[0].ttl - 1;
        }
        hdr.mpls.pop_front(1);
        standard_metadata.egress_spec = port;
    }
    action swap_push(bit<20> label, bit<20> outer, bit<9> port) {
        hdr.mpls[0].label = label;
        hdr.mpls[0].ttl = hdr.mpls[0].ttl - 1;
        hdr.mpls.push_front(1);
        hdr.mpls[0].setValid();
        hdr.mpls[0].label = outer;
        hdr.mpls[0].tc = hdr.mpls[1].tc;
        hdr.mpls[0].bos = 0;
        hdr.mpls[0].ttl = hdr.mpls[1].ttl;
        standard_metadata.egress_spec = port;
    }
    table lfib {
        key = { hdr.mpls[0].label: exact; }
        actions = { swap; pop; swap_push; drop; }
        default_action = drop();
    }

    action push(bit<20> label, bit<3> tc, bit<9> port) {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.mpls.push_front(1);
        hdr.mpls[0].setValid();
        hdr.mpls[0].label = label;
        hdr.mpls[0].tc = tc;
        hdr.mpls[0].bos = 1;
        hdr.mpls[0].ttl = hdr.ipv4.ttl;
        hdr.ethernet.etherType = ETH_MPLS;
        standard_metadata.egress_spec = port;
    }
    action push2(bit<20> inner, bit<20> outer, bit<9> port) {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        hdr.mpls.push_front(2);
        hdr.mpls[0].setValid();
        hdr.mpls[1].setValid();
        hdr.mpls[1].label = inner;
        hdr.mpls[1].tc = 0;
        hdr.mpls[1].bos = 1;
        hdr.mpls[1].ttl = hdr.ipv4.ttl;
        hdr.mpls[0].label = outer;
        hdr.mpls[0].tc = 0;
        hdr.mpls[0].bos = 0;
        hdr.mpls[0].ttl = hdr.ipv4.ttl;
        hdr.ethernet.etherType = ETH_MPLS;
        standard_metadata.egress_spec = port;
    }
    action route() {
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        standard_metadata.egress_spec = 8;
    }
    table ftn {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { push; push2; route; }
        default_action = route();
    }

    apply {
        if (standard_metadata.parser_error != error.NoError) {
            drop();
            return;
        }
        if (hdr.mpls[0].isValid()) {
            if (meta.depth == 4) {
                standard_metadata.egress_spec = 9;
            } else {
                lfib.apply();
            }
        } else if (hdr.ipv4.isValid()) {
            ftn.apply();
        } else {
            drop();
        }
    }
}

control MplsEgress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    apply { }
}

control MplsCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MplsDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mpls);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MplsParser(), MplsVerify(), MplsIngress(), MplsEgress(),
         MplsCompute(), MplsDeparser()) main;
