/* lane.p4: one value lane of every cell: its int32 sum and whether an add left int32.
 *
 * ina.p4 flags a round OVERFLOW when any add wraps in any lane.  To see that on Tofino, each
 * add must report it, and a stateful ALU returns one 32-bit word per packet: so one lane per
 * register, whose RegisterAction returns the overflow mark of the add it made (not the sum),
 * and a separate pass reads the sums once the round is complete.  64 lanes need 64 stateful
 * ALUs, more than ingress has (48): lanes 0..31 live in ingress, lanes 32..63 in egress, and a
 * contribution crosses egress on its way to the recirculation port (p4src/tofino/README.md).
 *
 * The cell is a pair: the wrapping sum (what ina.p4 keeps) and the mark of the last add.  The
 * mark's condition is the exact one, the sum of two int32 values outside the int32 range, as
 * the stateful ALU's two comparisons compute it: mem + phv - INT32_MAX > 0 and
 * -mem - phv + INT32_MIN > 0 (34-bit here so that P4 says what the comparators compute).
 */
#ifndef INA_TNA_LANE_P4
#define INA_TNA_LANE_P4

const int<34> INT32_MAX_34 = 2147483647;
const int<34> INT32_MIN_34 = -2147483648;

/* What the lanes do with a packet: a contribution (CONSUME in ingress, on its way to CONSUME
 * in egress) writes or adds; a repeat does nothing; `read_pass` reads the sums. */
bit<8> lane_op_for(in ina_bridge_t bridge, in bit<8> read_pass) {
    bit<8> op = LANE_NONE;
    if (bridge.pass == PASS_CONSUME) {
        if (bridge.op == OP_WRITE) {
            op = LANE_WRITE;
        } else if (bridge.op == OP_ADD) {
            op = LANE_ADD;
        }
    } else if (bridge.pass == read_pass) {
        op = LANE_READ;
    }
    return op;
}

control Lane(inout int<32> value, in bit<8> lane_op, in bit<32> cell) {
    Register<lane_cell_t, bit<32>>(POOL_CELLS) sums;

    RegisterAction<lane_cell_t, bit<32>, bit<32>>(sums) write_value = {
        void apply(inout lane_cell_t stored, out bit<32> rv) {
            stored.sum = (bit<32>)value;
            stored.overflow = 0;
            rv = stored.overflow;
        }
    };
    RegisterAction<lane_cell_t, bit<32>, bit<32>>(sums) add_value = {
        void apply(inout lane_cell_t stored, out bit<32> rv) {
            if ((int<34>)(int<32>)stored.sum + (int<34>)value > INT32_MAX_34 ||
                (int<34>)(int<32>)stored.sum + (int<34>)value < INT32_MIN_34) {
                stored.overflow = 1;
            } else {
                stored.overflow = 0;
            }
            stored.sum = stored.sum + (bit<32>)value;
            rv = stored.overflow;
        }
    };
    RegisterAction<lane_cell_t, bit<32>, bit<32>>(sums) read_sum = {
        void apply(inout lane_cell_t stored, out bit<32> rv) { rv = stored.sum; }
    };

    action write() { value = (int<32>)write_value.execute(cell); }
    action add() { value = (int<32>)add_value.execute(cell); }
    action read() { value = (int<32>)read_sum.execute(cell); }

    apply {
        if (lane_op == LANE_WRITE) {
            write();
        } else if (lane_op == LANE_ADD) {
            add();
        } else if (lane_op == LANE_READ) {
            read();
        }
    }
}

#endif
