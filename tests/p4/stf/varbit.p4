/* varbit.p4: a header with a varbit field between fixed fields, as p4c + BMv2 run it.
 *  - extract(hdr.v, n) with n = ctl.len * 8 bits at run time (0 up to the maximum, 32);
 *  - more bits than the maximum: HeaderTooShort (checked after PacketTooShort);
 *  - too few bytes in the packet: PacketTooShort;
 *  - the failed header stays invalid and its bytes stay in the payload;
 *  - emit writes the extracted bytes; header assignment copies the varbit too.
 *
 * Packet: ctl_t (op, len, err), then v = kind, len bytes of data, tail.
 * The deparser emits ctl, v, v2. */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> len;
    bit<8> err;
}

header opt_t {
    bit<8> kind;
    varbit<32> data;
    bit<8> tail;
}

struct headers {
    ctl_t ctl;
    opt_t v;
    opt_t v2;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ctl);
        pkt.extract(hdr.v, (bit<32>)hdr.ctl.len * 8);
        transition accept;
    }
}

control MyVerify(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.HeaderTooShort) {
            hdr.ctl.err = 1;
        } else if (sm.parser_error == error.PacketTooShort) {
            hdr.ctl.err = 2;
        }
        if (hdr.ctl.op == 1) {
            hdr.v2 = hdr.v;
        } else if (hdr.ctl.op == 2) {
            hdr.v.tail = 0xFF;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyCompute(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.v);
        pkt.emit(hdr.v2);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
