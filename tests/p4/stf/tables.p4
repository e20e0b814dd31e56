/* tables.p4: exact, lpm and ternary tables filled from the STF file,
 * default actions (plain, const, and changed by setdefault), .apply().hit,
 * switch on .apply().action_run (with a fall-through label and default), and
 * an action whose directional (out) parameter is bound in the actions list. */
#include <core.p4>
#include <v1model.p4>

header d_t {
    bit<8>  op;     // key of t_exact, t_switch and t_dir
    bit<8>  tkey;   // key of t_tern
    bit<32> addr;   // key of t_lpm
    bit<8>  r1;     // t_exact result
    bit<8>  r2;     // t_tern result
    bit<8>  r3;     // t_switch action and switch-branch result
    bit<8>  r5;     // t_dir result (written through the bound out parameter)
    bit<8>  r6;     // hit/miss flags
}

struct metadata { }

struct headers {
    d_t d;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.d);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_r1(bit<8> v) {
        hdr.d.r1 = v;
    }
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action set_r2(bit<8> v) {
        hdr.d.r2 = v;
    }
    action a1() {
        hdr.d.r3 = 1;
    }
    action a2() {
        hdr.d.r3 = 2;
    }
    action a3() {
        hdr.d.r3 = 3;
    }
    action set_out(out bit<8> dst, bit<8> v) {
        dst = v;
    }

    // exact; the default action cannot be changed by the control plane
    table t_exact {
        key = {
            hdr.d.op: exact;
        }
        actions = {
            set_r1;
            NoAction;
        }
        const default_action = NoAction();
    }

    // lpm; default action with an argument, left as declared
    table t_lpm {
        key = {
            hdr.d.addr: lpm;
        }
        actions = {
            set_port;
        }
        default_action = set_port(7);
    }

    // ternary with priorities; default action replaced by setdefault in STF
    table t_tern {
        key = {
            hdr.d.tkey: ternary;
        }
        actions = {
            set_r2;
        }
        default_action = set_r2(8w0x99);
    }

    table t_switch {
        key = {
            hdr.d.op: exact;
        }
        actions = {
            a1;
            a2;
            a3;
            NoAction;
        }
        default_action = NoAction();
    }

    // set_out's out parameter is bound to hdr.d.r5 here; only v is action data
    table t_dir {
        key = {
            hdr.d.op: exact;
        }
        actions = {
            set_out(hdr.d.r5);
        }
        default_action = set_out(hdr.d.r5, 8w0x5D);
    }

    apply {
        if (t_exact.apply().hit) {
            hdr.d.r6 = 8w0x01;
        } else {
            hdr.d.r6 = 8w0x02;
        }
        t_lpm.apply();
        t_tern.apply();
        switch (t_switch.apply().action_run) {
            a1: {
                hdr.d.r3 = hdr.d.r3 | 8w0x10;
            }
            a2:
            a3: {
                hdr.d.r3 = hdr.d.r3 | 8w0x20;
            }
            default: {
                hdr.d.r3 = hdr.d.r3 | 8w0xD0;
            }
        }
        if (!t_dir.apply().hit) {
            hdr.d.r6 = hdr.d.r6 | 8w0x10;
        }
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.d);
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
