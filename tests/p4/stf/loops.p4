/* loops.p4: `for (init; cond; update)` statements (P4-16 v1.2.4) as p4c 1.2.5 + BMv2 run
 * them: inside action bodies (p4c-bm2-ss turns each into BMv2 jump primitives; its
 * CheckUnsupported refuses every `for (T x in ...)`: "BMV2 does not support for-in loops",
 * and its frontend refuses a list, `for (bit<8> v in {8w3, 8w5, 8w7})`: "Typechecking does
 * not support iteration over this collection of type tuple<bit<8>, bit<8>, bit<8>>").
 * A declared loop variable, two init and two update steps, `continue` (which still runs
 * the update) and `break`, a loop stepping by 2, nested loops where `break` leaves only the
 * inner one.  Every loop variable of one block has its own name: p4c 1.2.5 declares a loop's
 * variable in the enclosing block and refuses two loops there declaring the same one.  The
 * action runs as the const default action of a keyless table, as in p4c's forloop-bmv2.p4. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> n;
    bit<8> m;
}

header out_t {
    bit<8> sum;   // sum of i in 0..7, skipping i == n, stopping at i == m
    bit<8> cnt;   // sum of k * n for k = 1, 2, 3, 4
    bit<8> lst;   // sum of v = 3, 5, 7, skipping v == m
    bit<8> pc;    // number of 1 bits in n
    bit<8> nest;  // pairs (r, c), r, c in 0 .. 2, c <= r (inner break)
    bit<8> meet;  // iterations of lo = 0 up / hi = 8 down until lo >= hi
}

struct metadata { }

struct headers {
    in_t  i;
    out_t o;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
        packet.extract(hdr.o);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action run_loops() {
        bit<8> n = hdr.i.n;
        bit<8> m = hdr.i.m;
        bit<8> sum = 0;
        for (bit<8> i = 0; i < 8; i += 1) {
            if (i == n) {
                continue;
            }
            if (i == m) {
                break;
            }
            sum = sum + i;
        }
        hdr.o.sum = sum;

        bit<8> cnt = 0;
        for (bit<8> k = 1; k <= 4; k = k + 1) {
            cnt = cnt + k * n;
        }
        hdr.o.cnt = cnt;

        bit<8> lst = 0;
        for (bit<8> v = 3; v <= 7; v = v + 2) {
            if (v == m) {
                continue;
            }
            lst = lst + v;
        }
        hdr.o.lst = lst;

        bit<8> pc = 0;
        bit<8> t = n;
        for (bit<8> j = 0; j < 8; j = j + 1) {
            pc = pc + (t & 1);
            t = t >> 1;
        }
        hdr.o.pc = pc;

        bit<8> nest = 0;
        for (bit<8> r = 0; r <= 2; r = r + 1) {
            for (bit<8> c = 0; c <= 2; c = c + 1) {
                if (c > r) {
                    break;
                }
                nest = nest + 1;
            }
        }
        hdr.o.nest = nest;

        bit<8> meet = 0;
        for (bit<8> lo = 0, bit<8> hi = 8; lo < hi; lo = lo + 1, hi = hi - 1) {
            meet = meet + 1;
        }
        hdr.o.meet = meet;
    }

    table loops {
        actions = { run_loops; }
        const default_action = run_loops();
    }

    apply {
        loops.apply();
        standard_metadata.egress_spec = 1;
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
        packet.emit(hdr.i);
        packet.emit(hdr.o);
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
