/* round_flags.p4: the cell's flags, i.e. OVERFLOW once any add of the round left int32 or a
 * child switch's partial came flagged (CONSUME pass, stage 11, after the lanes' marks).
 *
 * A contribution that opens the round writes its own flag, a later one ORs its own in, a
 * repeat reads.  The contribution that completes the round comes after every other one
 * through this stage, so it reads the round's final flags and carries them in the bridge.
 */
#ifndef INA_TNA_ROUND_FLAGS_P4
#define INA_TNA_ROUND_FLAGS_P4

/* This packet's OVERFLOW: its lanes' marks (ingress, egress in the bridge) or the flag it came with. */
bit<32> own_overflow(in bit<1> low_overflow, in tna_headers hdr) {
    if (low_overflow == 1 || hdr.bridge.high_overflow == 1 || (hdr.ina.flags & FLAG_OVERFLOW) != 0) {
        return (bit<32>)FLAG_OVERFLOW;
    }
    return 0;
}

/* `own` is a parameter, not a local set in apply: a RegisterAction's body is a function of its own,
 * where a control local would be read before the apply block sets it (p4test: possibly uninitialized). */
control RoundFlags(inout tna_headers hdr, in bit<32> own) {
    Register<bit<32>, bit<32>>(POOL_CELLS) round_flags;

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) flags_write = {
        void apply(inout bit<32> value, out bit<32> rv) { value = own; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) flags_or = {
        void apply(inout bit<32> value, out bit<32> rv) { value = value | own; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) flags_read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };

    apply {
        if (hdr.bridge.op == OP_WRITE) {
            hdr.bridge.flags = flags_write.execute(hdr.bridge.cell)[7:0];
        } else if (hdr.bridge.op == OP_ADD) {
            hdr.bridge.flags = flags_or.execute(hdr.bridge.cell)[7:0];
        } else {
            hdr.bridge.flags = flags_read.execute(hdr.bridge.cell)[7:0];
        }
    }
}

#endif
