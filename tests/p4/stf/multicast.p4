/* multicast.p4: multicast replication and drops.
 *   op 1: mcast_grp from table t_mc (group 1 in the STF file)
 *   op 2: mcast_grp set to the constant 2; the copy whose egress_rid is 99
 *         is dropped in egress
 *   op 3: mark_to_drop in ingress -> no output
 *   op 4: unicast to port 4, dropped in egress by mark_to_drop -> no output
 *   op 5: unicast to port 5 (instance_type 0, egress_rid 0)
 *   op 6: mcast_grp = 1, then mark_to_drop (which also clears mcast_grp)
 *         -> no output
 *   op 7: mark_to_drop, then egress_spec = 5: the later write wins -> port 5
 * Egress writes egress_rid, egress_port and instance_type into the packet. */
#include <core.p4>
#include <v1model.p4>

header d_t {
    bit<8>  op;
    bit<16> rid;    // written in egress: standard_metadata.egress_rid
    bit<8>  port;   // written in egress: (bit<8>)standard_metadata.egress_port
    bit<8>  itype;  // written in egress: (bit<8>)standard_metadata.instance_type
}

struct metadata { }

struct headers {
    d_t d;
}

parser MyParser(packet_in packet,
                out headers hdr,
                inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.d);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action set_mcast(bit<16> grp) {
        standard_metadata.mcast_grp = grp;
    }

    table t_mc {
        key = {
            hdr.d.op: exact;
        }
        actions = {
            set_mcast;
            NoAction;
        }
        default_action = NoAction();
    }

    apply {
        if (hdr.d.op == 1) {
            t_mc.apply();
        } else if (hdr.d.op == 2) {
            standard_metadata.mcast_grp = 2;
        } else if (hdr.d.op == 3) {
            mark_to_drop(standard_metadata);
        } else if (hdr.d.op == 4) {
            standard_metadata.egress_spec = 4;
        } else if (hdr.d.op == 5) {
            standard_metadata.egress_spec = 5;
        } else if (hdr.d.op == 6) {
            standard_metadata.mcast_grp = 1;
            mark_to_drop(standard_metadata);
        } else if (hdr.d.op == 7) {
            mark_to_drop(standard_metadata);
            standard_metadata.egress_spec = 5;
        } else {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.d.rid = standard_metadata.egress_rid;
        hdr.d.port = (bit<8>)standard_metadata.egress_port;
        hdr.d.itype = (bit<8>)standard_metadata.instance_type;
        if (hdr.d.op == 4 || standard_metadata.egress_rid == 99) {
            mark_to_drop(standard_metadata);
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.d);
    }
}

V1Switch(
    MyParser(),
    MyVerifyChecksum(),
    MyIngress(),
    MyEgress(),
    MyComputeChecksum(),
    MyDeparser()
) main;
