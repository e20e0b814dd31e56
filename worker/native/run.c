/* run.c: core.c's steps on real UDP sockets, a whole call (or a slice of it) in one C loop, without the GIL:
 * worker/driver.py's loop in C.  Each tree has a non-blocking socket; a step's datagrams leave in UDP GSO
 * sends (one sendmsg per run of up to 64 packets, the kernel cuts them; sendmmsg where GSO is refused);
 * results come in with UDP GRO where the kernel offers it (a run of segments as one datagram, its segment
 * size in a cmsg), several per recvmmsg; the loop waits in ppoll (nanoseconds, as the timers need) until
 * the core's next deadline, a result, or room in a full send buffer.  The clock is CLOCK_MONOTONIC, the
 * one Python's time.monotonic() reads, so the deadlines and the driver's stall checks agree. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GSO_MAX_SEGMENTS 64
#define MAX_DATAGRAM 65507
#define RX_MESSAGES 8
/* Results that trickle in behind a standing queue (a slow link: Mininet's 50 Mbit/s holds a 64-slot window
 * about 10 ms) are taken a few per wake: after a step the loop naps an eighth of the queue's wait (srtt less
 * the least round trip), then takes what came.  The queue hides the nap from the link (it stays busy), and
 * one wake per few results instead of one per result is most of a slow link's CPU (a context switch, a ppoll,
 * a recvmmsg and a send each).  Where no queue stands (a datacenter path) there is no nap. */
#define GATHER_SHARE 0.125
#define GATHER_MIN 50e-6
#define GATHER_MAX 1e-3

double ina_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int lost_errno(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == ENOMEM; }
static int gso_refused(int e) { return e == EIO || e == EINVAL || e == ENOPROTOOPT || e == EOPNOTSUPP; }

/* Send rows [0, count) of ``packet_bytes`` each; returns how many went before the send buffer filled,
 * or -errno on an error that is not a full buffer. */
static int64_t send_rows(ina_port *p, const uint8_t *rows, int64_t count, int32_t packet_bytes, ina_stats *st) {
    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = p->address;
    to.sin_port = p->port;
    int64_t per = MAX_DATAGRAM / packet_bytes;
    if (per > GSO_MAX_SEGMENTS) per = GSO_MAX_SEGMENTS;
    if (per < 1) per = 1;
    int64_t sent = 0;
    while (sent < count) {
        int64_t k = count - sent < per ? count - sent : per;
        const uint8_t *part = rows + sent * packet_bytes;
        st->syscalls += 1;
        if (p->gso) {
            struct iovec iov = {(void *)part, (size_t)(k * packet_bytes)};
            struct msghdr m = {&to, sizeof(to), &iov, 1, NULL, 0, 0};
            if (sendmsg(p->fd, &m, MSG_DONTWAIT) >= 0) {
                sent += k;
                continue;
            }
            int e = errno;
            if (gso_refused(e)) {  /* the socket's segment size applies to every send: off with it */
                int zero = 0;
                p->gso = 0;
                setsockopt(p->fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero));
            } else if (lost_errno(e)) {
                return sent;
            } else {
                return -e;
            }
        }
        struct mmsghdr msgs[GSO_MAX_SEGMENTS];
        struct iovec iovs[GSO_MAX_SEGMENTS];
        for (int64_t i = 0; i < k; i++) {
            iovs[i].iov_base = (void *)(part + i * packet_bytes);
            iovs[i].iov_len = (size_t)packet_bytes;
            memset(&msgs[i], 0, sizeof(msgs[i]));
            msgs[i].msg_hdr.msg_name = &to;
            msgs[i].msg_hdr.msg_namelen = sizeof(to);
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int n = sendmmsg(p->fd, msgs, (unsigned)k, MSG_DONTWAIT);
        if (n < 0) return lost_errno(errno) ? sent : -errno;
        sent += n;
        if (n < k) return sent;
    }
    return sent;
}

/* Pending rows first, then this segment: what the send buffer refuses waits in the port's pending rows. */
static int64_t flush(ina_port *p, int32_t packet_bytes, ina_stats *st) {
    if (!p->pending) return 0;
    int64_t went = send_rows(p, p->pending_rows, p->pending, packet_bytes, st);
    if (went < 0) return went;
    if (went) memmove(p->pending_rows, p->pending_rows + went * packet_bytes, (size_t)((p->pending - went) * packet_bytes));
    p->pending -= went;
    return 0;
}

static int64_t transmit(ina_port *p, const uint8_t *rows, int64_t count, int32_t packet_bytes, ina_stats *st) {
    int64_t went = 0;
    if (!p->pending) {
        went = send_rows(p, rows, count, packet_bytes, st);
        if (went < 0) return went;
    }
    int64_t left = count - went, room = p->pending_cap - p->pending;
    if (left > room) left = room;  /* beyond the pending room: lost, as on a wire; the timers send it again */
    if (left > 0) {
        memcpy(p->pending_rows + p->pending * packet_bytes, rows + went * packet_bytes, (size_t)(left * packet_bytes));
        p->pending += left;
    }
    return 0;
}

/* Every datagram waiting on the port, handed to its call a run at a time. */
static int64_t drain(ina_port *p, ina_call *c, int32_t packet_bytes, ina_stats *st) {
    struct mmsghdr msgs[RX_MESSAGES];
    struct iovec iovs[RX_MESSAGES];
    char control[RX_MESSAGES][CMSG_SPACE(sizeof(int))];
    int64_t lengths[GSO_MAX_SEGMENTS * 4];
    int64_t per = p->rx_bytes / RX_MESSAGES;
    for (;;) {
        for (int i = 0; i < RX_MESSAGES; i++) {
            iovs[i].iov_base = p->rx + i * per;
            iovs[i].iov_len = (size_t)per;
            memset(&msgs[i], 0, sizeof(msgs[i]));
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = control[i];
            msgs[i].msg_hdr.msg_controllen = sizeof(control[i]);
        }
        st->syscalls += 1;
        int n = recvmmsg(p->fd, msgs, RX_MESSAGES, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
            return -errno;
        }
        if (n == 0) return 0;
        double now = ina_now();
        for (int i = 0; i < n; i++) {
            int64_t len = msgs[i].msg_len, seg = len;
            for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msgs[i].msg_hdr); cm; cm = CMSG_NXTHDR(&msgs[i].msg_hdr, cm))
                if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
                    int size;
                    memcpy(&size, CMSG_DATA(cm), sizeof(size));
                    if (size > 0) seg = size;
                }
            if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) len = per;  /* longer than a buffer: cut short */
            if (seg <= 0) {  /* an empty datagram: foreign */
                int64_t zero = 0;
                ina_receive(c, p->rx + i * per, 1, &zero, 1, now);
                continue;
            }
            int64_t k = (len + seg - 1) / seg;
            if (k > (int64_t)(sizeof(lengths) / sizeof(lengths[0]))) k = sizeof(lengths) / sizeof(lengths[0]);
            for (int64_t j = 0; j < k; j++) lengths[j] = j < k - 1 ? seg : len - (k - 1) * seg;
            /* a row is read up to the packet's size: a segment shorter than that is refused by its length */
            ina_receive(c, p->rx + i * per, seg, lengths, k, now);
        }
        if (n < RX_MESSAGES) return 0;
    }
}

/* How long results may gather before the loop takes them: the least over the running trees, 0 for none. */
static double gather_time(ina_call **calls, int32_t ncalls) {
    double d = GATHER_MAX;
    for (int32_t i = 0; i < ncalls; i++) {
        const ina_congestion *c = &calls[i]->tree->congestion;
        if (ina_complete(calls[i])) continue;
        if (!c->has_srtt) return 0;
        double q = GATHER_SHARE * (c->srtt - c->rtt_min);
        if (q < d) d = q;
    }
    return d >= GATHER_MIN ? d : 0;
}

static void nap(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Every port's waiting datagrams; returns how many results came (negative: -errno). */
static int64_t drain_all(ina_run_args *a, const struct pollfd *fds) {
    int64_t before = 0, after = 0;
    for (int32_t i = 0; i < a->nports; i++) before += a->ports[i].tree->stats.results;
    for (int32_t i = 0; i < a->nports; i++) {
        ina_port *p = &a->ports[i];
        if (p->call && (!fds || (fds[i].revents & (POLLIN | POLLERR)))) {
            int64_t e = drain(p, p->call, p->tree->config->packet_bytes, &p->tree->stats);
            if (e < 0) return e;
        }
    }
    for (int32_t i = 0; i < a->nports; i++) after += a->ports[i].tree->stats.results;
    return after - before;
}

/* The step's datagrams, each on its tree's socket (what a full send buffer refuses waits as pending). */
static int64_t send_outbox(ina_run_args *a) {
    for (int32_t s = 0; s < a->out->n_segments; s++) {
        ina_segment *seg = &a->out->segments[s];
        ina_port *p = NULL;
        for (int32_t i = 0; i < a->nports && !p; i++)
            if (a->ports[i].tree == seg->tree) p = &a->ports[i];
        if (!p) continue;
        int64_t e = transmit(p, seg->rows, seg->count, seg->tree->config->packet_bytes, &p->tree->stats);
        if (e < 0) return e;
    }
    return 0;
}

/* Results let gather behind a standing queue (GATHER_SHARE): how many came (0: none, or no nap). */
static int64_t gathered(ina_run_args *a) {
    double gather = gather_time(a->calls, a->ncalls), t = ina_now();
    for (int32_t i = 0; i < a->nports; i++)
        if (a->ports[i].pending) return 0;
    if (!(gather > 0 && a->out->wake - t > gather && a->until - t > gather)) return 0;
    nap(gather);
    for (int32_t i = 0; i < a->nports; i++) a->ports[i].tree->stats.polls += 1;
    return drain_all(a, NULL);
}

int32_t ina_run(ina_run_args *a) {
    ina_call **calls = a->calls;
    int32_t ncalls = a->ncalls;
    for (;;) {
        int32_t running = 0;
        for (int32_t i = 0; i < ncalls; i++) running += !ina_complete(calls[i]);
        if (!running) {
            int pending = 0;
            for (int32_t i = 0; i < a->nports; i++) pending |= a->ports[i].pending > 0;
            if (!pending) return INA_RUN_DONE;
        }
        if (a->stop && *a->stop) return INA_RUN_STOPPED;
        double now = ina_now();
        if (now >= a->until) return INA_RUN_SLICE;
        for (int32_t i = 0; i < a->nports; i++) {
            int64_t e = flush(&a->ports[i], calls[0]->tree->config->packet_bytes, &a->ports[i].tree->stats);
            if (e < 0) {
                a->error = (int32_t)-e;
                return INA_RUN_OS_ERROR;
            }
        }
        if (running) {
            int32_t failed = ina_step(calls, ncalls, a->idle, a->nidle, now, a->out);
            if (failed >= 0) {
                a->failed = failed;
                return INA_RUN_FAILED;
            }
            int64_t e = send_outbox(a);
            if (e >= 0) e = gathered(a);
            if (e < 0) {
                a->error = (int32_t)-e;
                return INA_RUN_OS_ERROR;
            }
            if (e > 0) continue;
        }
        struct pollfd fds[a->nports > 0 ? a->nports : 1];
        for (int32_t i = 0; i < a->nports; i++) {
            fds[i].fd = a->ports[i].fd;
            fds[i].events = (a->ports[i].call && !ina_complete(a->ports[i].call) ? POLLIN : 0)
                            | (a->ports[i].pending ? POLLOUT : 0);
            fds[i].revents = 0;
        }
        double wait = (running ? a->out->wake : INFINITY) - ina_now();
        if (wait > a->max_wait) wait = a->max_wait;
        if (wait > a->until - now) wait = a->until - now;
        if (!(wait > 0)) wait = 0;
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        int r = ppoll(fds, (nfds_t)a->nports, &ts, NULL);
        for (int32_t i = 0; i < a->nports; i++) a->ports[i].tree->stats.polls += 1;
        if (r < 0 && errno != EINTR) {
            a->error = errno;
            return INA_RUN_OS_ERROR;
        }
        if (r > 0) {
            int64_t got = drain_all(a, fds);
            if (got < 0) {
                a->error = (int32_t)-got;
                return INA_RUN_OS_ERROR;
            }
        }
    }
}
