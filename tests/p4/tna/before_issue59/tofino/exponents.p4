/* exponents.p4: the cell's max exponent (CHECK pass, stage 6).
 *
 * One register, one stateful ALU, actions chosen by the round verdict and the bitmap: a new
 * round writes, a contribution takes the max, a repeat reads.  The exponent is int8; it is
 * stored as (exponent ^ 0x80), whose unsigned order is the signed order, so the ALU's
 * unsigned max is the signed max.  It rides in the bridge to the pass that sends the values
 * out.  (The OVERFLOW flag is round_flags.p4's, in the CONSUME pass, after the lanes.)
 */
#ifndef INA_TNA_EXPONENTS_P4
#define INA_TNA_EXPONENTS_P4

control Exponents(inout tna_headers hdr, inout tna_ingress_metadata meta) {
    Register<bit<32>, bit<32>>(POOL_CELLS) round_exponent;

    RegisterAction<bit<32>, bit<32>, bit<32>>(round_exponent) exponent_write = {
        void apply(inout bit<32> value, out bit<32> rv) { value = meta.exponent_code; rv = value; }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_exponent) exponent_max = {
        void apply(inout bit<32> value, out bit<32> rv) {
            if (meta.exponent_code > value) { value = meta.exponent_code; }
            rv = value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(round_exponent) exponent_read = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };

    action open_round() {
        hdr.bridge.exponent = exponent_write.execute(meta.cell)[7:0];
    }
    action join_round() {
        hdr.bridge.exponent = exponent_max.execute(meta.cell)[7:0];
    }
    action read_round() {
        hdr.bridge.exponent = exponent_read.execute(meta.cell)[7:0];
    }

    apply {
        meta.exponent_code = (bit<32>)((bit<8>)hdr.ina.exponent ^ 8w0x80);   // stage 0, from the header
        if (meta.round == ROUND_NEW) {          // stage 6
            open_round();
        } else if (meta.map_result == 0) {
            join_round();
        } else {
            read_round();
        }
    }
}

#endif
