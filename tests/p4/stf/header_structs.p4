/* header_structs.p4: headers with struct-typed fields.  P4-16 allows a header field whose
 * type is a struct of bit<W>, int<W>, bool or such structs; p4c's midend (FlattenHeaders)
 * puts the struct's fields into the header in its place, so on the wire they sit side by
 * side in declaration order, nested structs too.  Exercised: extract (fields not byte
 * aligned, and all whole bytes), emit, a select on a field two structs deep, exact table
 * keys on nested fields, reads and writes of nested fields, the whole struct read out of a
 * header into metadata and written back into another header (p4c's CopyStructures copies
 * it field by field), setValid() on a header holding a struct.
 *
 * Packet: r (row_h), then a (addr_h) when r.row.f.ack is true, then payload. */
#include <core.p4>
#include <v1model.p4>

struct flags_t {
    bit<1> urgent;
    bool   ack;
    bit<2> spare;
}

struct row_t {
    bit<8>  e;
    bit<16> t;
    flags_t f;    // a struct inside the struct
    bit<4>  l;
}                 // 32 bits on the wire: e t urgent ack spare l

struct addr_t {
    bit<16> hi;
    bit<16> lo;
}

header row_h {
    row_t row;    // the header's only field is a struct
}

header addr_h {
    bit<8> kind;
    addr_t addr;  // every field whole bytes
}

header copy_h {
    bit<8> tag;   // never written: 0 from setValid()
    row_t  row;   // written whole from metadata
    bit<8> tail;  // row.e + 0x10, read back through the header
}

struct headers {
    row_h  r;
    addr_h a;
    copy_h c;
}

struct metadata {
    row_t saved;
}

parser MyParser(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.r);
        transition select(hdr.r.row.f.ack) {
            true: parse_addr;
            default: accept;
        }
    }
    state parse_addr {
        pkt.extract(hdr.a);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action to(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }

    table by_row {
        key = {
            hdr.r.row.e: exact;
            hdr.r.row.f.urgent: exact;
        }
        actions = { to; drop; }
        default_action = drop();
        const entries = {
            (1, 0): to(1);
            (1, 1): to(2);
            (2, 0): to(3);
        }
    }

    apply {
        by_row.apply();
        hdr.r.row.l = hdr.r.row.l + 1;    // 4 bits: F wraps to 0
        if (hdr.a.isValid()) {
            hdr.a.addr.hi = hdr.a.addr.hi + hdr.a.addr.lo;
            hdr.a.kind = hdr.a.kind ^ 0xFF;
        }
        meta.saved = hdr.r.row;           // the whole struct out of the header
        meta.saved.t = meta.saved.t + 1;
        if (hdr.r.row.e == 2) {
            hdr.c.setValid();
            hdr.c.row = meta.saved;       // the whole struct into another header
            hdr.c.tail = hdr.c.row.e + 0x10;
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
