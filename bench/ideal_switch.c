/* ideal_switch.c: bench_worker's switch, which is never the bottleneck: every contribution comes
 * back at once as its own result (one worker: the sum is its own values), its message type
 * turned into RESULT.  Batched as a Tofino's line rate allows us to pretend: recvmmsg takes up
 * to 64 datagrams, and each run of them from one sender with one length goes back to it in one
 * UDP GSO send (the kernel cuts it into the datagrams again before the sender's socket sees them).
 * Runs until the process is killed. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#define BATCH 64
#define SLOT 2048

static uint8_t buf[BATCH][SLOT];
static uint8_t out[BATCH * SLOT];

static int same_sender(const struct sockaddr_in *a, const struct sockaddr_in *b) {
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* One GSO send of ``count`` datagrams of ``size`` bytes; datagram by datagram if GSO is refused. */
static void send_run(int fd, const struct sockaddr_in *to, int size, int count) {
    char control[CMSG_SPACE(sizeof(uint16_t))] = {0};
    struct iovec iov = {out, (size_t)size * count};
    struct msghdr m = {(void *)to, sizeof(*to), &iov, 1, 0, 0, 0};
    if (count > 1) {
        m.msg_control = control;
        m.msg_controllen = sizeof(control);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_UDP;
        c->cmsg_type = UDP_SEGMENT;
        c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        *(uint16_t *)CMSG_DATA(c) = (uint16_t)size;
    }
    if (sendmsg(fd, &m, 0) >= 0 || count == 1) return;
    for (int i = 0; i < count; i++) {
        struct iovec one = {out + (size_t)i * size, (size_t)size};
        struct msghdr single = {(void *)to, sizeof(*to), &one, 1, 0, 0, 0};
        sendmsg(fd, &single, 0);
    }
}

int ideal_switch(int fd, int type_offset, int result_type) {
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 1000) < 0) return -1;
        for (;;) {
            for (int i = 0; i < BATCH; i++) {
                iov[i].iov_base = buf[i];
                iov[i].iov_len = SLOT;
                memset(&msgs[i].msg_hdr, 0, sizeof(msgs[i].msg_hdr));
                msgs[i].msg_hdr.msg_name = &from[i];
                msgs[i].msg_hdr.msg_namelen = sizeof(from[i]);
                msgs[i].msg_hdr.msg_iov = &iov[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
            }
            int n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, 0);
            if (n <= 0) break;
            for (int i = 0; i < n;) {
                int size = (int)msgs[i].msg_len, count = 0;
                while (i + count < n && (int)msgs[i + count].msg_len == size &&
                       same_sender(&from[i], &from[i + count]) && (size_t)size * (count + 1) <= 65000) {
                    memcpy(out + (size_t)count * size, buf[i + count], (size_t)size);
                    if (size > type_offset) out[(size_t)count * size + type_offset] = (uint8_t)result_type;
                    count++;
                }
                send_run(fd, &from[i], size, count);
                i += count;
            }
        }
    }
}
