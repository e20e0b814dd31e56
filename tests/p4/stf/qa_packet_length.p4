// packet_length as simple_switch computes it: setValid()/setInvalid() (BMv2's
// add_header/remove_header) change the packet-length register that egress,
// multicast replicas and egress clones read; a write in ingress does not.
#include <core.p4>
#include <v1model.p4>

header a_t { bit<8> op; bit<8> len_i; bit<8> len_e; bit<8> inst; }
header b_t { bit<32> x; }
header c_t { bit<16> y; }
struct headers { a_t a; b_t b; c_t c; }
struct meta { }

parser P(packet_in pkt, out headers h, inout meta m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.a);
        transition select(h.a.op) { 5: withc; default: accept; }
    }
    state withc { pkt.extract(h.c); transition accept; }
}

control VC(inout headers h, inout meta m) { apply { } }

control I(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        h.a.len_i = (bit<8>)sm.packet_length;
        sm.egress_spec = 1;
        if (h.a.op == 1) { h.b.setValid(); h.b.x = 0x01020304; }
        else if (h.a.op == 2) { sm.packet_length = 0x77; sm.instance_type = 9; }
        else if (h.a.op == 3) { h.b.setValid(); h.b.setValid(); sm.mcast_grp = 1; }
        else if (h.a.op == 4) { h.b.setValid(); clone(CloneType.I2E, 5); }
        else if (h.a.op == 5) { h.c.setInvalid(); h.c.setInvalid(); h.b.setValid(); }
    }
}

control E(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        h.a.len_e = (bit<8>)sm.packet_length;
        h.a.inst = (bit<8>)sm.instance_type;
        if (h.a.op == 6 && sm.instance_type == 0) {
            h.b.setValid();
            clone(CloneType.E2E, 5);
        }
    }
}

control CC(inout headers h, inout meta m) { apply { } }

control D(packet_out pkt, in headers h) { apply { pkt.emit(h); } }

V1Switch(P(), VC(), I(), E(), CC(), D()) main;
