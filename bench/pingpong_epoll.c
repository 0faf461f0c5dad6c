/* The kernel's limit for bench's ping-pong: the same pipe ping-pong as the
 * `pingpong` workload (pairs of endpoints bouncing one byte over two pipes),
 * with no Ruby at all: one thread, non-blocking pipes (or socketpairs), one epoll set, and a
 * read/write only for a descriptor epoll reported. No scheduler can beat it;
 * bench/runner.rb builds it with gcc and reports it as a reference row.
 *
 *   pingpong_epoll PAIRS SECONDS [pipe|socket]    prints {"round_trips_per_second":N,...}
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

struct pair {
    int ping_r, ping_w; /* pinger -> ponger */
    int pong_r, pong_w; /* ponger -> pinger */
    long trips;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* epoll's data: pair index * 2, +1 for the pinger's end (pong_r) */
int main(int argc, char **argv)
{
    int pairs = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    int sockets = argc > 3 && strcmp(argv[3], "socket") == 0; /* socketpairs instead of pipes */
    if (pairs < 1 || seconds <= 0) {
        fprintf(stderr, "usage: %s PAIRS SECONDS [pipe|socket]\n", argv[0]);
        return 2;
    }
    struct pair *p = calloc(pairs, sizeof *p);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!p || ep < 0) die("setup");
    for (int i = 0; i < pairs; i++) {
        int a[2], b[2];
        if (sockets ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a) ||
                          socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b)
                    : pipe2(a, O_NONBLOCK | O_CLOEXEC) || pipe2(b, O_NONBLOCK | O_CLOEXEC))
            die(sockets ? "socketpair" : "pipe2");
        p[i] = (struct pair){a[0], a[1], b[0], b[1], 0};
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i * 2};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, p[i].ping_r, &ev)) die("epoll_ctl");
        ev.data.u64 = (uint64_t)i * 2 + 1;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, p[i].pong_r, &ev)) die("epoll_ctl");
    }
    char byte = 'x';
    double start = now(), deadline = start + seconds;
    for (int i = 0; i < pairs; i++)
        if (write(p[i].ping_w, &byte, 1) != 1) die("write");
    struct epoll_event evs[256];
    int live = pairs;
    while (live > 0) {
        int n = epoll_wait(ep, evs, 256, 1000);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        double t = now();
        for (int k = 0; k < n; k++) {
            struct pair *q = &p[evs[k].data.u64 / 2];
            int pinger = evs[k].data.u64 & 1;
            int fd = pinger ? q->pong_r : q->ping_r;
            ssize_t got = read(fd, &byte, 1);
            if (got < 0 && errno == EAGAIN) continue;
            if (got != 1) die("read");
            if (!pinger) {
                if (write(q->pong_w, &byte, 1) != 1) die("write");
            } else {
                q->trips++;
                if (t < deadline) {
                    if (write(q->ping_w, &byte, 1) != 1) die("write");
                } else {
                    epoll_ctl(ep, EPOLL_CTL_DEL, q->pong_r, NULL);
                    live--;
                }
            }
        }
    }
    double elapsed = now() - start;
    long total = 0;
    for (int i = 0; i < pairs; i++) total += p[i].trips;
    printf("{\"contender\":\"c-epoll\",\"workload\":\"pingpong\",\"versions\":{},"
           "\"result\":{\"round_trips_per_second\":%.0f,\"pairs\":%d,\"elapsed_s\":%.3f}}\n",
           total / elapsed, pairs, elapsed);
    return 0;
}
