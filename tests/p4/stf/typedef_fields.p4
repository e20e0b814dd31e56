/* typedef_fields.p4: header fields whose type is a `typedef` of bit<W> (the same type
 * as bit<W>) or a `type` of bit<W> (a new type, converted to and from bit<W> by casts):
 * extracted and emitted like bit<W> fields, arithmetic on a typedef field, casts from
 * and to the `type`, a typedef of the `type` for a local, both kinds as exact table
 * keys (entries added by STF) and as action parameters.  In P4Info (p4c), a `type`
 * key or parameter carries its `type_name`, with the bit width of bit<16>
 * (tests/test_p4info.py).
 *
 * Packet: h_t (a b p raw q s), then payload; everything goes to port 1. */
#include <core.p4>
#include <v1model.p4>

typedef bit<8>  Byte_t;       // a synonym of bit<8>
type    bit<16> Port_t;       // a new type over bit<16>
typedef Port_t  PortAlias_t;  // a synonym of the new type

header h_t {
    Byte_t  a;    // a + 1
    Byte_t  b;    // key of by_b; set_b writes it
    Port_t  p;    // key of by_p; set_p writes it
    bit<16> raw;  // (bit<16>)p, p as it came in
    Port_t  q;    // (Port_t)(raw + 0x0100)
    Port_t  s;    // p as it came in, through a PortAlias_t local
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
    action set_b(Byte_t v) {
        hdr.h.b = v;
    }

    action set_p(Port_t v) {
        hdr.h.p = v;
    }

    table by_b {
        key = { hdr.h.b: exact; }
        actions = { set_b; NoAction; }
        default_action = NoAction();
    }

    table by_p {
        key = { hdr.h.p: exact; }
        actions = { set_p; NoAction; }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        hdr.h.a = hdr.h.a + 1;
        hdr.h.raw = (bit<16>)hdr.h.p;
        hdr.h.q = (Port_t)(hdr.h.raw + 16w0x0100);
        PortAlias_t saved = hdr.h.p;
        by_b.apply();
        by_p.apply();
        hdr.h.s = saved;
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
