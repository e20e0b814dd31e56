/* functions.p4: P4-16 functions: return values in any expression (assignments,
 * conditions, nested calls, a table key, ?:), return inside nested blocks, void
 * functions with return, in/out/inout parameters, a generic function with its type
 * inferred, default parameter values and named arguments, and side effects of a call
 * inside && / || / ?: happening only when that operand is evaluated.
 *
 * Packet: h_t (op a b c d).  Ingress sends to port 1 and runs the case selected by
 * op (see apply). */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> d;
}

struct headers {
    h_t h;
}

struct metadata { }

bit<8> max8(in bit<8> x, in bit<8> y) {
    if (x > y) {
        return x;
    } else {
        return y;
    }
}

// 1: below 16; 2: even, below 128; 3: odd, below 128; 4: 128 and above
bit<8> classify(in bit<8> v) {
    if (v < 16) {
        return 1;
    }
    if (v < 128) {
        if (v[0:0] == 1) {
            return 3;
        }
        return 2;
    }
    return 4;
}

bit<8> sum3(in bit<8> x, in bit<8> y, in bit<8> z = 8w3) {
    return x + y + z;
}

bool bump_and_check(inout bit<8> x, in bit<8> limit) {
    x = x + 1;
    return x > limit;
}

T pick<T>(in bool c, in T x, in T y) {
    if (c) {
        return x;
    }
    return y;
}

void split(in bit<8> v, out bit<4> hi, out bit<4> lo) {
    hi = v[7:4];
    lo = v[3:0];
}

void bump(inout bit<8> x) {
    x = x + 1;
}

void clamp(inout bit<8> x, in bit<8> hi) {
    if (x <= hi) {
        return;
    }
    x = hi;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_d(bit<8> v) {
        hdr.h.d = v;
    }
    table by_max {
        key = { max8(hdr.h.a, hdr.h.b): exact @name("max_ab"); }
        actions = { set_d; NoAction; }
        const entries = {
            0x50 : set_d(0xEE);
            0x60 : set_d(0xDD);
        }
        default_action = NoAction();
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.h.op == 1) {
            hdr.h.d = max8(max8(hdr.h.a, hdr.h.b), hdr.h.c);
            hdr.h.c = classify(hdr.h.a);
            if (max8(hdr.h.a, 8w0x20) == hdr.h.a) {
                hdr.h.op = 8w0x81;
            }
        } else if (hdr.h.op == 2) {
            hdr.h.a = sum3(hdr.h.a, hdr.h.b);
            hdr.h.b = sum3(y = hdr.h.c, x = 8w1);
            hdr.h.c = sum3(z = 8w0, y = hdr.h.d, x = hdr.h.d);
        } else if (hdr.h.op == 3) {
            bool r1 = hdr.h.a == 0 && bump_and_check(hdr.h.b, 8w5);
            bool r2 = hdr.h.a == 0 || bump_and_check(hdr.h.c, 8w5);
            hdr.h.d = (r1 ? 8w0x10 : 8w0x20) | (r2 ? 8w0x01 : 8w0x02);
        } else if (hdr.h.op == 4) {
            hdr.h.d = hdr.h.a > 8w10 ? pick(bump_and_check(hdr.h.b, 8w0), 8w1, 8w2) : 8w9;
        } else if (hdr.h.op == 5) {
            bit<4> hi;
            bit<4> lo;
            split(hdr.h.a, hi, lo);
            hdr.h.b = lo ++ hi;
            hdr.h.c = pick(hdr.h.a > 8w0x80, hdr.h.a, hdr.h.d);
            bump(hdr.h.d);
        } else if (hdr.h.op == 6) {
            by_max.apply();
        } else if (hdr.h.op == 7) {
            clamp(hdr.h.a, 8w0x40);
            clamp(hdr.h.b, 8w0x40);
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

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
