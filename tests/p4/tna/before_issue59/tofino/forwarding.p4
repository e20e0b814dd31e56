/* forwarding.p4: plain IPv4 traffic (baselines, rendezvous) by longest prefix, as ina.p4. */
#ifndef INA_TNA_FORWARDING_P4
#define INA_TNA_FORWARDING_P4

control Forwarding(inout tna_headers hdr,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action drop() { ig_dprsr_md.drop_ctl = 1; }

    action forward(PortId_t port, bit<48> dst_mac, bit<48> src_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst = dst_mac;
        hdr.ethernet.src = src_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    table ipv4_routes {
        key = { hdr.ipv4.dst: lpm; }
        actions = { forward; drop; }
        default_action = drop();
        size = ROUTE_ENTRIES;
    }

    apply {
        /* TTL <= 1 and IPv4 options (the checksum update covers 20 bytes) are dropped. */
        if (hdr.ipv4.isValid() && hdr.ipv4.ihl == 5 && hdr.ipv4.ttl > 1) {
            ipv4_routes.apply();
        } else {
            drop();
        }
    }
}

#endif
