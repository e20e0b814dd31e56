/* bitmap.p4: has this child been counted in this round?  (docs/protocol.md, steps 2-3)
 *
 * One register cell per slot holds the pair of sets' bitmaps (SwitchML's layout).  The
 * round check already knows whether this packet opens a round, so the four actions need
 * no condition: open a set (bitmap = me), or join it (bitmap |= me) returning the bitmap
 * as it was.  Stage 4; stage 5 works out map_result = old & me (non-zero: a repeat).
 *
 * ina.p4 also clears the child's bit in the shadow set on a contribution.  Here the
 * shadow set is left alone: a round opening resets its set, so the clear never changes a
 * verdict (p4src/tofino/README.md), and clearing it unconditionally, as SwitchML does,
 * would on a late repeat of round p erase the child's bit of round p + W.
 */
#ifndef INA_TNA_BITMAP_P4
#define INA_TNA_BITMAP_P4

control Bitmap(inout tna_headers hdr, inout tna_ingress_metadata meta) {
    Register<pair_t, bit<32>>(INA_POOL_SLOTS) bitmap;

    RegisterAction<pair_t, bit<32>, bit<32>>(bitmap) open_set0 = {
        void apply(inout pair_t value, out bit<32> rv) { value.first = meta.me; rv = 0; }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(bitmap) open_set1 = {
        void apply(inout pair_t value, out bit<32> rv) { value.second = meta.me; rv = 0; }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(bitmap) join_set0 = {
        void apply(inout pair_t value, out bit<32> rv) { rv = value.first; value.first = value.first | meta.me; }
    };
    RegisterAction<pair_t, bit<32>, bit<32>>(bitmap) join_set1 = {
        void apply(inout pair_t value, out bit<32> rv) { rv = value.second; value.second = value.second | meta.me; }
    };

    action open0() { meta.old_bitmap = open_set0.execute(meta.slot_index); }
    action open1() { meta.old_bitmap = open_set1.execute(meta.slot_index); }
    action join0() { meta.old_bitmap = join_set0.execute(meta.slot_index); }
    action join1() { meta.old_bitmap = join_set1.execute(meta.slot_index); }

    apply {
        if (meta.round == ROUND_NEW) {        // stage 4
            if (hdr.ina.set == 0) { open0(); } else { open1(); }
        } else {
            if (hdr.ina.set == 0) { join0(); } else { join1(); }
        }
        meta.map_result = meta.old_bitmap & meta.me;   // stage 5
    }
}

#endif
