/* round_flags.p4: the cell's flags, i.e. OVERFLOW once any add of the round left int32 or a
 * child switch's partial came flagged (passes LO and HI, after the lanes' marks).
 *
 * The contribution that opens the round writes the flag its pass LO saw; every later pass of
 * a contribution sets it if that pass saw an overflow, else reads; a repeat reads.  The
 * contribution that completes the round comes through pass HI after every other one (they
 * counted down before it), so it reads the round's final flags and carries them in the bridge.
 * Four RegisterActions, constants in and the new value out: what one stateful ALU holds.
 */
#ifndef INA_TNA_ROUND_FLAGS_P4
#define INA_TNA_ROUND_FLAGS_P4

control RoundFlags(inout ina_bridge_t bridge, in bool overflow) {
    Register<bit<32>, bit<32>>(POOL_CELLS) round_flags;

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) open_clean = {
        void apply(inout bit<32> value, out bit<32> rv) { value = 0; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) open_flagged = {
        void apply(inout bit<32> value, out bit<32> rv) { value = (bit<32>)FLAG_OVERFLOW; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) flag = {
        void apply(inout bit<32> value, out bit<32> rv) { value = value | (bit<32>)FLAG_OVERFLOW; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_flags) read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };

    apply {
        if (bridge.pass == PASS_LO && bridge.op == OP_WRITE) {
            if (overflow) {
                bridge.flags = open_flagged.execute(bridge.cell)[7:0];
            } else {
                bridge.flags = open_clean.execute(bridge.cell)[7:0];
            }
        } else if (overflow && bridge.op != OP_READ) {
            bridge.flags = flag.execute(bridge.cell)[7:0];
        } else {
            bridge.flags = read.execute(bridge.cell)[7:0];
        }
    }
}

#endif
