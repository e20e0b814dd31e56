/* ctor_controls.p4: a control passed as a constructor argument to another control (P4-16
 * "Constructor parameters"; corpus issue1566-bmv2.p4).  p4c's SpecializeAll makes a copy of
 * the receiving control for each argument: an instance's name binds that very instance, so
 * two controls given `shared` apply one Count, one register; a constructor call makes an
 * instance of the copy's own.  The control parameter's type is a control type declaration.
 *
 * Packet: h_t (x y), then payload; out on port 1. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> x;
    bit<8> y;
}

struct headers {
    h_t h;
}

struct metadata { }

control step_t(inout bit<8> v);

// Adds how many times this instance has run, this one included (across packets).
control Count(inout bit<8> v) {
    register<bit<8>>(1) runs;
    apply {
        bit<8> n;
        runs.read(n, 0);
        n = n + 1;
        runs.write(0, n);
        v = v + n;
    }
}

control Double(inout bit<8> v)(step_t s) {
    apply {
        v = v << 1;
        s.apply(v);
    }
}

control Triple(inout bit<8> v)(step_t s) {
    apply {
        v = v + v + v;
        s.apply(v);
    }
}

control Chain(inout bit<8> x, inout bit<8> y) {
    Count() shared;
    Double(shared) d;      // d and t apply the one instance `shared`
    Triple(shared) t;
    Double(Count()) own;   // an instance of own's own
    apply {
        d.apply(x);
        t.apply(x);
        own.apply(y);
    }
}

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Chain() chain;
    apply {
        chain.apply(hdr.h.x, hdr.h.y);
        sm.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.h);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
