/* types.p4: what the TNA program's controls tell each other.
 *
 * Header types and constants come from ../headers.p4 and ../protocol.p4 (shared with the
 * v1model program, never re-typed).  This file adds the bridge header, which carries a
 * packet's verdict between the program's passes (recirculation) and from ingress to egress,
 * and the per-pass metadata.
 */
#ifndef INA_TNA_TYPES_P4
#define INA_TNA_TYPES_P4

#include "values.p4"  /* INA_VALUES: 64 */
#include "../headers.p4"

/* Tofino 1: pipe 0's recirculation port.  Override with -DINA_RECIRC_PORT=... */
#ifndef INA_RECIRC_PORT
#define INA_RECIRC_PORT 68
#endif
const PortId_t RECIRC_PORT = INA_RECIRC_PORT;

/* bridge.pass: which pass the packet is in.  A packet from the wire has no bridge (CHECK). */
const bit<8> PASS_FORWARD = 0;  // not aggregation traffic, or a result passed down: to egress
const bit<8> PASS_CONSUME = 1;  // a contribution on its way through egress (lanes 32..63) to
                                // the second ingress pass (lanes 0..31, count-down, flags)
const bit<8> PASS_HARVEST = 2;  // third pass: ingress reads lanes 0..31
const bit<8> PASS_EGRESS  = 3;  // on its way out with values it already has: egress addresses it
const bit<8> PASS_RESULT  = 4;  // on its way out with this switch's sums: egress reads lanes
                                // 32..63 into each copy, then addresses it

/* bridge.op: what a contribution does to the cell in the CONSUME pass. */
const bit<8> OP_WRITE = 1;  // first contribution of a round: overwrite the values
const bit<8> OP_ADD   = 2;  // further contribution: add the values
const bit<8> OP_READ  = 3;  // a repeat: nothing to add (answered if the round is complete)

/* What one Lane does in a pass (meta.lane_op, chosen from the pass and bridge.op). */
const bit<8> LANE_NONE  = 0;
const bit<8> LANE_WRITE = 1;  // store the value; the packet's field gets the overflow mark (0)
const bit<8> LANE_ADD   = 2;  // add the value; the field gets the mark (1: this add left int32)
const bit<8> LANE_READ  = 3;  // the field gets the cell's sum

/* bridge.next: where the values go once read. */
const bit<8> NEXT_TO_CHILDREN = 1;  // multicast RESULT to the job's group
const bit<8> NEXT_TO_SENDER   = 2;  // unicast RESULT|RETRANSMIT back out of the ingress port
const bit<8> NEXT_TO_PARENT   = 3;  // DATA (the partial sum) up to the parent

/* Round check verdicts. */
const bit<8> ROUND_NEW   = 1;  // opens a new round in the cell
const bit<8> ROUND_SAME  = 2;  // the cell holds this round
const bit<8> ROUND_STALE = 3;  // same epoch, older seq: a late duplicate of a finished round

/* 18 bytes in front of the Ethernet header, inside the switch only. */
header ina_bridge_t {
    bit<8>  pass;
    bit<8>  op;
    bit<8>  next;
    bit<8>  receiver;        // egress: a child index or RECEIVER_PARENT
    cell_t  cell;            // (pool_base + slot) * 2 + set
    bit<16> group;           // the job's multicast group
    bit<7>  _pad0;
    PortId_t out_port;       // unicast: the sender's port or the parent's port
    bit<8>  children;        // the job's children at this switch (count-down start)
    bit<8>  flags;           // the cell's flags (OVERFLOW), merged in the CONSUME pass
    bit<8>  exponent;        // the cell's max exponent, read in the CHECK pass
    bit<8>  index_at_parent;
    bit<1>  is_root;
    bit<1>  high_overflow;   // CONSUME: an add to lanes 32..63 (egress) left the int32 range
    bit<6>  _pad1;
    bit<8>  _pad2;
    bit<32> stats_base;      // first job_stats cell of the job
}

struct tna_headers {
    ina_bridge_t bridge;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    ina_t        ina;
    ina_values_t values;
}

/* Pairs of 32-bit halves: the widest a Tofino 1 register cell can be. */
struct pair_t {
    bit<32> first;
    bit<32> second;
}

/* One value lane's cell: the wrapping int32 sum (its bit pattern) and the overflow mark of
 * the last add, which the stateful ALU returns as its one 32-bit word. */
struct lane_cell_t {
    bit<32> sum;
    bit<32> overflow;
}

/* Tofino does not zero metadata: the parsers' start states set every field below to 0, so a field
 * added here is added there too. */
struct tna_ingress_metadata {
    bit<1>  check_pass;     // 1: the packet came from the wire (CHECK pass)
    Verdict verdict;        // CHECK pass: CHECKED, DROP, PASS_DOWN or FORWARD
    bit<32> me;             // the sender's bit (child_bit table)
    bit<32> slot_index;     // pool_base + slot
    cell_t  cell;           // slot_index * 2 + set
    bit<17> slot_slack;     // pool_size - slot: 0 or negative (bit 16) means slot >= pool_size
    bit<16> pool_size;
    bit<8>  children;
    bit<1>  is_root;
    bit<16> group;
    PortId_t parent_port;
    bit<8>  index_at_parent;
    bit<32> epoch;
    bit<32> stats_base;
    bit<1>  from_parent;
    bit<32> old_epoch;      // round check, first half: the cell's epoch before this packet
    bit<8>  round;          // ROUND_*
    bit<32> old_bitmap;     // the set's bitmap before this packet
    bit<32> map_result;     // old_bitmap & me: non-zero for a repeat
    bit<8>  lane_op;        // LANE_* for lanes 0..31 in this pass
    bit<1>  low_overflow;   // CONSUME: an add to lanes 0..31 left the int32 range
    bit<32> remaining;      // count-down after this packet (CONSUME pass)
    bit<32> exponent_code;  // exponent ^ 0x80, zero-extended: unsigned order = signed order
    bit<1>  count_drop;
    bit<32> drop_reason;
    bit<1>  count_job;
    bit<32> job_stat;
}

struct tna_egress_metadata {
    bit<8> receiver;
    bit<8> lane_op;         // LANE_* for lanes 32..63 in this copy
}

#endif
