/* meeting.p4: a meeting root (nic.p4 only): the two ends of a circuit each sum half of a tree and
 * exchange their halves' sums, so every node has the total one step sooner than below one root
 * (NTT's optimised topology: 2h + 1 steps, h the farthest node's hops to the circuit).
 *
 * An end has is_root = 1, the circuit to the other end as its parent port (index_at_parent: its own
 * index there), and the other end as a child (meetings: `peer`, its index here).  Runs after the round
 * check (meta.arrived, meta.counted) and changes what SendResult does (docs/protocol.md, "Streaming
 * relays and meeting roots"):
 *   - a contribution with every child but the peer in: the sum goes to the peer (meta.to_peer);
 *   - a completion by any child but the peer: the peer never had our half, so the total goes to it too
 *     (multicast to group_with_peer; the job's own group holds the children without the peer);
 *   - a repeat while our half waits for the peer's: our half goes to the peer again (it may be lost).
 * A RESULT from the peer is a result from the parent (JobLookup), multicast without the peer.
 */
#ifndef INA_V1MODEL_MEETING_P4
#define INA_V1MODEL_MEETING_P4

control Meeting(in bit<16> job_id, in bit<8> msg_type, inout metadata meta) {
    bit<32> peer_bit = 0;

    @name(".InaIngress.meet")
    action meet(bit<8> peer, bit<16> group_with_peer) {
        peer_bit = (bit<32>)1 << peer;
        if (meta.completed == 1 && meta.me != peer_bit) {
            meta.group = group_with_peer;
        }
    }

    @name(".InaIngress.meetings")
    table meetings {
        key = { job_id: exact @name("hdr.ina.job_id"); }
        actions = { meet; NoAction; }
        default_action = NoAction();
        size = MEETING_ENTRIES;
    }

    apply {
        if (msg_type != MSG_DATA || meta.is_root == 0 || meta.from_parent == 1) {
            return;
        }
        if (meta.verdict != Verdict.FIRST && meta.verdict != Verdict.ADD
                && (meta.verdict != Verdict.DROP || meta.job_stat != JOB_STAT_RETRANSMITS)) {
            return;  // refused, stale, or an answer from a complete round: as ina.p4
        }
        if (!meetings.apply().hit) {
            return;
        }
        bool half = meta.arrived == meta.children - 1 && (meta.counted & peer_bit) == 0;
        if (meta.verdict == Verdict.DROP) {
            if (half) {
                meta.verdict = Verdict.ANSWER;  // our half again: ValueLanes reads it, SendResult sends it up
            }
        } else if (half && meta.completed == 0) {
            meta.to_peer = 1;
        }
    }
}

#endif
