/* exponent_overflow.p4: the slot's flags (FLAG_OVERFLOW once any lane or any child's
 * partial overflowed) and exponent (the max of the children's, SwitchML's scaling).
 *
 * A contribution merges its flags and exponent into the cell and, when it completed the
 * round, writes the totals into the packet; an answer to a repeat carries the stored ones
 * with FLAG_RETRANSMIT; a result kept (Verdict.KEEP) stores its own.  `flags` and `exponent` are the packet's hdr.ina fields.
 */
#ifndef INA_V1MODEL_EXPONENT_OVERFLOW_P4
#define INA_V1MODEL_EXPONENT_OVERFLOW_P4

control ExponentAndOverflow(in Verdict verdict, in cell_t cell, in bit<1> lane_overflow, in bit<1> completed,
                            inout bit<8> flags, inout int<8> exponent) {
    @name(".InaIngress.round_flags")
    register<bit<8>>(POOL_CELLS) round_flags;
    /* The exponent's bit pattern, cast back after each read (see value_lanes.p4). */
    @name(".InaIngress.round_exponent")
    register<bit<8>>(POOL_CELLS) round_exponent;

    apply {
        bit<8> stored_flags;
        bit<8> exponent_bits;
        if (verdict == Verdict.ANSWER) {
            round_flags.read(stored_flags, cell);
            round_exponent.read(exponent_bits, cell);
            flags = stored_flags | FLAG_RETRANSMIT | (flags & FLAG_RECOVER);  // a recovery's result, raised
            exponent = (int<8>)exponent_bits;
            return;
        }
        bit<8> merged_flags = flags & FLAG_OVERFLOW;  // a child switch's partial may carry it
        int<8> merged_exponent = exponent;
        if (verdict == Verdict.ADD) {
            round_flags.read(stored_flags, cell);
            merged_flags = merged_flags | stored_flags;
            round_exponent.read(exponent_bits, cell);
            if ((int<8>)exponent_bits > merged_exponent) {
                merged_exponent = (int<8>)exponent_bits;
            }
        }
        if (lane_overflow == 1) {
            merged_flags = merged_flags | FLAG_OVERFLOW;
        }
        round_flags.write(cell, merged_flags);
        round_exponent.write(cell, (bit<8>)merged_exponent);
        if (completed == 1) {
            flags = merged_flags;
            exponent = merged_exponent;
        }
    }
}

#endif
