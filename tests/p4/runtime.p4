/* runtime.p4: one of every object the P4Runtime server handles, for the gRPC tests.
 * Frames: ethernet (etherType picks the path), then a 4-byte "tag" header.
 *   - from the CPU port: a packet_out header (egress port) comes first; it is forwarded there.
 *   - etherType 0x88B5: t_exact (tag.a) sets the egress port or a multicast group;
 *     t_tern (tag.b, ternary) writes tag.c; t_lpm (tag.d) counted by a direct counter;
 *     t_const has const entries and a const default; the per-port counter counts frames.
 *   - tag.a == 0xFF: sent to the CPU port with a packet_in header (ingress port).
 */
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 255

@controller_header("packet_out")
header packet_out_header_t {
    bit<9> egress_port;
    bit<7> _pad;
}

@controller_header("packet_in")
header packet_in_header_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header tag_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }

struct headers {
    packet_out_header_t packet_out;
    packet_in_header_t  packet_in;
    ethernet_t          ethernet;
    tag_t               tag;
}
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { pkt.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x88B5: parse_tag; default: accept; }
    }
    state parse_tag { pkt.extract(hdr.tag); transition accept; }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) lpm_counter;
    register<bit<32>>(16) last_seen;

    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action flood(bit<16> group) { sm.mcast_grp = group; }
    action set_c(bit<8> c) { hdr.tag.c = c; }
    action mark_d(bit<8> d) { hdr.tag.d = d; }
    action const_mark(bit<8> v) { hdr.tag.b = v; }

    table t_exact {
        key = { hdr.tag.a: exact; }
        actions = { forward; flood; drop; }
        default_action = drop();
        size = 4;
    }
    table t_tern {
        key = { hdr.tag.b: ternary; }
        actions = { set_c; NoAction; }
        default_action = NoAction();
    }
    table t_lpm {
        key = { hdr.tag.d: lpm; }
        actions = { mark_d; NoAction; }
        counters = lpm_counter;
        default_action = NoAction();
    }
    table t_const {
        key = { hdr.tag.c: exact; }
        actions = { const_mark; NoAction; }
        const default_action = NoAction();
        const entries = { 0x77: const_mark(0x66); }
    }

    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            return;
        }
        port_counter.count((bit<32>)sm.ingress_port);
        last_seen.write(0, (bit<32>)sm.ingress_port);
        if (!hdr.tag.isValid()) { mark_to_drop(sm); return; }
        if (hdr.tag.a == 0xFF) {
            sm.egress_spec = CPU_PORT;
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
            return;
        }
        t_exact.apply();
        t_tern.apply();
        t_lpm.apply();
        t_const.apply();
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.packet_in); pkt.emit(hdr.ethernet); pkt.emit(hdr.tag); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
