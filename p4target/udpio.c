/* udpio.c: one UDP socket of an aggregation server served in batches through a native pipeline.
 *
 * The program parses Ethernet/IPv4/UDP frames, so every received datagram gets the header a host
 * would have sent on the server's one port written in front of it: the source is the sender's
 * address, the destination the socket's own, lengths set, checksums 0, MACs 0.  recvmmsg() takes
 * up to BATCH datagrams; with UDP_GRO one datagram holds several segments (a sender's GSO send),
 * cut at the segment size the kernel gives in a cmsg.  Segment k's header overwrites the last bytes
 * of segment k - 1, already run (its outputs are copied out), so nothing is copied on the way in.
 *
 * Each output of the pipeline goes where the program deparsed it: its IPv4 destination and UDP
 * port, with the frame's headers stripped.  Outputs wait in a send buffer, grouped by destination;
 * a flush sends each destination's run of equal-size outputs as one UDP_SEGMENT (GSO) message, all
 * of them in one sendmmsg().  Outputs that are not IPv4/UDP frames are dropped and counted.
 *
 * Python waits with p4udp_wait() holding no lock, then calls p4udp_pump() under the lock that keeps
 * the control plane's table swaps out of a running batch.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/filter.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define WIRE_HEADER ((long)(sizeof(struct ether_header) + sizeof(struct iphdr) + sizeof(struct udphdr)))
#define BATCH 64 /* datagrams per recvmmsg */
#define DGRAM_MAX 65536
#define MAX_OUT 4096 /* outputs waiting for one flush */
#define TX_BYTES (8 << 20)
#define MAX_DESTS 64 /* destinations of one flush */
#define GSO_MAX_SEGMENTS 64 /* the kernel's UDP_MAX_SEGMENTS */
#define GSO_MAX_BYTES 65507 /* an IPv4 UDP datagram's payload */
#define SEND_CHUNK 1024 /* messages per sendmmsg (UIO_MAXIOV) */
#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

typedef int (*process_fn)(void *ctx, int port, const uint8_t *data, long len);

/* The counters; their names, in this order, are p4udp_stat_names(). */
enum { RX_DATAGRAMS, RX_SEGMENTS, RX_BYTES, RX_TRUNCATED, RX_NO_OUTPUT, TX_DATAGRAMS, TX_MESSAGES, TX_BYTES_,
       TX_NOT_UDP, TX_ERRORS, N_STATS };
static const char STAT_NAMES[] = "rx_datagrams,rx_segments,rx_bytes,rx_truncated,rx_no_output,tx_datagrams,"
                                 "tx_messages,tx_bytes,tx_not_udp,tx_errors";

typedef struct {
    uint32_t ip; /* network order */
    uint16_t port;
    int first, last; /* its outputs: a list through next[] */
} dest_t;

typedef struct {
    int fd, ingress_port, gso, dead;
    uint32_t my_ip; /* network order, as the synthesised headers carry them */
    uint16_t my_port;
    int64_t stats[N_STATS];
    process_fn process;
    void *ctx;
    const uint8_t *out;
    const int32_t *out_port;
    const int64_t *out_off, *out_size;
    /* receiving */
    struct mmsghdr rx[BATCH];
    struct iovec rx_iov[BATCH];
    struct sockaddr_in rx_addr[BATCH];
    uint8_t rx_ctl[BATCH][CMSG_SPACE(sizeof(int))];
    uint8_t *rx_buf; /* BATCH x (WIRE_HEADER + DGRAM_MAX) */
    /* outputs waiting: payloads in tx_buf, each in its destination's list */
    int n_out, n_dests;
    long tx_used;
    int64_t out_at[MAX_OUT];
    int32_t out_len[MAX_OUT], next[MAX_OUT];
    dest_t dests[MAX_DESTS];
    uint8_t *tx_buf;
    /* one flush's messages */
    struct mmsghdr tx[MAX_OUT];
    struct iovec tx_iov[MAX_OUT];
    struct sockaddr_in tx_addr[MAX_OUT];
    uint8_t tx_ctl[MAX_OUT][CMSG_SPACE(sizeof(uint16_t))];
} udp_t;

const char *p4udp_stat_names(void) { return STAT_NAMES; }
long p4udp_wire_header(void) { return WIRE_HEADER; }

/* The socket stays Python's (it binds and closes it); ip and port are the socket's, in network order. */
udp_t *p4udp_new(int fd, int ingress_port, uint32_t my_ip, uint16_t my_port, int gso) {
    udp_t *u = (udp_t *)calloc(1, sizeof(udp_t));
    if (!u) return 0;
    u->rx_buf = (uint8_t *)malloc((long)BATCH * (WIRE_HEADER + DGRAM_MAX));
    u->tx_buf = (uint8_t *)malloc(TX_BYTES);
    if (!u->rx_buf || !u->tx_buf) {
        free(u->rx_buf);
        free(u->tx_buf);
        free(u);
        return 0;
    }
    u->fd = fd;
    u->ingress_port = ingress_port;
    u->my_ip = my_ip;
    u->my_port = my_port;
    u->gso = gso;
    return u;
}

void p4udp_free(udp_t *u) {
    if (!u) return;
    free(u->rx_buf);
    free(u->tx_buf);
    free(u);
}

void p4udp_bind(udp_t *u, process_fn process, void *ctx, const uint8_t *out, const int32_t *out_port,
                const int64_t *out_off, const int64_t *out_size) {
    u->process = process;
    u->ctx = ctx;
    u->out = out;
    u->out_port = out_port;
    u->out_off = out_off;
    u->out_size = out_size;
}

int64_t *p4udp_stats(udp_t *u) { return u->stats; }
int p4udp_dead(udp_t *u) { return u->dead; }
int p4udp_gso(udp_t *u) { return u->gso; }

/* Steer the socket's SO_REUSEPORT group: a datagram goes to socket (the big-endian field of `bytes` (1, 2
 * or 4) at `offset` of its UDP payload) mod `n`, so a flow keyed by that field stays on one socket.
 * 0, or -errno. */
int p4udp_steer(int fd, int offset, int bytes, int n) {
    int size = bytes == 1 ? BPF_B : bytes == 2 ? BPF_H : BPF_W;
    struct sock_filter code[] = {
        {(uint16_t)(BPF_LD | size | BPF_ABS), 0, 0, (uint32_t)offset},
        {BPF_ALU | BPF_MOD | BPF_K, 0, 0, (uint32_t)n},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof(prog)) ? -errno : 0;
}

/* Errors that cost a batch, not the socket. */
static int transient(int e) {
    return e == EAGAIN || e == ENOBUFS || e == ENOMEM || e == EINTR || e == ECONNREFUSED || e == EHOSTUNREACH ||
           e == ENETUNREACH || e == EPERM || e == EMSGSIZE;
}

static int gso_refused(int e) { return e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP; }

static void count_sent(udp_t *u, const struct msghdr *m) {
    u->stats[TX_MESSAGES]++;
    for (size_t i = 0; i < m->msg_iovlen; i++) {
        u->stats[TX_DATAGRAMS]++;
        u->stats[TX_BYTES_] += m->msg_iov[i].iov_len;
    }
}

/* One GSO message the kernel refused, its segments one at a time. */
static void send_each(udp_t *u, struct msghdr *m) {
    for (size_t i = 0; i < m->msg_iovlen; i++) {
        struct msghdr one = {m->msg_name, m->msg_namelen, &m->msg_iov[i], 1, 0, 0, 0};
        if (sendmsg(u->fd, &one, MSG_DONTWAIT) < 0) u->stats[TX_ERRORS]++;
        else count_sent(u, &one);
    }
}

static void send_messages(udp_t *u, int n) {
    int done = 0;
    while (done < n) {
        int k = n - done < SEND_CHUNK ? n - done : SEND_CHUNK;
        int sent = sendmmsg(u->fd, u->tx + done, k, MSG_DONTWAIT);
        if (sent < 0) {
            struct msghdr *m = &u->tx[done].msg_hdr;
            if (m->msg_controllen && gso_refused(errno)) {
                u->gso = 0; /* this route cannot segment: every later message goes without GSO */
                send_each(u, m);
            } else {
                if (!transient(errno)) u->dead = errno;
                u->stats[TX_ERRORS] += (int64_t)m->msg_iovlen; /* this message is lost; go on */
            }
            done++;
            continue;
        }
        for (int i = done; i < done + sent; i++) count_sent(u, &u->tx[i].msg_hdr);
        done += sent;
    }
}

/* Every waiting output out: per destination, runs of equal size as GSO messages. */
static void flush(udp_t *u) {
    int n = 0, iov = 0;
    for (int d = 0; d < u->n_dests; d++) {
        dest_t *dest = &u->dests[d];
        for (int i = dest->first; i >= 0;) {
            int size = u->out_len[i], segments = 0, limit = u->gso ? GSO_MAX_BYTES / (size ? size : 1) : 1;
            if (limit > GSO_MAX_SEGMENTS) limit = GSO_MAX_SEGMENTS;
            struct iovec *first = &u->tx_iov[iov];
            while (i >= 0 && segments < limit && u->out_len[i] == size) {
                u->tx_iov[iov].iov_base = u->tx_buf + u->out_at[i];
                u->tx_iov[iov++].iov_len = size;
                segments++;
                i = u->next[i];
            }
            struct sockaddr_in *a = &u->tx_addr[n];
            memset(a, 0, sizeof(*a));
            a->sin_family = AF_INET;
            a->sin_addr.s_addr = dest->ip;
            a->sin_port = dest->port;
            struct msghdr *m = &u->tx[n].msg_hdr;
            memset(m, 0, sizeof(*m));
            m->msg_name = a;
            m->msg_namelen = sizeof(*a);
            m->msg_iov = first;
            m->msg_iovlen = segments;
            if (segments > 1) {
                m->msg_control = u->tx_ctl[n];
                m->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
                struct cmsghdr *c = CMSG_FIRSTHDR(m);
                c->cmsg_level = SOL_UDP;
                c->cmsg_type = UDP_SEGMENT;
                c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t gso_size = (uint16_t)size;
                memcpy(CMSG_DATA(c), &gso_size, sizeof(gso_size));
            }
            n++;
        }
    }
    send_messages(u, n);
    u->n_out = 0;
    u->n_dests = 0;
    u->tx_used = 0;
}

static void queue(udp_t *u, uint32_t ip, uint16_t port, const uint8_t *payload, long len) {
    if (u->n_out == MAX_OUT || u->tx_used + len > TX_BYTES) flush(u);
    int d = u->n_dests - 1; /* most often the last one seen */
    if (d < 0 || u->dests[d].ip != ip || u->dests[d].port != port)
        for (d = 0; d < u->n_dests && (u->dests[d].ip != ip || u->dests[d].port != port); d++) {
        }
    if (d == u->n_dests) {
        if (d == MAX_DESTS) {
            flush(u);
            d = 0;
        }
        dest_t fresh = {ip, port, -1, -1};
        u->dests[d] = fresh;
        u->n_dests = d + 1;
    }
    int i = u->n_out++;
    memcpy(u->tx_buf + u->tx_used, payload, len);
    u->out_at[i] = u->tx_used;
    u->out_len[i] = (int32_t)len;
    u->next[i] = -1;
    u->tx_used += len;
    dest_t *dest = &u->dests[d];
    if (dest->last >= 0) u->next[dest->last] = i;
    else dest->first = i;
    dest->last = i;
}

/* One output frame to its IPv4/UDP destination, or counted as not such a frame. */
static void send_output(udp_t *u, const uint8_t *frame, long size) {
    struct ether_header eth;
    struct iphdr ip;
    struct udphdr udp;
    if (size < WIRE_HEADER) goto not_udp;
    memcpy(&eth, frame, sizeof(eth));
    memcpy(&ip, frame + sizeof(eth), sizeof(ip));
    long at = (long)sizeof(eth) + ip.ihl * 4L; /* the UDP header, after the IPv4 options if any */
    if (ntohs(eth.ether_type) != ETHERTYPE_IP || ip.version != 4 || ip.ihl < 5 || ip.protocol != IPPROTO_UDP ||
        at + (long)sizeof(udp) > size)
        goto not_udp;
    memcpy(&udp, frame + at, sizeof(udp));
    at += sizeof(udp);
    if (!ip.daddr || !udp.dest || size - at > GSO_MAX_BYTES) goto not_udp;
    queue(u, ip.daddr, udp.dest, frame + at, size - at);
    return;
not_udp:
    u->stats[TX_NOT_UDP]++;
}

/* The frame a host would have sent on the server's port: `frame` has WIRE_HEADER bytes free before `len`
 * bytes of UDP payload. */
static void write_header(const udp_t *u, uint8_t *frame, const struct sockaddr_in *from, long len) {
    struct ether_header eth;
    struct iphdr ip;
    struct udphdr udp;
    memset(&eth, 0, sizeof(eth));
    eth.ether_type = htons(ETHERTYPE_IP);
    memset(&ip, 0, sizeof(ip));
    ip.version = 4;
    ip.ihl = sizeof(ip) / 4;
    ip.tot_len = htons((uint16_t)(sizeof(ip) + sizeof(udp) + len));
    ip.ttl = 64;
    ip.protocol = IPPROTO_UDP;
    ip.saddr = from->sin_addr.s_addr;
    ip.daddr = u->my_ip;
    udp.source = from->sin_port;
    udp.dest = u->my_port;
    udp.len = htons((uint16_t)(sizeof(udp) + len));
    udp.check = 0;
    memcpy(frame, &eth, sizeof(eth));
    memcpy(frame + sizeof(eth), &ip, sizeof(ip));
    memcpy(frame + sizeof(eth) + sizeof(ip), &udp, sizeof(udp));
}

static void run(udp_t *u, uint8_t *frame, long len) {
    u->stats[RX_SEGMENTS]++;
    int k = u->process(u->ctx, u->ingress_port, frame, len);
    if (k <= 0) {
        u->stats[RX_NO_OUTPUT]++;
        return;
    }
    for (int j = 0; j < k; j++) send_output(u, u->out + u->out_off[j], u->out_size[j]);
}

/* The UDP_GRO segment size of a received datagram, or its whole length. */
static long segment_size(struct msghdr *m, long len) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
            int size;
            memcpy(&size, CMSG_DATA(c), sizeof(size));
            return size > 0 ? size : len;
        }
    }
    return len;
}

/* One recvmmsg: every segment of every datagram through the pipeline.  Returns the segments. */
static int receive(udp_t *u) {
    for (int i = 0; i < BATCH; i++) {
        u->rx_iov[i].iov_base = u->rx_buf + (long)i * (WIRE_HEADER + DGRAM_MAX) + WIRE_HEADER;
        u->rx_iov[i].iov_len = DGRAM_MAX;
        struct msghdr *m = &u->rx[i].msg_hdr;
        m->msg_name = &u->rx_addr[i];
        m->msg_namelen = sizeof(u->rx_addr[i]);
        m->msg_iov = &u->rx_iov[i];
        m->msg_iovlen = 1;
        m->msg_control = u->rx_ctl[i];
        m->msg_controllen = sizeof(u->rx_ctl[i]);
        m->msg_flags = 0;
    }
    int n = recvmmsg(u->fd, u->rx, BATCH, MSG_DONTWAIT, 0);
    if (n < 0) {
        if (!transient(errno)) u->dead = errno;
        return 0;
    }
    int segments = 0;
    for (int i = 0; i < n; i++) {
        struct msghdr *m = &u->rx[i].msg_hdr;
        long len = u->rx[i].msg_len;
        u->stats[RX_DATAGRAMS]++;
        u->stats[RX_BYTES] += len;
        if ((m->msg_flags & MSG_TRUNC) || m->msg_namelen < sizeof(struct sockaddr_in) ||
            u->rx_addr[i].sin_family != AF_INET) {
            u->stats[RX_TRUNCATED]++;
            continue;
        }
        uint8_t *data = (uint8_t *)u->rx_iov[i].iov_base;
        long size = segment_size(m, len);
        long at = 0;
        do { /* an empty datagram runs too, as an empty frame payload */
            long part = len - at < size ? len - at : size;
            write_header(u, data + at - WIRE_HEADER, &u->rx_addr[i], part);
            run(u, data + at - WIRE_HEADER, WIRE_HEADER + part);
            segments++;
            at += size;
        } while (at < len);
    }
    return n > 0 ? segments + (segments == 0) : 0; /* a batch of dropped datagrams still counts as work */
}

/* Wait until the socket has datagrams (1), the timeout passes (0) or poll fails (-errno). */
int p4udp_wait(udp_t *u, int timeout_ms) {
    struct pollfd fd = {u->fd, POLLIN, 0};
    int r = poll(&fd, 1, timeout_ms);
    if (r < 0) return errno == EINTR ? 0 : -errno;
    return r > 0;
}

/* Serve what has arrived, until the socket is empty or about `budget` segments ran; every output is
 * out when it returns.  Returns the segments run. */
int p4udp_pump(udp_t *u, int budget) {
    int total = 0;
    if (!u->process || u->dead) return 0;
    while (total < budget) {
        int got = receive(u);
        if (!got) break;
        total += got;
        if (u->n_out) flush(u);
    }
    if (u->n_out) flush(u);
    return total;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Serve for up to `for_ms`: pump, and while datagrams keep coming within `idle_ms` of each other, pump again,
 * with no return to Python in between (its wake-up and lock cost as much as a small batch).  Returns the
 * segments run. */
long p4udp_serve(udp_t *u, int for_ms, int idle_ms) {
    long total = 0;
    double end = now_ms() + for_ms;
    for (;;) {
        total += p4udp_pump(u, BATCH * GSO_MAX_SEGMENTS);
        if (u->dead || now_ms() >= end || p4udp_wait(u, idle_ms) <= 0) return total;
    }
}
