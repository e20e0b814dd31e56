/* processor.p4: one pair of value lanes (SwitchML's Processor, our code).
 *
 * A register of value pairs, one cell per (slot, set), and four RegisterActions: write
 * both values, add both values, read the second, read the first.  A Tofino 1 stateful ALU
 * returns one 32-bit word per packet, so the CONSUME pass writes or adds both values and
 * returns the second; the HARVEST pass returns the first.  Values are int32 bit patterns;
 * the ALU's add wraps like ina.p4's.  32 instances cover V = 64 (lanes i and i + 32).
 */
#ifndef INA_TNA_PROCESSOR_P4
#define INA_TNA_PROCESSOR_P4

control Processor(inout int<32> first, inout int<32> second, in ina_bridge_t bridge) {
    Register<pair_t, bit<32>>(POOL_CELLS) values;

    RegisterAction<pair_t, bit<32>, bit<32>>(values) write_pair = {
        void apply(inout pair_t value, out bit<32> rv) {
            value.first = (bit<32>)first;
            value.second = (bit<32>)second;
            rv = value.second;
        }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(values) add_pair = {
        void apply(inout pair_t value, out bit<32> rv) {
            value.first = value.first + (bit<32>)first;
            value.second = value.second + (bit<32>)second;
            rv = value.second;
        }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(values) read_second = {
        void apply(inout pair_t value, out bit<32> rv) { rv = value.second; }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(values) read_first = {
        void apply(inout pair_t value, out bit<32> rv) { rv = value.first; }
    };

    action write() { second = (int<32>)write_pair.execute(bridge.cell); }
    action add() { second = (int<32>)add_pair.execute(bridge.cell); }
    action read1() { second = (int<32>)read_second.execute(bridge.cell); }
    action read0() { first = (int<32>)read_first.execute(bridge.cell); }

    apply {
        if (bridge.pass == PASS_CONSUME) {
            if (bridge.op == OP_WRITE) {
                write();
            } else if (bridge.op == OP_ADD) {
                add();
            } else {
                read1();
            }
        } else if (bridge.pass == PASS_HARVEST) {
            read0();
        }
    }
}

#endif
