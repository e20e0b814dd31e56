/* parse_wire.p4: the parser states both programs share, from Ethernet to the values:
 * Eth/IPv4/UDP(INA_UDP_PORT)/ina_t/values.  Anything else is accepted as far as it goes
 * and forwarded by IPv4; a packet to our port without a whole header and values ends with
 * a parser error, counted as truncated.
 *
 * Included inside a parser body.  The first state is `parse_ethernet`, which the program's
 * start state transitions to; a program whose parser begins at Ethernet (v1model) defines
 * INA_PARSE_ETHERNET as `start` before the include instead, saving a state (and a step in
 * the executor's parse loop).  The includer names the packet `pkt` and the headers `hdr`, with
 * fields ethernet, ipv4, udp, ina and values (headers.p4's types).  P4 has no parser
 * composition across architectures, so the states are shared as text.  A program that parses
 * the values its own way (the TNA program) defines INA_VALUES_STATE as the state that does,
 * or as `accept` to leave them in the payload.
 */
#ifndef INA_PARSE_ETHERNET
#define INA_PARSE_ETHERNET parse_ethernet
#endif
    state INA_PARSE_ETHERNET {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { ETHERTYPE_IPV4: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, PROTO_UDP): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) { INA_UDP_PORT: parse_ina; default: accept; }
    }
    state parse_ina {
        pkt.extract(hdr.ina);
#ifdef INA_VALUES_STATE
        transition INA_VALUES_STATE;
#else
        pkt.extract(hdr.values);
        transition accept;
#endif
    }
#undef INA_PARSE_ETHERNET
#undef INA_VALUES_STATE
