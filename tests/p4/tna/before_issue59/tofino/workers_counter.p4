/* workers_counter.p4: how many children are still missing (CONSUME pass, stage 9).
 *
 * A count-down per cell, run after the value lanes of the same pass, so a packet that
 * finds the round complete also finds its sums complete (packets keep their order through
 * a stage).  Opening sets children - 1, a contribution counts down, a repeat reads.
 * remaining == 0 after a contribution: the round is complete; after a repeat: answer it.
 */
#ifndef INA_TNA_WORKERS_COUNTER_P4
#define INA_TNA_WORKERS_COUNTER_P4

control WorkersCounter(in ina_bridge_t bridge, inout tna_ingress_metadata meta) {
    Register<bit<32>, bit<32>>(POOL_CELLS) remaining;

    RegisterAction<bit<32>, bit<32>, bit<32>>(remaining) open_count = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = (bit<32>)bridge.children - 1;
            rv = value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(remaining) count_down = {
        void apply(inout bit<32> value, out bit<32> rv) {
            value = value - 1;
            rv = value;
        }
    };
    RegisterAction<bit<32>, bit<32>, bit<32>>(remaining) read_count = {
        void apply(inout bit<32> value, out bit<32> rv) { rv = value; }
    };

    action open() { meta.remaining = open_count.execute(bridge.cell); }
    action down() { meta.remaining = count_down.execute(bridge.cell); }
    action read() { meta.remaining = read_count.execute(bridge.cell); }

    apply {
        if (bridge.op == OP_WRITE) {
            open();
        } else if (bridge.op == OP_ADD) {
            down();
        } else {
            read();
        }
    }
}

#endif
