// standard_metadata written in ingress that simple_switch overwrites before
// egress (a program with no clone/resubmit/recirculate/setValid).
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> op; bit<8> len_i; bit<8> len_e; bit<8> inst; }
struct headers { a_t a; }
struct meta { }

parser P(packet_in pkt, out headers h, inout meta m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.a); transition accept; }
}

control VC(inout headers h, inout meta m) { apply { } }

control I(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        h.a.len_i = (bit<8>)sm.packet_length;
        sm.egress_spec = 1;
        sm.packet_length = 0x77;
        sm.instance_type = 9;
        if (h.a.op == 1) { sm.mcast_grp = 1; }
    }
}

control E(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        h.a.len_e = (bit<8>)sm.packet_length;
        h.a.inst = (bit<8>)sm.instance_type;
        sm.egress_spec = 3;  // ignored: the packet leaves on egress_port
    }
}

control CC(inout headers h, inout meta m) { apply { } }

control D(packet_out pkt, in headers h) { apply { pkt.emit(h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
