/* validity.p4: header validity as p4c + BMv2 run it.
 *  - setValid() on an invalid header zeroes its fields (BMv2 add_header), also
 *    when the header held parsed values before setInvalid();
 *  - setValid() on a valid header changes nothing;
 *  - setInvalid() keeps the field values (they can still be read);
 *  - a = b with b invalid makes a invalid and leaves a's fields as they were;
 *    with b valid it copies the fields and the validity;
 *  - a list expression { ... } assigned to a header makes it valid;
 *  - struct-of-headers locals copied whole, headers copied through constant stack
 *    indexes;
 *  - invalid headers are not emitted.
 *
 * Packet: ctl_t (op, res), then b (x_t).  The deparser emits ctl, a, b, c, s[0], s[1]. */
#include <core.p4>
#include <v1model.p4>

header ctl_t {
    bit<8> op;
    bit<8> res;
}

header x_t {
    bit<8> x;
    bit<8> y;
}

struct pair_t {
    x_t p;
    x_t q;
}

struct headers {
    ctl_t ctl;
    x_t a;
    x_t b;
    x_t c;
    x_t[2] s;
}

struct metadata { }

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ctl);
        pkt.extract(hdr.b);
        transition accept;
    }
}

control MyVerify(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.ctl.op == 1) {
            hdr.a.setValid();                  // never valid before: fields 0
            hdr.b.setInvalid();
            hdr.b.setValid();                  // parsed values are zeroed
            hdr.ctl.res = hdr.a.x | hdr.b.x | hdr.b.y;
        } else if (hdr.ctl.op == 2) {
            hdr.b.setValid();                  // already valid: unchanged
            hdr.ctl.res = hdr.b.x;
        } else if (hdr.ctl.op == 3) {
            hdr.b = hdr.a;                     // a invalid: b becomes invalid
            hdr.ctl.res = hdr.b.x;             // b's fields are untouched
        } else if (hdr.ctl.op == 4) {
            hdr.c = { 0xAB, 0xCD };            // valid, with these fields
            hdr.a = hdr.c;                     // c valid: a valid, same fields
            hdr.a.y = hdr.a.y + 1;
        } else if (hdr.ctl.op == 5) {
            hdr.a.setValid();
            hdr.a.x = 5;
            hdr.a.setInvalid();
            hdr.ctl.res = hdr.a.x;             // setInvalid keeps the value
        } else if (hdr.ctl.op == 6) {
            pair_t tmp;
            tmp.p = hdr.b;
            pair_t t2;
            t2 = tmp;                          // struct copy: p valid, q invalid
            t2.p.y = 0x77;
            hdr.c = t2.p;
            hdr.a = t2.q;                      // invalid: a stays invalid
            hdr.ctl.res = (bit<8>)(bit<1>)t2.q.isValid();
        } else if (hdr.ctl.op == 7) {
            hdr.s[1] = hdr.b;
            hdr.s[0] = hdr.s[1];
            hdr.s[0].x = 0x44;
            hdr.b.setInvalid();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyCompute(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ctl);
        pkt.emit(hdr.a);
        pkt.emit(hdr.b);
        pkt.emit(hdr.c);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
