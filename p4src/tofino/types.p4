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

/* bridge.pass: which pass the packet is in.  A packet from the wire has no bridge (CHECK).
 * Every later pass comes in on the recirculation port, egress bypassed (ina_tna.p4). */
const bit<8> PASS_OUT        = 0;  // to egress: plain IPv4, a result passed down, or a result out
const bit<8> PASS_LO         = 1;  // a contribution's lanes 0..31 write or add (cell)
const bit<8> PASS_HI         = 2;  // lanes 32..63 write or add (cell + POOL_CELLS), count-down, flags
const bit<8> PASS_HARVEST_LO = 3;  // a complete round's lanes 0..31 read into the packet
const bit<8> PASS_HARVEST_HI = 4;  // lanes 32..63 read; then out through egress
const bit<8> PASS_CHECK      = 5;  // never in a bridge: names the CHECK pass for NextStep

/* bridge.op: what the lanes do.  A contribution writes (it opens the round) or adds, in passes
 * LO and HI; a repeat reads nothing there; a complete round's packet harvests. */
const bit<8> OP_WRITE   = 1;  // first contribution of a round: overwrite the values
const bit<8> OP_ADD     = 2;  // further contribution: add the values
const bit<8> OP_READ    = 3;  // a repeat: nothing to add (answered if the round is complete)
const bit<8> OP_HARVEST = 4;  // the harvest passes: read the sums

/* bridge.next: where the values go once read. */
const bit<8> NEXT_TO_CHILDREN = 1;  // multicast RESULT to the job's group
const bit<8> NEXT_TO_SENDER   = 2;  // unicast RESULT|RETRANSMIT back out of the ingress port
const bit<8> NEXT_TO_PARENT   = 3;  // DATA (the partial sum) up to the parent

/* Round check verdicts. */
const bit<8> ROUND_NEW   = 1;  // opens a new round in the cell
const bit<8> ROUND_SAME  = 2;  // the cell holds this round
const bit<8> ROUND_STALE = 3;  // same epoch, older seq: a late duplicate of a finished round

/* 25 bytes in front of the Ethernet header, inside the switch only. */
header ina_bridge_t {
    bit<8>  pass;
    bit<8>  op;
    bit<8>  next;
    bit<8>  receiver;        // egress: a child index or RECEIVER_PARENT
    cell_t  cell;            // (pool_base + slot) * 2 + set
    cell_t  lane_cell;       // the lanes' index this pass: cell, or cell + POOL_CELLS (lanes 32..63)
    bit<16> group;           // the job's multicast group
    bit<7>  _pad0;
    PortId_t out_port;       // unicast: the sender's port or the parent's port
    bit<8>  children;        // the job's children at this switch (count-down start)
    bit<8>  flags;           // the cell's flags (OVERFLOW) once pass HI merged them
    bit<8>  exponent;        // the cell's max exponent, read in the CHECK pass
    bit<8>  index_at_parent;
    bit<1>  is_root;
    bit<1>  repeat;          // a repeat of a complete round: the answer is marked RETRANSMIT
    bit<6>  _pad1;
    bit<32> stats_base;      // first job_stat cell of the job
}

/* Half of a packet's 64 values: PAIR(i, j) names lane i's field; the same type holds lanes 32..63. */
#define PAIR(i, j) int<32> v##i;
header half_values_t {
#include "pairs.p4"
}
#undef PAIR

struct tna_headers {
    ina_bridge_t bridge;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    ina_t        ina;
    half_values_t rest;      // the other 32 values, carried along (parsers.p4 rotates the blocks)
    half_values_t work;      // the 32 values this pass's lanes touch
}

/* Pairs of 32-bit halves: the widest a Tofino 1 register cell can be (the bitmap's two sets). */
struct pair_t {
    bit<32> first;
    bit<32> second;
}

/* Tofino does not zero metadata: the parsers' start states set every field below to 0, so a field
 * added here is added there too. */
struct tna_ingress_metadata {
    bit<1>  check_pass;     // 1: the packet came from the wire (CHECK pass); the parser sets it
    Verdict verdict;        // CHECK pass: CHECKED, DROP, PASS_DOWN or FORWARD
    bit<32> me;             // the sender's bit (child_bit table)
    bit<32> slot_index;     // pool_base + slot
    cell_t  cell;           // slot_index * 2 + set
    bit<17> slot_slack;     // pool_size - slot: 0 or negative (bit 16) means slot >= pool_size
    bit<8>  children;
    bit<1>  is_root;
    bit<16> group;
    PortId_t parent_port;
    bit<8>  index_at_parent;
    bit<32> epoch;
    bit<32> stats_base;
    bit<1>  from_parent;
    bit<32> old_epoch;      // round check, first half: the cell's epoch before this packet
    bit<32> seq_distance;   // round check, second half: stored seq - this packet's seq
    bit<8>  round;          // ROUND_*
    bit<32> old_bitmap;     // the set's bitmap before this packet
    bit<32> map_result;     // old_bitmap & me: non-zero for a repeat
    bit<32> marks;          // LO, HI: non-zero when an add of this pass left int32 (lane_marks.p4)
    bit<32> remaining;      // count-down after this packet (CONSUME pass)
    bit<32> exponent_code;  // exponent ^ 0x80, zero-extended: unsigned order = signed order
    bit<1>  count_drop;
    bit<32> drop_reason;
    bit<1>  count_job;
    bit<32> job_stat;
}

struct tna_egress_metadata {
    bit<8> receiver;
}

#endif
