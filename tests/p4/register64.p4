/* Read-add-write of 64 int32 register cells per packet: the aggregation dataplane's
 * hot path in miniature (one register per value lane, indexed by slot), used by the
 * STF test below and by bench/bench_target.py. */
#include <core.p4>
#include <v1model.p4>

#define SLOTS 1024
#define TEN(F, b) F(b##0) F(b##1) F(b##2) F(b##3) F(b##4) F(b##5) F(b##6) F(b##7) F(b##8) F(b##9)
#define FOR_64_LANES(F) TEN(F, ) TEN(F, 1) TEN(F, 2) TEN(F, 3) TEN(F, 4) TEN(F, 5) F(60) F(61) F(62) F(63)

#define FIELD(i) bit<32> v##i;
header agg_t {
    bit<32> slot;
    FOR_64_LANES(FIELD)
}

struct headers { agg_t agg; }
struct metadata { }

parser AggParser(packet_in packet, out headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.agg);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout metadata meta) { apply { } }

control AggIngress(inout headers hdr, inout metadata meta,
                   inout standard_metadata_t standard_metadata) {
#define REGISTER(i) register<bit<32>>(SLOTS) lane##i;
    FOR_64_LANES(REGISTER)

    apply {
        bit<32> sum;
#define ADD(i) lane##i.read(sum, hdr.agg.slot); sum = sum + hdr.agg.v##i; \
               lane##i.write(hdr.agg.slot, sum); hdr.agg.v##i = sum;
        FOR_64_LANES(ADD)
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }
}

control NoEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }

control NoCompute(inout headers hdr, inout metadata meta) { apply { } }

control AggDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.agg); }
}

V1Switch(AggParser(), NoVerify(), AggIngress(), NoEgress(), NoCompute(), AggDeparser()) main;
