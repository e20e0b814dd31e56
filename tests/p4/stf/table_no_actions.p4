/* table_no_actions.p4: tables that declare no actions, `actions = { }`: `empty` has a key,
 * `sized` has no key (only `size`), `lone` has a key and a `size`; none has a
 * default_action.  As p4c does for a table without default_action, each gets
 * `@defaultonly NoAction` as its only action and `NoAction()` as its default: no entry can
 * be added, every apply misses, runs NoAction and reports it as the action run (P4Info:
 * tests/test_p4info.py).  A table with no `actions` property at all is refused, as p4c's
 * first frontend pass refuses it: "bare: expected 'actions' property" (tests/test_frontend.py).
 *
 * Packet: h_t (k r1 r2 r3), then payload; everything goes to port 1. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> k;   // the tables' key
    bit<8> r1;  // 01 on a hit of lone, 02 on a miss
    bit<8> r2;  // 03 when empty ran NoAction (switch on action_run)
    bit<8> r3;  // 05 when sized missed (!hit), else 06
}

struct headers {
    h_t h;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    table lone {
        key = { hdr.h.k: exact; }
        actions = { }
        size = 8;
    }

    table empty {
        key = { hdr.h.k: exact; }
        actions = { }
    }

    table sized {
        actions = { }
        size = 16;
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (lone.apply().hit) {
            hdr.h.r1 = 1;
        } else {
            hdr.h.r1 = 2;
        }
        switch (empty.apply().action_run) {
            NoAction: { hdr.h.r2 = 3; }
        }
        if (!sized.apply().hit) {
            hdr.h.r3 = 5;
        } else {
            hdr.h.r3 = 6;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
