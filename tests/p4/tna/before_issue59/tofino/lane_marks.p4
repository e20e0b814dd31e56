/* lane_marks.p4: did any of 32 lanes' adds leave the int32 range?
 *
 * After the Lanes of a gress ran LANE_WRITE or LANE_ADD, each lane field holds its mark
 * (0 or 1).  An identity hash gathers bit 0 of the 32 fields into one word, one stage,
 * which is how Tofino ORs bits that sit in 32 different PHV containers.  `high` chooses the
 * lanes: 0..31 in ingress, 32..63 in egress.
 */
#ifndef INA_TNA_LANE_MARKS_P4
#define INA_TNA_LANE_MARKS_P4

control LaneMarks(in ina_values_t v, out bit<1> overflow)(bool high) {
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) low_marks;
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) high_marks;

    apply {
        bit<32> marks;
        if (high) {
            marks = high_marks.get({
                v.v32[0:0], v.v33[0:0], v.v34[0:0], v.v35[0:0], v.v36[0:0], v.v37[0:0], v.v38[0:0], v.v39[0:0],
                v.v40[0:0], v.v41[0:0], v.v42[0:0], v.v43[0:0], v.v44[0:0], v.v45[0:0], v.v46[0:0], v.v47[0:0],
                v.v48[0:0], v.v49[0:0], v.v50[0:0], v.v51[0:0], v.v52[0:0], v.v53[0:0], v.v54[0:0], v.v55[0:0],
                v.v56[0:0], v.v57[0:0], v.v58[0:0], v.v59[0:0], v.v60[0:0], v.v61[0:0], v.v62[0:0], v.v63[0:0] });
        } else {
            marks = low_marks.get({
                v.v0[0:0], v.v1[0:0], v.v2[0:0], v.v3[0:0], v.v4[0:0], v.v5[0:0], v.v6[0:0], v.v7[0:0],
                v.v8[0:0], v.v9[0:0], v.v10[0:0], v.v11[0:0], v.v12[0:0], v.v13[0:0], v.v14[0:0], v.v15[0:0],
                v.v16[0:0], v.v17[0:0], v.v18[0:0], v.v19[0:0], v.v20[0:0], v.v21[0:0], v.v22[0:0], v.v23[0:0],
                v.v24[0:0], v.v25[0:0], v.v26[0:0], v.v27[0:0], v.v28[0:0], v.v29[0:0], v.v30[0:0], v.v31[0:0] });
        }
        if (marks != 0) {
            overflow = 1;
        } else {
            overflow = 0;
        }
    }
}

#endif
