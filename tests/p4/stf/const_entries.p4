/* const_entries.p4: tables whose entries are fixed in the program.
 *   t_exact_c: exact key, plain values, declared default action on a miss
 *   t_mixed:   ternary + range keys: value &&& mask, plain value (= full
 *              mask), lo .. hi, and _ ; overlapping entries, where the
 *              earlier entry wins (const entries are prioritised by order)
 *   t_range:   a single range key, overlapping ranges, a one-value range,
 *              and a final _ catch-all entry
 * Ranges are only tested here (via const entries), never through STF `add`. */
#include <core.p4>
#include <v1model.p4>

header d_t {
    bit<8>  a;      // key of t_exact_c, ternary key of t_mixed
    bit<8>  b;      // range key of t_mixed
    bit<16> c;      // range key of t_range
    bit<8>  x;      // t_exact_c result
    bit<8>  y;      // t_mixed result
    bit<8>  z;      // t_range result
    bit<8>  pad;
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
    action set_x(bit<8> v) {
        hdr.d.x = v;
    }
    action set_y(bit<8> v) {
        hdr.d.y = v;
    }
    action set_z(bit<8> v) {
        hdr.d.z = v;
    }

    table t_exact_c {
        key = {
            hdr.d.a: exact;
        }
        actions = {
            set_x;
        }
        default_action = set_x(8w0xFF);
        const entries = {
            8w0x01: set_x(8w0x11);
            8w0x02: set_x(8w0x22);
            8w0x1F: set_x(8w0x33);
        }
    }

    table t_mixed {
        key = {
            hdr.d.a: ternary;
            hdr.d.b: range;
        }
        actions = {
            set_y;
        }
        default_action = set_y(8w0xDF);
        const entries = {
            (8w0x10 &&& 8w0xF0, 8w0x00 .. 8w0x0F): set_y(8w1);
            (8w0x10 &&& 8w0xF0, _): set_y(8w2);
            (8w0x1F, 8w0x10 .. 8w0x1F): set_y(8w3);     // shadowed by the entry above
            (8w0x33, 8w0x80 .. 8w0xFF): set_y(8w4);
            (_, 8w0x80 .. 8w0xFF): set_y(8w5);
            (8w0x0F &&& 8w0x0F, 8w0x40 .. 8w0x40): set_y(8w6);
        }
    }

    table t_range {
        key = {
            hdr.d.c: range;
        }
        actions = {
            set_z;
        }
        default_action = set_z(8w0xD0);
        const entries = {
            16w0 .. 16w99: set_z(8w1);
            16w100 .. 16w199: set_z(8w2);
            16w150 .. 16w300: set_z(8w3);   // 150..199 already belong to the entry above
            16w1000 .. 16w1000: set_z(8w4);
            _: set_z(8w9);
        }
    }

    apply {
        standard_metadata.egress_spec = 1;
        t_exact_c.apply();
        t_mixed.apply();
        t_range.apply();
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
