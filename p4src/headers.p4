/* headers.p4: the packet headers and sizing knobs both aggregation programs share.
 *
 * The INA header and its constants live in protocol.p4 (Python reads that file too); this
 * file adds what carries it (Ethernet, IPv4, UDP), the value lanes and the pool sizes, so
 * ina.p4 (v1model) and the TNA program type them once.  common/ holds the rest both
 * programs share: vocabulary.p4 (verdicts, cells, table sizes; included here), the parse
 * states (parse_wire.p4) and egress addressing (receivers.p4).
 *
 * Knobs (-D): INA_POOL_SLOTS (default 1024 slots for all jobs together), INA_MAX_JOBS
 * (default 64, telemetry cells), and protocol.p4's INA_VALUES and INA_UDP_PORT_NUMBER.
 */
#ifndef INA_HEADERS_P4
#define INA_HEADERS_P4

#include "protocol.p4"
#include "common/vocabulary.p4"

#ifndef INA_POOL_SLOTS
#define INA_POOL_SLOTS 1024
#endif
#ifndef INA_MAX_JOBS
#define INA_MAX_JOBS 64
#endif
#define POOL_CELLS (2 * INA_POOL_SLOTS)
#define JOB_STAT_CELLS (INA_MAX_JOBS * JOB_STAT_COUNT)

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<8>  PROTO_UDP = 17;

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> checksum;
    bit<32> src;
    bit<32> dst;
}

header udp_t { bit<16> src_port; bit<16> dst_port; bit<16> length; bit<16> checksum; }

#define LANE(i) int<32> v##i;
header ina_values_t {
#include "lanes.p4"
}
#undef LANE

struct headers {
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    ina_t        ina;
    ina_values_t values;
}

#endif
