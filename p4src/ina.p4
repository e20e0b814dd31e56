/* ina.p4: in-network aggregation of int32 gradient chunks (v1model).
 *
 * A chunk of INA_VALUES int32 values travels as Eth/IPv4/UDP(INA_UDP_PORT)/ina_t/values.
 * The switch sums the chunks of a job's children slot by slot, SwitchML-style (two sets
 * per slot, a bitmap pair per slot so the shadow set clears itself), and when all children
 * have contributed either multicasts the result (root) or sends the partial sum to its
 * parent (non-root).  docs/protocol.md states the state machine and why it stays exact
 * under loss, duplication and reordering.  Everything else is forwarded by IPv4 LPM.
 *
 * Knobs (-D): INA_VALUES (default 64), INA_UDP_PORT_NUMBER, INA_POOL_SLOTS (default 1024
 * slots for all jobs together), INA_MAX_JOBS (default 64, telemetry cells).
 */
#include <core.p4>
#include <v1model.p4>
#include "protocol.p4"

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

struct metadata {
    bit<32> cell;          // (pool base + slot) * 2 + set: this round's copy
    bit<32> me;            // the sender's bit in the slot bitmap
    bit<8>  children;      // how many children must contribute
    bit<1>  is_root;
    bit<16> group;         // multicast group of the job's children
    bit<9>  parent_port;
    bit<8>  index_at_parent;
    bit<16> epoch;         // job incarnation: a new one starts every slot afresh
    bit<32> stats_base;    // first job_stats cell of the job
    bit<16> pool_size;
    bit<8>  receiver;      // whom egress addresses: a child index or RECEIVER_PARENT
    bit<1>  from_parent;
}

parser InaParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { INA_UDP_PORT: parse_ina; default: accept; }
    }
    state parse_ina {
        pkt.extract(hdr.ina);
        pkt.extract(hdr.values);
        transition accept;
    }
}

control InaVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control InaIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    /* Slot state, one cell per (slot, set). */
    register<bit<32>>(POOL_CELLS) bitmap;     // children that contributed to this round
    register<bit<8>>(POOL_CELLS) arrivals;    // how many of them
    register<bit<32>>(POOL_CELLS) round_seq;  // the round's chunk number
    register<bit<16>>(POOL_CELLS) round_epoch;
    register<bit<8>>(POOL_CELLS) round_flags; // FLAG_OVERFLOW once any lane overflowed
    /* Signed values are stored as their bit patterns and cast back after each read: BMv2
     * keeps a signed register cell as its unsigned pattern, so comparisons and |+| on a raw
     * read would see -3 as 253; the cast to int<W> renormalises (see docs/protocol.md). */
    register<bit<8>>(POOL_CELLS) round_exponent;
#define LANE(i) register<bit<32>>(POOL_CELLS) lane##i;
#include "lanes.p4"
#undef LANE

    counter(JOB_STAT_CELLS, CounterType.packets_and_bytes) job_stats;
    counter(DROP_REASON_COUNT, CounterType.packets) drops;

    action drop() { mark_to_drop(sm); }

    action forward(bit<9> port, bit<48> dst_mac, bit<48> src_mac) {
        sm.egress_spec = port;
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.src = src_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }

    /* One entry per child of a job at this switch, and one for the parent's results. */
    action member(bit<16> pool_base, bit<16> pool_size, bit<8> children, bit<1> is_root, bit<16> group,
                  bit<9> parent_port, bit<8> index_at_parent, bit<16> epoch, bit<32> stats_base) {
        meta.cell = (((bit<32>)pool_base + (bit<32>)hdr.ina.slot) << 1) | (bit<32>)hdr.ina.set;
        meta.me = (bit<32>)1 << hdr.ina.child;
        meta.children = children;
        meta.is_root = is_root;
        meta.group = group;
        meta.parent_port = parent_port;
        meta.index_at_parent = index_at_parent;
        meta.epoch = epoch;
        meta.stats_base = stats_base;
        meta.pool_size = pool_size;
    }

    action result_from_parent(bit<16> group, bit<32> stats_base) {
        meta.from_parent = 1;
        meta.group = group;
        meta.stats_base = stats_base;
    }

    table jobs {
        key = {
            sm.ingress_port: exact;
            hdr.ina.job_id: exact;
            hdr.ina.child: exact;
        }
        actions = { member; result_from_parent; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    /* Send the slot's values: the result to the job's children, or the partial sum up. */
    action send_result_to_children() {
        hdr.ina.msg_type = MSG_RESULT;
        sm.mcast_grp = meta.group;
    }
    action send_result_to_sender() {
        hdr.ina.msg_type = MSG_RESULT;
        meta.receiver = hdr.ina.child;
        sm.egress_spec = sm.ingress_port;
    }
    action send_partial_to_parent() {
        hdr.ina.msg_type = MSG_DATA;
        hdr.ina.child = meta.index_at_parent;
        meta.receiver = RECEIVER_PARENT;
        sm.egress_spec = meta.parent_port;
    }

    apply {
        if (!hdr.ina.isValid()) {
            if (hdr.udp.isValid() && hdr.udp.dst_port == INA_UDP_PORT) {
                drops.count(DROP_TRUNCATED);  // UDP to our port without a whole header and values
                drop();
            } else if (hdr.ipv4.isValid() && hdr.ipv4.ihl == 5 && hdr.ipv4.ttl > 1) {  // the checksum update covers 20 bytes
                ipv4_routes.apply();
            } else {
                drop();
            }
            return;
        }
        if (sm.parser_error != error.NoError) {
            drops.count(DROP_TRUNCATED);
            drop();
            return;
        }
        bool known = false;
        if (hdr.ina.child < 32) {
            known = jobs.apply().hit;
        }
        if (!known) {
            drops.count(DROP_UNKNOWN_MEMBER);
            drop();
            return;
        }
        if (meta.stats_base > JOB_STAT_CELLS - JOB_STAT_COUNT) {
            drops.count(DROP_BAD_ENTRY);  // a controller bug must not touch another job's cells
            drop();
            return;
        }
        hdr.udp.checksum = 0;  // values change; IPv4 lets UDP go without a checksum
        if (meta.from_parent == 1) {
            if (hdr.ina.msg_type == MSG_RESULT) {
                job_stats.count(meta.stats_base + JOB_STAT_FROM_PARENT);
                send_result_to_children();
            } else {
                job_stats.count(meta.stats_base + JOB_STAT_BAD_TYPE);
                drop();
            }
            return;
        }
        if (hdr.ina.msg_type != MSG_DATA) {
            job_stats.count(meta.stats_base + JOB_STAT_BAD_TYPE);
            drop();
            return;
        }
        if (hdr.ina.slot >= meta.pool_size) {
            job_stats.count(meta.stats_base + JOB_STAT_BAD_SLOT);
            drop();
            return;
        }
        if (meta.cell >= POOL_CELLS) {
            drops.count(DROP_BAD_ENTRY);  // pool_base + pool_size beyond the pool: a controller bug
            drop();
            return;
        }

        /* Which round does this cell hold?  Same (epoch, seq): this one.  Same epoch and an
         * older seq: the packet is a delayed duplicate of a finished round.  Else: a new round. */
        bit<32> stored_seq;
        bit<16> stored_epoch;
        round_seq.read(stored_seq, meta.cell);
        round_epoch.read(stored_epoch, meta.cell);
        bool same_round = stored_epoch == meta.epoch && stored_seq == hdr.ina.seq;
        if (!same_round && stored_epoch == meta.epoch && (hdr.ina.seq - stored_seq)[31:31] == 1) {
            job_stats.count(meta.stats_base + JOB_STAT_STALE);
            drop();
            return;
        }

        /* Has this child already been counted in this round, or is the round complete?
         * Then the packet is a repeat (a retransmission or a late duplicate): it changes
         * nothing, and it is answered only once the slot is complete. */
        bit<32> old = 0;
        bit<8> count = 0;
        if (same_round) {
            bitmap.read(old, meta.cell);
            arrivals.read(count, meta.cell);
        }
        bit<8> flags;
        int<8> exponent;
        bit<8> exponent_bits;
        bit<32> lane_bits;
        if ((old & meta.me) != 0 || count == meta.children) {
            job_stats.count(meta.stats_base + JOB_STAT_RETRANSMITS);
            if (count != meta.children) {
                drop();  // absorbed: the result will come when the others arrive
                return;
            }
            round_flags.read(flags, meta.cell);
            round_exponent.read(exponent_bits, meta.cell);
            exponent = (int<8>)exponent_bits;
#define LANE(i) lane##i.read(lane_bits, meta.cell); hdr.values.v##i = (int<32>)lane_bits;
#include "lanes.p4"
#undef LANE
            hdr.ina.flags = flags | FLAG_RETRANSMIT;
            hdr.ina.exponent = exponent;
            if (meta.is_root == 1) {
                send_result_to_sender();
            } else {
                send_partial_to_parent();  // our first partial may have been lost
            }
            return;
        }

        /* A contribution.  The bitmap pair: mark me in this set, clear me in the shadow set
         * (SwitchML's self-cleaning; the round check above is what makes reuse safe). */
        job_stats.count(meta.stats_base + JOB_STAT_AGGREGATED);
        bitmap.write(meta.cell, old | meta.me);
        bit<32> shadow;
        bitmap.read(shadow, meta.cell ^ 1);
        bitmap.write(meta.cell ^ 1, shadow & ~meta.me);
        /* The first of a round overwrites whatever the cell held. */
        if (!same_round) {
            count = 1;
            flags = hdr.ina.flags & FLAG_OVERFLOW;  // a child switch's partial may carry it
            exponent = hdr.ina.exponent;
            round_seq.write(meta.cell, hdr.ina.seq);
            round_epoch.write(meta.cell, meta.epoch);
#define LANE(i) lane##i.write(meta.cell, (bit<32>)hdr.values.v##i);
#include "lanes.p4"
#undef LANE
        } else {
            count = count + 1;
            round_flags.read(flags, meta.cell);
            flags = flags | (hdr.ina.flags & FLAG_OVERFLOW);
            round_exponent.read(exponent_bits, meta.cell);
            exponent = (int<8>)exponent_bits;
            if (hdr.ina.exponent > exponent) {
                exponent = hdr.ina.exponent;
            }
            int<32> stored;
            int<32> wrapped;
            /* Overflow: the saturating and the wrapping sum differ exactly when it happened. */
#define LANE(i) lane##i.read(lane_bits, meta.cell); \
            stored = (int<32>)lane_bits; \
            wrapped = stored + hdr.values.v##i; \
            if (wrapped != (stored |+| hdr.values.v##i)) { flags = flags | FLAG_OVERFLOW; } \
            lane##i.write(meta.cell, (bit<32>)wrapped); \
            hdr.values.v##i = wrapped;
#include "lanes.p4"
#undef LANE
        }
        arrivals.write(meta.cell, count);
        round_flags.write(meta.cell, flags);
        round_exponent.write(meta.cell, (bit<8>)exponent);

        if (count != meta.children) {
            drop();  // absorbed until the last child arrives
            return;
        }
        job_stats.count(meta.stats_base + JOB_STAT_RESULTS);
        hdr.ina.flags = flags;
        hdr.ina.exponent = exponent;
        if (meta.is_root == 1) {
            send_result_to_children();
        } else {
            send_partial_to_parent();
        }
    }
}

control InaEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action address(bit<48> dst_mac, bit<48> src_mac, bit<32> dst_ip, bit<32> src_ip, bit<16> dst_port) {
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.src = src_mac;
        hdr.ipv4.dst = dst_ip;
        hdr.ipv4.src = src_ip;
        hdr.udp.dst_port = dst_port;
    }

    /* Where each receiver of a job lives: children by index, the parent as RECEIVER_PARENT. */
    table receivers {
        key = {
            hdr.ina.job_id: exact;
            meta.receiver: exact;
        }
        actions = { address; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    apply {
        if (!hdr.ina.isValid()) {
            return;
        }
        if (sm.instance_type == 5) {  // a multicast copy: egress_rid is the child's index
            meta.receiver = (bit<8>)sm.egress_rid;
            hdr.ina.child = meta.receiver;
        }
        receivers.apply();
    }
}

control InaComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}

control InaDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.ina);
        pkt.emit(hdr.values);
    }
}

V1Switch(InaParser(), InaVerifyChecksum(), InaIngress(), InaEgress(), InaComputeChecksum(), InaDeparser()) main;
