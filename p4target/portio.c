/* portio.c: the switch's raw ports served in batches, for a pipeline that runs natively.
 *
 * Per port, one recvmmsg() takes up to BATCH frames; each runs through the pipeline (a
 * function pointer: the program's p4t_process), its outputs are copied into the output port's
 * send batch, and every batch leaves with one sendmmsg().  Frames the kernel sent out of the
 * interface itself are skipped, VLAN tags the kernel moved into PACKET_AUXDATA are put back,
 * truncated frames are dropped (as ports.RawSocketPort does one frame at a time).  Outputs to
 * a port this loop does not own (the CPU port) are handed back to Python.
 *
 * Python waits with p4io_wait() holding no lock, then calls p4io_pump() under the switch's
 * lock, so the control plane changes tables between two pumps, never during one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/if_packet.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64
#define FRAME_MAX 65536
#define HEADROOM 4 /* room to put a VLAN tag back in front of the frame */
#define TX_BYTES (1 << 20)
#define MAX_PORTS 512
#define MAX_PUNTS 1024
#define PUNT_BYTES (4 << 20)

typedef int (*process_fn)(void *ctx, int port, const uint8_t *data, long len);

enum { RX_PACKETS, RX_BYTES, TX_PACKETS, TX_BYTES_, TX_ERRORS, PORT_STATS };

typedef struct {
    int fd, number, dead;
    int64_t stats[PORT_STATS];
    struct mmsghdr rx[BATCH];
    struct iovec rx_iov[BATCH];
    struct sockaddr_ll rx_addr[BATCH];
    uint8_t rx_ctl[BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];
    uint8_t *rx_buf; /* BATCH x (HEADROOM + FRAME_MAX) */
    int tx_n;
    long tx_used;
    struct mmsghdr tx[BATCH];
    struct iovec tx_iov[BATCH];
    uint8_t *tx_buf; /* TX_BYTES */
} io_port_t;

typedef struct {
    int n;
    io_port_t *ports[MAX_PORTS];
    int16_t by_number[MAX_PORTS];
    process_fn process;
    void *ctx;
    const uint8_t *out; /* the pipeline's outputs of one packet */
    const int32_t *out_port;
    const int64_t *out_off, *out_size;
    int next; /* the port the next pump starts with */
    int32_t n_punt;
    long punt_used;
    int32_t punt_port[MAX_PUNTS];
    int64_t punt_off[MAX_PUNTS], punt_size[MAX_PUNTS];
    uint8_t *punt_buf;
    int64_t punt_dropped;
} io_t;

io_t *p4io_new(void) {
    io_t *io = (io_t *)calloc(1, sizeof(io_t));
    if (!io) return 0;
    io->punt_buf = (uint8_t *)malloc(PUNT_BYTES);
    if (!io->punt_buf) {
        free(io);
        return 0;
    }
    for (int i = 0; i < MAX_PORTS; i++) io->by_number[i] = -1;
    return io;
}

void p4io_free(io_t *io) {
    if (!io) return;
    for (int i = 0; i < io->n; i++) {
        free(io->ports[i]->rx_buf);
        free(io->ports[i]->tx_buf);
        free(io->ports[i]);
    }
    free(io->punt_buf);
    free(io);
}

/* The socket stays Python's (it closes it); this loop only reads and writes it. */
int p4io_add_port(io_t *io, int fd, int number) {
    if (io->n >= MAX_PORTS || number < 0 || number >= MAX_PORTS) return -1;
    io_port_t *p = (io_port_t *)calloc(1, sizeof(io_port_t));
    if (!p) return -1;
    p->fd = fd;
    p->number = number;
    p->rx_buf = (uint8_t *)malloc((long)BATCH * (HEADROOM + FRAME_MAX));
    p->tx_buf = (uint8_t *)malloc(TX_BYTES);
    if (!p->rx_buf || !p->tx_buf) {
        free(p->rx_buf);
        free(p->tx_buf);
        free(p);
        return -1;
    }
    io->by_number[number] = (int16_t)io->n;
    io->ports[io->n++] = p;
    return 0;
}

void p4io_bind(io_t *io, process_fn process, void *ctx, const uint8_t *out, const int32_t *out_port,
               const int64_t *out_off, const int64_t *out_size) {
    io->process = process;
    io->ctx = ctx;
    io->out = out;
    io->out_port = out_port;
    io->out_off = out_off;
    io->out_size = out_size;
}

int64_t *p4io_port_stats(io_t *io, int i) { return io->ports[i]->stats; }
int p4io_port_dead(io_t *io, int i) { return io->ports[i]->dead; }
int32_t p4io_n_punt(io_t *io) { return io->n_punt; }
int32_t *p4io_punt_port(io_t *io) { return io->punt_port; }
int64_t *p4io_punt_off(io_t *io) { return io->punt_off; }
int64_t *p4io_punt_size(io_t *io) { return io->punt_size; }
uint8_t *p4io_punt_buf(io_t *io) { return io->punt_buf; }

/* Errors that cost one frame, not the port (ports.py's _DROP_ERRNOS). */
static int transient(int e) {
    return e == EAGAIN || e == ENOBUFS || e == ENOMEM || e == ENETDOWN || e == EMSGSIZE || e == EINVAL ||
           e == ENXIO || e == ENODEV || e == EINTR;
}

static void flush(io_port_t *p) {
    int done = 0;
    while (done < p->tx_n) {
        int sent = sendmmsg(p->fd, p->tx + done, p->tx_n - done, MSG_DONTWAIT);
        if (sent < 0) {
            if (!transient(errno)) p->dead = errno;
            p->stats[TX_ERRORS]++; /* this frame is lost; go on with the rest */
            done++;
            continue;
        }
        for (int i = done; i < done + sent; i++) {
            p->stats[TX_PACKETS]++;
            p->stats[TX_BYTES_] += p->tx_iov[i].iov_len;
        }
        done += sent;
    }
    p->tx_n = 0;
    p->tx_used = 0;
}

static void send_frame(io_t *io, io_port_t *p, const uint8_t *data, long len) {
    if (p->tx_n == BATCH || p->tx_used + len > TX_BYTES) flush(p);
    if (len > TX_BYTES) { /* alone too big for the batch buffer: send it as it is */
        if (send(p->fd, data, len, MSG_DONTWAIT) < 0) p->stats[TX_ERRORS]++;
        else {
            p->stats[TX_PACKETS]++;
            p->stats[TX_BYTES_] += len;
        }
        return;
    }
    (void)io;
    uint8_t *at = p->tx_buf + p->tx_used;
    memcpy(at, data, len);
    p->tx_used += len;
    struct iovec *iov = &p->tx_iov[p->tx_n];
    iov->iov_base = at;
    iov->iov_len = len;
    struct msghdr *m = &p->tx[p->tx_n].msg_hdr;
    memset(m, 0, sizeof(*m));
    m->msg_iov = iov;
    m->msg_iovlen = 1;
    p->tx_n++;
}

static void punt(io_t *io, int port, const uint8_t *data, long len) {
    if (io->n_punt >= MAX_PUNTS || io->punt_used + len > PUNT_BYTES) {
        io->punt_dropped++;
        return;
    }
    memcpy(io->punt_buf + io->punt_used, data, len);
    io->punt_port[io->n_punt] = port;
    io->punt_off[io->n_punt] = io->punt_used;
    io->punt_size[io->n_punt++] = len;
    io->punt_used += len;
}

/* Put back the 802.1Q tag the kernel stripped into auxdata (as libpcap does). */
static long restore_vlan(struct msghdr *m, uint8_t **data, long len) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_PACKET || c->cmsg_type != PACKET_AUXDATA) continue;
        struct tpacket_auxdata aux;
        memcpy(&aux, CMSG_DATA(c), sizeof(aux));
        if (!(aux.tp_status & TP_STATUS_VLAN_VALID) || len < 12) return len;
        uint16_t tpid = aux.tp_status & TP_STATUS_VLAN_TPID_VALID ? aux.tp_vlan_tpid : 0x8100;
        uint8_t *p = *data - HEADROOM;
        memmove(p, *data, 12);
        p[12] = tpid >> 8;
        p[13] = tpid & 0xFF;
        p[14] = aux.tp_vlan_tci >> 8;
        p[15] = aux.tp_vlan_tci & 0xFF;
        *data = p;
        return len + HEADROOM;
    }
    return len;
}

static int receive(io_t *io, io_port_t *p) {
    for (int i = 0; i < BATCH; i++) {
        p->rx_iov[i].iov_base = p->rx_buf + (long)i * (HEADROOM + FRAME_MAX) + HEADROOM;
        p->rx_iov[i].iov_len = FRAME_MAX;
        struct msghdr *m = &p->rx[i].msg_hdr;
        m->msg_name = &p->rx_addr[i];
        m->msg_namelen = sizeof(p->rx_addr[i]);
        m->msg_iov = &p->rx_iov[i];
        m->msg_iovlen = 1;
        m->msg_control = p->rx_ctl[i];
        m->msg_controllen = sizeof(p->rx_ctl[i]);
        m->msg_flags = 0;
    }
    int n = recvmmsg(p->fd, p->rx, BATCH, MSG_DONTWAIT | MSG_TRUNC, 0);
    if (n < 0) {
        if (!transient(errno)) p->dead = errno;
        return 0;
    }
    for (int i = 0; i < n; i++) {
        struct msghdr *m = &p->rx[i].msg_hdr;
        long len = p->rx[i].msg_len;
        if (p->rx_addr[i].sll_pkttype == PACKET_OUTGOING || (m->msg_flags & MSG_TRUNC) || len > FRAME_MAX) continue;
        uint8_t *data = (uint8_t *)p->rx_iov[i].iov_base;
        len = restore_vlan(m, &data, len);
        p->stats[RX_PACKETS]++;
        p->stats[RX_BYTES] += len;
        int k = io->process(io->ctx, p->number, data, len);
        for (int j = 0; j < k; j++) {
            int port = io->out_port[j];
            const uint8_t *frame = io->out + io->out_off[j];
            long size = io->out_size[j];
            int at = port >= 0 && port < MAX_PORTS ? io->by_number[port] : -1;
            if (at < 0) punt(io, port, frame, size);
            else if (io->ports[at]->dead) io->ports[at]->stats[TX_ERRORS]++;
            else send_frame(io, io->ports[at], frame, size);
        }
    }
    return n;
}

/* Wait until a port has frames (1), the timeout passes (0) or poll fails (-errno). */
int p4io_wait(io_t *io, int timeout_ms) {
    struct pollfd fds[MAX_PORTS];
    int n = 0;
    for (int i = 0; i < io->n; i++) {
        if (io->ports[i]->dead) continue;
        fds[n].fd = io->ports[i]->fd;
        fds[n].events = POLLIN;
        n++;
    }
    int r = poll(fds, n, timeout_ms);
    if (r < 0) return errno == EINTR ? 0 : -errno;
    return r > 0;
}

/* Serve what has arrived, at most `budget` frames, round robin over the ports; every send batch
 * is out when it returns.  Returns the frames received. */
int p4io_pump(io_t *io, int budget) {
    int total = 0, idle = 0;
    io->n_punt = 0;
    io->punt_used = 0;
    if (!io->process || io->n == 0) return 0;
    while (total < budget && idle < io->n) {
        io_port_t *p = io->ports[io->next];
        io->next = (io->next + 1) % io->n;
        int got = p->dead ? 0 : receive(io, p);
        idle = got ? 0 : idle + 1;
        total += got;
        for (int i = 0; i < io->n; i++)
            if (io->ports[i]->tx_n) flush(io->ports[i]);
    }
    return total;
}
