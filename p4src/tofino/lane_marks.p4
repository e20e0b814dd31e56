/* lane_marks.p4: did any add of this pass's 32 lanes leave the int32 range?
 *
 * After the lanes ran OP_WRITE or OP_ADD, each field of `work` holds its lane's mark (0 or 1).
 * An identity hash gathers bit 0 of the 32 fields into one word, one stage, which is how
 * Tofino ORs bits that sit in 32 different PHV containers: the word is non-zero iff an add did.
 */
#ifndef INA_TNA_LANE_MARKS_P4
#define INA_TNA_LANE_MARKS_P4

control LaneMarks(in half_values_t v, out bit<32> marks) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) marks_of;

    apply {
        marks = marks_of.get({
            v.v0[0:0], v.v1[0:0], v.v2[0:0], v.v3[0:0], v.v4[0:0], v.v5[0:0], v.v6[0:0], v.v7[0:0],
            v.v8[0:0], v.v9[0:0], v.v10[0:0], v.v11[0:0], v.v12[0:0], v.v13[0:0], v.v14[0:0], v.v15[0:0],
            v.v16[0:0], v.v17[0:0], v.v18[0:0], v.v19[0:0], v.v20[0:0], v.v21[0:0], v.v22[0:0], v.v23[0:0],
            v.v24[0:0], v.v25[0:0], v.v26[0:0], v.v27[0:0], v.v28[0:0], v.v29[0:0], v.v30[0:0], v.v31[0:0] });
    }
}

#endif
