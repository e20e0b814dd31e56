/* protocol.p4: the aggregation wire protocol, written down once.
 *
 * The P4 program includes this file; Python reads the same file with the built-in target's
 * frontend (worker/gen_wire.py writes its facts to worker/wire_facts.py, which worker/protocol.py
 * reads: `make wire` after a change), so header layout, ports and codes are never re-typed.
 * docs/protocol.md explains the fields and the slot state machine.
 *
 * Compile-time knobs (-D): INA_VALUES (values per packet, 1..256, default 256: the most a packet
 * carries, and the fastest; a program that takes fewer defines its own before this file) and
 * INA_UDP_PORT_NUMBER (default 48864 = 0xBEE0).
 */
#ifndef INA_PROTOCOL_P4
#define INA_PROTOCOL_P4

#ifndef INA_VALUES
#define INA_VALUES 256
#endif
#if INA_VALUES < 1 || INA_VALUES > 256
#error "INA_VALUES must be between 1 and 256"
#endif
#ifndef INA_UDP_PORT_NUMBER
#define INA_UDP_PORT_NUMBER 48864
#endif

const bit<16> INA_UDP_PORT = INA_UDP_PORT_NUMBER;
@noWarn("unused")  // Python reads it (worker/protocol.py); no program needs it
const bit<32> INA_VALUE_COUNT = INA_VALUES;

/* msg_type */
const bit<8> MSG_DATA   = 1;   // a contribution: worker -> switch, or a partial sum: switch -> parent
const bit<8> MSG_RESULT = 2;   // the complete sum: root -> workers, parent -> child switch

/* flags (bit values) */
const bit<8> FLAG_OVERFLOW   = 0x01;  // some lane's sum left the int32 range: do not use the values
const bit<8> FLAG_RETRANSMIT = 0x02;  // the sender sent this chunk before (timeout)
@noWarn("unused")  // the TNA program keeps no results, so it never takes a RECOVER copy
const bit<8> FLAG_RECOVER    = 0x04;  // sent again after a switch of the tree lost its registers: a switch
                                      // that holds the round's result passes it up (docs/protocol.md)

/* receiver index meaning "this switch's parent" in the egress address table */
const bit<8> RECEIVER_PARENT = 0xFF;
/* a job has at most this many children per switch (width of the slot bitmap) */
const bit<32> MAX_CHILDREN = 32;

/* Aggregation header: 16 bytes after the UDP header, then INA_VALUES x int32 (big-endian). */
header ina_t {
    bit<8>  msg_type;
    bit<8>  flags;
    bit<16> job_id;
    bit<8>  child;      // the sender's index among this switch's children (0..31)
    bit<7>  reserved;
    bit<1>  set;        // which of the slot's two copies (shadow set)
    bit<16> slot;       // slot index within the job's pool
    bit<32> seq;        // chunk number: names the round, echoed in results
    int<8>  exponent;   // max exponent of the chunk's values (SwitchML scaling); switch keeps the max
    bit<8>  reserved2;
    bit<16> reserved3;
}

/* Telemetry: the job_stats counter has JOB_STAT_COUNT cells per job, from the job's
 * stats_base; the drops counter counts drops that happen before a job is known. */
const bit<32> JOB_STAT_AGGREGATED   = 0;  // contributions summed into a slot
const bit<32> JOB_STAT_RESULTS      = 1;  // slots completed (result multicast or partial sent up)
const bit<32> JOB_STAT_RETRANSMITS  = 2;  // retransmissions seen (answered, absorbed, or a child's result kept)
const bit<32> JOB_STAT_STALE        = 3;  // duplicates of an earlier round, dropped
const bit<32> JOB_STAT_BAD_SLOT     = 4;  // slot >= the job's pool size, dropped
const bit<32> JOB_STAT_BAD_TYPE     = 5;  // unknown msg_type, dropped
const bit<32> JOB_STAT_FROM_PARENT  = 6;  // results from the parent passed down to the children
const bit<32> JOB_STAT_COUNT        = 8;

const bit<32> DROP_TRUNCATED      = 0;  // too short for the header and its values
const bit<32> DROP_UNKNOWN_MEMBER = 1;  // no job entry for (port, job, child)
const bit<32> DROP_BAD_ENTRY      = 2;  // a job entry pointing outside the pool or telemetry cells
const bit<32> DROP_REASON_COUNT   = 4;

#endif
