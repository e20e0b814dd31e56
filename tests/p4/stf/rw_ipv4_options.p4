/* rw_ipv4_options.p4: IPv4 with options as a varbit header:
 *   - parser: the options are extracted with the two-argument extract, the
 *     length (ihl - 5) * 32 bits computed from ihl; ihl < 5 makes the length
 *     wrap past the varbit's maximum (HeaderTooShort); UDP after the options
 *   - verify_checksum only for ihl == 5 (options skipped); ingress drops
 *     parser and checksum errors
 *   - ipv4_host (exact on dstAddr) -> forward(port, strip): TTL - 1, and
 *     with strip = 1 the options are removed (setInvalid, ihl := 5,
 *     totalLen reduced); update_checksum only for ihl == 5, so a packet
 *     that keeps its options keeps its old checksum
 *   - the UDP destination port is copied into the metadata to show that
 *     UDP was found after the options. */
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

header ipv4_options_t {
    varbit<320> options;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length_;
    bit<16> checksum;
}

struct metadata { }

struct headers {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    udp_t          udp;
}

parser OptParser(packet_in packet, out headers hdr, inout metadata meta,
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
        transition select(hdr.ipv4.ihl) {
            5: dispatch_on_protocol;
            default: parse_ipv4_options;
        }
    }
    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options,
                       (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
        transition dispatch_on_protocol;
    }
    state dispatch_on_protocol {
        transition select(hdr.ipv4.protocol) {
            17: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }
}

control OptVerify(inout headers hdr, inout metadata meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control OptIngress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action forward(bit<9> port, bit<1> strip) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        if (strip == 1 && hdr.ipv4_options.isValid()) {
            hdr.ipv4.totalLen = hdr.ipv4.totalLen - (((bit<16>)hdr.ipv4.ihl - 5) << 2);
            hdr.ipv4.ihl = 5;
            hdr.ipv4_options.setInvalid();
        }
    }
    table ipv4_host {
        key = { hdr.ipv4.dstAddr: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        if (standard_metadata.parser_error != error.NoError ||
            standard_metadata.checksum_error == 1 || !hdr.ipv4.isValid()) {
            drop();
            return;
        }
        ipv4_host.apply();
        if (hdr.udp.isValid() && hdr.udp.dstPort == 53) {
            standard_metadata.egress_spec = 7;
        }
    }
}

control OptEgress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    apply { }
}

control OptCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv,
              hdr.ipv4.totalLen, hdr.ipv4.identification,
              hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control OptDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.udp);
    }
}

V1Switch(OptParser(), OptVerify(), OptIngress(), OptEgress(), OptCompute(),
         OptDeparser()) main;
