/* RegisterAction on a register of pairs and on a bit<32> register: each execute runs
 * its apply body on the cell (read, modify, write back) and returns rv.  (A packet executing
 * two RegisterActions of one register is dropped: tests/test_tna.py adds such a path.)
 * Request (after Ethernet): op(8) index(16) a(32) b(32) result(32); the reply goes back
 * out of the ingress port with result filled. */
#include <core.p4>
#include <tna.p4>

header ethernet_h { bit<48> dst; bit<48> src; bit<16> ether_type; }
header req_h { bit<8> op; bit<16> index; bit<32> a; bit<32> b; bit<32> result; }
struct headers_t { ethernet_h ethernet; req_h req; }
struct meta_t { }
struct pair_t { bit<32> first; bit<32> second; }

parser IgParser(packet_in pkt, out headers_t hdr, out meta_t md, out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.req);
        transition accept;
    }
}

control Ig(inout headers_t hdr, inout meta_t md,
           in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Register<pair_t, bit<16>>(8, {10, 20}) pairs;
    RegisterAction<pair_t, bit<16>, bit<32>>(pairs) add_pair = {
        void apply(inout pair_t value, out bit<32> rv) {
            value.first = value.first + hdr.req.a;
            value.second = value.second + hdr.req.b;
            rv = value.first;
        }
    };
    RegisterAction<pair_t, bit<16>, bit<32>>(pairs) read_second = {
        void apply(inout pair_t value, out bit<32> rv) {
            rv = value.second;
        }
    };
    Register<bit<32>, bit<16>>(8) cnt;
    RegisterAction<bit<32>, bit<16>, bit<32>>(cnt) bump = {
        void apply(inout bit<32> value, out bit<32> rv) {
            rv = value;
            value = value + 1;
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(cnt) wrap_at_3 = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (value >= 3) {
                value = 0;
                rv = 1;
            } else {
                rv = 0;
            }
        }
    };
    RegisterAction<bit<32>, bit<16>, bit<32>>(cnt) touch = {
        void apply(inout bit<32> value) {
            value = value | 32w0x100;
        }
    };

    action do_bump() { hdr.req.result = bump.execute(hdr.req.index); }

    apply {
        if (hdr.req.op == 1) {
            hdr.req.result = add_pair.execute(hdr.req.index);
        } else if (hdr.req.op == 2) {
            hdr.req.result = read_second.execute(hdr.req.index);
        } else if (hdr.req.op == 3) {
            do_bump();
        } else if (hdr.req.op == 4) {
            hdr.req.result = wrap_at_3.execute(hdr.req.index);
        } else if (hdr.req.op == 5) {
            touch.execute(hdr.req.index);
        }
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }
}

control IgDeparser(packet_out pkt, inout headers_t hdr, in meta_t md,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    apply { pkt.emit(hdr); }
}

parser EgParser(packet_in pkt, out headers_t hdr, out meta_t md, out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        transition accept;
    }
}

control Eg(inout headers_t hdr, inout meta_t md, in egress_intrinsic_metadata_t eg_intr_md,
           in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
           inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
           inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    apply { }
}

control EgDeparser(packet_out pkt, inout headers_t hdr, in meta_t md,
                   in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply { pkt.emit(hdr); }
}

Pipeline(IgParser(), Ig(), IgDeparser(), EgParser(), Eg(), EgDeparser()) pipe;
Switch(pipe) main;
