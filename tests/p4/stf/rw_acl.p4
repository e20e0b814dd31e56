/* rw_acl.p4: a stateless firewall:
 *   - acl: ternary on srcAddr, dstAddr, protocol and the L4 destination
 *     port, entries from the control plane with priorities; actions allow,
 *     deny, allow_and_mark(dscp); default deny; a direct counter on it
 *   - service (const entries): range on the L4 destination port -> egress
 *     port by service class (well-known 1, registered 2, dynamic 3); an
 *     indexed counter counts packets per class
 *   - update_checksum because allow_and_mark rewrites the DSCP. */
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
    bit<6>  dscp;
    bit<2>  ecn;
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

header ports_t {
    bit<16> srcPort;
    bit<16> dstPort;
}

struct metadata {
    bit<16> l4_dst;
    bit<1>  allowed;
    bit<8>  class;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    ports_t    ports;
}

parser FwParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_ports;
            17: parse_ports;
            default: accept;
        }
    }
    state parse_ports {
        pkt.extract(hdr.ports);
        meta.l4_dst = hdr.ports.dstPort;
        transition accept;
    }
}

control FwVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control FwIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t std) {
    direct_counter(CounterType.packets_and_bytes) acl_counter;
    counter(4, CounterType.packets) class_counter;

    action allow() {
        meta.allowed = 1;
    }
    action deny() {
        meta.allowed = 0;
        mark_to_drop(std);
    }
    action allow_and_mark(bit<6> dscp) {
        meta.allowed = 1;
        hdr.ipv4.dscp = dscp;
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr  : ternary;
            hdr.ipv4.dstAddr  : ternary;
            hdr.ipv4.protocol : ternary;
            meta.l4_dst       : ternary;
        }
        actions = { allow; deny; allow_and_mark; }
        default_action = deny();
        counters = acl_counter;
        size = 256;
    }

    action set_class(bit<8> c, bit<9> port) {
        meta.class = c;
        std.egress_spec = port;
    }
    table service {
        key = { meta.l4_dst: range; }
        actions = { set_class; NoAction; }
        const entries = {
            0 .. 1023      : set_class(1, 1);
            1024 .. 49151  : set_class(2, 2);
            49152 .. 65535 : set_class(3, 3);
        }
        default_action = NoAction();
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            mark_to_drop(std);
            exit;
        }
        acl.apply();
        if (meta.allowed == 1) {
            service.apply();
            class_counter.count((bit<32>)meta.class);
        }
    }
}

control FwEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t std) {
    apply { }
}

control FwCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control FwDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ports);
    }
}

V1Switch(FwParser(), FwVerify(), FwIngress(), FwEgress(), FwCompute(),
         FwDeparser()) main;
