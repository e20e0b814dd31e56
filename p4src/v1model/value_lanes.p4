/* value_lanes.p4: the slot's INA_VALUES sums, one register per lane (as Tofino wants).
 *
 * Verdict.FIRST (and KEEP, a result) overwrites the cell with the packet's values, Verdict.ADD adds them (the
 * wrapping sum goes to the cell and into the packet; `overflow` says whether any lane's
 * saturating and wrapping sums differ, i.e. it left the int32 range), Verdict.ANSWER reads
 * the complete sum into the packet.  Signed values are stored as their bit patterns and cast
 * back after each read: BMv2 keeps a signed register cell as its unsigned pattern, so
 * comparisons and |+| on a raw read would see -3 as 253 (see docs/protocol.md).
 */
#ifndef INA_V1MODEL_VALUE_LANES_P4
#define INA_V1MODEL_VALUE_LANES_P4

control ValueLanes(in Verdict verdict, in cell_t cell, inout ina_values_t values, out bit<1> overflow) {
#define INA_NAME(x) #x
#define LANE(i) @name(INA_NAME(.InaIngress.lane##i)) register<bit<32>>(POOL_CELLS) lane##i;
#include "../lanes.p4"
#undef LANE
#undef INA_NAME

    apply {
        overflow = 0;
        bit<32> lane_bits;
        if (verdict == Verdict.ANSWER) {
#define LANE(i) lane##i.read(lane_bits, cell); values.v##i = (int<32>)lane_bits;
#include "../lanes.p4"
#undef LANE
        } else if (verdict == Verdict.FIRST || verdict == Verdict.KEEP) {
#define LANE(i) lane##i.write(cell, (bit<32>)values.v##i);
#include "../lanes.p4"
#undef LANE
        } else if (verdict == Verdict.ADD) {
            /* Overflow: both addends' signs differ from the wrapping sum's (bit 31 of
             * (a ^ s) & (b ^ s)), i.e. the saturating and the wrapping sums differ. */
            bit<32> value_bits;
            bit<32> sum_bits;
            bit<32> signs = 0;
#define LANE(i) lane##i.read(lane_bits, cell); \
            value_bits = (bit<32>)values.v##i; \
            sum_bits = lane_bits + value_bits; \
            signs = signs | ((lane_bits ^ sum_bits) & (value_bits ^ sum_bits)); \
            lane##i.write(cell, sum_bits); \
            values.v##i = (int<32>)sum_bits;
#include "../lanes.p4"
#undef LANE
            overflow = signs[31:31];
        }
    }
}

#endif
