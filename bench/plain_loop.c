/* plain_loop.c: bench_worker's "plain C" side, the most a worker's datapath could hope for on the
 * same sockets: no protocol, no quantization, no state but two counters.
 *
 * plain_loop moves ``total_bytes`` from ``src`` to the ideal switch (bench/ideal_switch.c) as packets
 * of the protocol's size (``header`` as given, then 4 * ``values`` bytes of payload; the last packet's
 * tail is zeros) and copies each result's payload into ``dst`` in the order results come (the ideal
 * switch answers each packet with itself, and loopback keeps order, so ``dst`` ends equal to ``src``:
 * the caller checks).  At most ``window`` packets are in flight: it sends whenever fewer are
 * outstanding (sent, less results received).  Sends are UDP GSO (UDP_SEGMENT set on the socket, as
 * worker/batch_io.py does; up to 64 packets and 65,507 bytes per sendmsg), falling back to sendmmsg
 * where GSO is refused.  Receives are UDP GRO (SOL_UDP UDP_GRO = 1: a run of segments comes as one
 * datagram, its segment size in a UDP_GRO cmsg), several of them per recvmmsg, falling back to
 * recvmmsg of single datagrams where GRO is refused.  It waits in poll() when it can send nothing and
 * nothing is waiting.  There is no resending: a packet lost is a timeout (-ETIMEDOUT).
 *
 * ``fd``: a non-blocking UDP socket, bound; ``to_ip``: 4 bytes of the switch's IPv4 address;
 * ``to_port``: its UDP port.  ``flags``: PLAIN_NO_GSO, PLAIN_NO_GRO to take the fallbacks.
 * ``stats`` (PLAIN_STATS int64s): packets sent, send syscalls, receive syscalls (those that returned
 * data or nothing), polls, whether GSO and GRO were used.  Returns the results received (the
 * packets), or -errno.  Called through ctypes, which releases the GIL for it. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#ifndef SOL_UDP
#define SOL_UDP 17
#endif

#define SEND_BATCH 64      /* the kernel's most segments per GSO send (UDP_MAX_SEGMENTS) */
#define MAX_DATAGRAM 65507 /* IPv4 UDP */
#define GRO_BUFFERS 8      /* coalesced datagrams per recvmmsg */
#define GRO_BYTES 65536    /* one coalesced datagram: at most 64 KB */
#define MMSG_BATCH 256     /* single datagrams per recvmmsg without GRO (as batch_io's RECEIVE_BATCH) */

#define PLAIN_NO_GSO 1
#define PLAIN_NO_GRO 2
enum { ST_PACKETS, ST_SENDS, ST_RECEIVES, ST_POLLS, ST_GSO, ST_GRO, PLAIN_STATS };

static int gso_refused(int e) { return e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP; }
static int full(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == ENOMEM; }

int64_t plain_loop(int fd, const uint8_t *to_ip, int to_port, const uint8_t *header, int header_bytes, int values,
                   int window, const uint8_t *src, uint8_t *dst, int64_t total_bytes, int timeout_ms, int flags,
                   int64_t *stats) {
    const int64_t payload = 4 * (int64_t)values, packet = header_bytes + payload;
    const int64_t packets = (total_bytes + payload - 1) / payload;
    int per_send = (int)(MAX_DATAGRAM / packet);
    if (per_send > SEND_BATCH) per_send = SEND_BATCH;
    if (per_send < 1 || window < 1 || header_bytes < 0 || values < 1) return -EINVAL;
    memset(stats, 0, PLAIN_STATS * sizeof(*stats));

    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)to_port);
    memcpy(&to.sin_addr, to_ip, 4);

    int gso = !(flags & PLAIN_NO_GSO), gro = !(flags & PLAIN_NO_GRO), one = 1, zero = 0;
    int segment = (int)packet;
    if (gso && setsockopt(fd, SOL_UDP, UDP_SEGMENT, &segment, sizeof(segment)) < 0) gso = 0;
    if (gro && setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) < 0) gro = 0;
    if (!gro) setsockopt(fd, SOL_UDP, UDP_GRO, &zero, sizeof(zero));

    /* the send buffer holds per_send packets, their headers written once */
    uint8_t *tx = malloc((size_t)per_send * packet);
    int nbuf = gro ? GRO_BUFFERS : MMSG_BATCH;
    size_t slot = gro ? GRO_BYTES : (size_t)packet + 64; /* larger than a packet, so an oversized one shows */
    uint8_t *rx = malloc((size_t)nbuf * slot);
    struct mmsghdr *rmsg = calloc(nbuf, sizeof(*rmsg)), txm[SEND_BATCH];
    struct iovec *riov = calloc(nbuf, sizeof(*riov)), tiov[SEND_BATCH];
    char (*control)[CMSG_SPACE(sizeof(int))] = calloc(nbuf, sizeof(*control));
    int64_t result = 0, sent = 0, received = 0;
    if (!tx || !rx || !rmsg || !riov || !control) {
        result = -ENOMEM;
        goto done;
    }
    for (int i = 0; i < per_send; i++) memcpy(tx + (size_t)i * packet, header, header_bytes);

    int blocked = 0; /* the send buffer was full: wait for POLLOUT too */
    while (received < packets) {
        int progress = 0;
        while (!blocked && sent < packets && sent - received < window) {
            int64_t k = per_send;
            if (k > window - (sent - received)) k = window - (sent - received);
            if (k > packets - sent) k = packets - sent;
            for (int64_t j = 0; j < k; j++) {
                int64_t at = (sent + j) * payload, n = total_bytes - at < payload ? total_bytes - at : payload;
                uint8_t *p = tx + (size_t)j * packet + header_bytes;
                memcpy(p, src + at, (size_t)n);
                if (n < payload) memset(p + n, 0, (size_t)(payload - n));
            }
            int64_t went = 0;
            if (gso) {
                struct iovec iov = {tx, (size_t)(k * packet)};
                struct msghdr m = {&to, sizeof(to), &iov, 1, 0, 0, 0};
                stats[ST_SENDS]++;
                if (sendmsg(fd, &m, MSG_DONTWAIT) >= 0) {
                    went = k;
                } else if (gso_refused(errno)) { /* the segment size applies to every send: off with it */
                    gso = 0;
                    setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero));
                    continue;
                } else if (!full(errno)) {
                    result = -errno;
                    goto done;
                }
            } else {
                for (int64_t j = 0; j < k; j++) {
                    tiov[j].iov_base = tx + (size_t)j * packet;
                    tiov[j].iov_len = (size_t)packet;
                    memset(&txm[j].msg_hdr, 0, sizeof(txm[j].msg_hdr));
                    txm[j].msg_hdr.msg_name = &to;
                    txm[j].msg_hdr.msg_namelen = sizeof(to);
                    txm[j].msg_hdr.msg_iov = &tiov[j];
                    txm[j].msg_hdr.msg_iovlen = 1;
                }
                stats[ST_SENDS]++;
                int n = sendmmsg(fd, txm, (unsigned)k, MSG_DONTWAIT);
                if (n > 0) {
                    went = n;
                } else if (n < 0 && !full(errno)) {
                    result = -errno;
                    goto done;
                }
            }
            if (went == 0) {
                blocked = 1;
                break;
            }
            sent += went;
            progress = 1;
        }

        for (int i = 0; i < nbuf; i++) {
            riov[i].iov_base = rx + (size_t)i * slot;
            riov[i].iov_len = slot;
            memset(&rmsg[i].msg_hdr, 0, sizeof(rmsg[i].msg_hdr));
            rmsg[i].msg_hdr.msg_iov = &riov[i];
            rmsg[i].msg_hdr.msg_iovlen = 1;
            if (gro) {
                rmsg[i].msg_hdr.msg_control = control[i];
                rmsg[i].msg_hdr.msg_controllen = sizeof(control[i]);
            }
        }
        stats[ST_RECEIVES]++;
        int n = recvmmsg(fd, rmsg, (unsigned)nbuf, MSG_DONTWAIT, NULL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            result = -errno;
            goto done;
        }
        for (int i = 0; i < n; i++) {
            struct msghdr *m = &rmsg[i].msg_hdr;
            int64_t len = rmsg[i].msg_len, size = len;
            if (m->msg_flags & MSG_TRUNC) {
                result = -EMSGSIZE;
                goto done;
            }
            if (gro) {
                for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
                    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                        int s;
                        memcpy(&s, CMSG_DATA(c), sizeof(s));
                        size = s;
                    }
            }
            if (size != packet || len % packet) { /* every packet, and so every result, is full size */
                result = -EBADMSG;
                goto done;
            }
            const uint8_t *seg = (const uint8_t *)riov[i].iov_base;
            for (int64_t s = 0; s < len / packet; s++, seg += packet, received++) {
                if (received >= sent) { /* more results than packets: not the ideal switch's answers */
                    result = -EPROTO;
                    goto done;
                }
                int64_t at = received * payload, c = total_bytes - at < payload ? total_bytes - at : payload;
                memcpy(dst + at, seg + header_bytes, (size_t)c);
            }
            progress = 1;
        }

        if (!progress && received < packets) {
            struct pollfd p = {fd, (short)(POLLIN | (blocked ? POLLOUT : 0)), 0};
            stats[ST_POLLS]++;
            int r = poll(&p, 1, timeout_ms);
            if (r < 0 && errno != EINTR) {
                result = -errno;
                goto done;
            }
            if (r == 0) {
                result = -ETIMEDOUT;
                goto done;
            }
            if (p.revents & POLLOUT) blocked = 0;
        } else if (blocked && progress) {
            blocked = 0; /* results freed room in the send buffer too, most likely: try again */
        }
    }
    result = received;
done:
    stats[ST_PACKETS] = sent;
    stats[ST_GSO] = gso;
    stats[ST_GRO] = gro;
    free(tx);
    free(rx);
    free(rmsg);
    free(riov);
    free(control);
    return result;
}
