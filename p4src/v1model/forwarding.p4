/* forwarding.p4: what ina.p4 does with packets that are not aggregation packets.
 *
 * Plain IPv4 (20-byte header, TTL left) goes by longest-prefix match; UDP to our port that
 * did not parse as a whole INA header is counted as truncated and dropped; the rest is dropped.
 * Table and actions keep the control-plane names they had inside InaIngress (@name), so
 * the controller's entries and the P4Info do not change.
 */
#ifndef INA_V1MODEL_FORWARDING_P4
#define INA_V1MODEL_FORWARDING_P4

control Forwarding(inout ethernet_t ethernet, inout ipv4_t ipv4, in udp_t udp, inout metadata meta,
                   inout standard_metadata_t sm) {
    @name(".InaIngress.drop")
    action drop() { mark_to_drop(sm); }

    @name(".InaIngress.forward")
    action forward(bit<9> port, bit<48> dst_mac, bit<48> src_mac) {
        sm.egress_spec = port;
        ethernet.dst = dst_mac;
        ethernet.src = src_mac;
        ipv4.ttl = ipv4.ttl - 1;
    }

    @name(".InaIngress.ipv4_routes")
    table ipv4_routes {
        key = { ipv4.dst: lpm @name("hdr.ipv4.dst"); }
        actions = { forward; drop; }
        default_action = drop();
        size = ROUTE_ENTRIES;
    }

    apply {
        if (udp.isValid() && udp.dst_port == INA_UDP_PORT) {
            meta.count_drop = 1;  // UDP to our port without a whole header and values
            meta.drop_reason = DROP_TRUNCATED;
            drop();
        } else if (ipv4.isValid() && ipv4.ihl == 5 && ipv4.ttl > 1) {  // the checksum update covers 20 bytes
            ipv4_routes.apply();
        } else {
            drop();
        }
    }
}

#endif
