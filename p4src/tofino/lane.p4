/* lane.p4: one value lane: its int32 sum in every cell, and whether an add left int32.
 *
 * A Tofino 1 stateful ALU (SALU) returns one 32-bit word, has two comparisons and holds four
 * instructions (RegisterActions), each comparison a 32-bit sign test of (register +- PHV +
 * constant).  ina.p4 flags a round OVERFLOW when any add left int32, exactly; a 32-bit test
 * sees that when it knows the value's sign, so the add is two RegisterActions chosen by the
 * value's sign bit (a gateway):
 *   value >= 0: the add left int32 when the stored sum was >= 0 and the wrapped sum is < 0;
 *   value <  0: when the stored sum was < 0 and the wrapped sum is >= 0.
 * Each returns that mark (1 or 0) in place of the value; the fourth instruction reads the sum.
 * So two lanes cannot share an ALU (the pair's second half would need four more
 * instructions), and a lane register serves two lanes of a packet instead: lane i at index
 * cell (pass LO) and lane i + 32 at index cell + POOL_CELLS (pass HI).  32 registers, 32 SALUs,
 * carry the packet's 64 values; ina_tna.p4's stage plan places them.
 */
#ifndef INA_TNA_LANE_P4
#define INA_TNA_LANE_P4

/* The lane's value is the first 32-value block of the packet as this pass parsed it (hdr.work:
 * parsers.p4 rotates the blocks, so lanes 0..31 come first in passes LO and HARVEST_LO, lanes
 * 32..63 in HI and HARVEST_HI), and its cell is bridge.lane_cell (cell, or cell + POOL_CELLS
 * for lanes 32..63).  One table per lane, keyed on the bridge's op and the value's sign, picks
 * the instruction: one logical table and one stateful ALU per lane, placeable from stage 0. */
control Lane(inout int<32> value, in ina_bridge_t bridge) {
    Register<bit<32>, bit<32>>(2 * POOL_CELLS) sums;

    RegisterAction<bit<32>, bit<32>, bit<32>>(sums) write_value = {
        void apply(inout bit<32> stored, out bit<32> mark) {
            stored = (bit<32>)value;
            mark = 0;
        }
    };
    /* value >= 0: it left int32 iff the stored sum was >= 0 and the wrapped sum is negative */
    RegisterAction<bit<32>, bit<32>, bit<32>>(sums) add_positive = {
        void apply(inout bit<32> stored, out bit<32> mark) {
            mark = 0;
            if ((int<32>)stored >= 0 && (int<32>)(stored + (bit<32>)value) < 0) {
                mark = 1;
            }
            stored = stored + (bit<32>)value;
        }
    };
    /* value < 0: it left int32 iff the stored sum was negative and the wrapped sum is >= 0 */
    RegisterAction<bit<32>, bit<32>, bit<32>>(sums) add_negative = {
        void apply(inout bit<32> stored, out bit<32> mark) {
            mark = 0;
            if ((int<32>)stored < 0 && (int<32>)(stored + (bit<32>)value) >= 0) {
                mark = 1;
            }
            stored = stored + (bit<32>)value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(sums) read_sum = {
        void apply(inout bit<32> stored, out bit<32> sum) { sum = stored; }
    };

    action write() { value = (int<32>)write_value.execute(bridge.lane_cell); }
    action add_up() { value = (int<32>)add_positive.execute(bridge.lane_cell); }
    action add_down() { value = (int<32>)add_negative.execute(bridge.lane_cell); }
    action read() { value = (int<32>)read_sum.execute(bridge.lane_cell); }

    table ops {
        key = {
            bridge.op: exact;
            value[31:31]: ternary;
        }
        actions = { write; add_up; add_down; read; NoAction; }
        const default_action = NoAction();   // OP_READ (a repeat) leaves the lanes alone
        size = 8;
        const entries = {
            (OP_WRITE, _): write();
            (OP_ADD, 0): add_up();
            (OP_ADD, 1): add_down();
            (OP_HARVEST, _): read();
        }
    }

    apply { ops.apply(); }
}

#endif
