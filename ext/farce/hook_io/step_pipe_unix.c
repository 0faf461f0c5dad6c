/*
 * The step of a pipe or FIFO: one preadv2/pwritev2 with RWF_NOWAIT, which
 * never blocks the thread whatever O_NONBLOCK says, with no other system
 * call. A kernel that refuses RWF_NOWAIT for pipes (before Linux 5.x)
 * answers EOPNOTSUPP once; pipes then take the terminal's call (the flags
 * read again first: step_terminal_unix.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <ruby.h>
#include "hook_io/transfer_step.h"

#ifdef RWF_NOWAIT
/* Cleared on EOPNOTSUPP. Every Ractor's threads read it at once, and any of
 * them may clear it: relaxed atomics, which compile to the plain load and
 * store (only ever from 1 to 0, so no answer is lost). */
static int nowait_pipes = 1;

/* FARCE_PIPE_NOWAIT=0 in the environment the process started with takes
 * the older kernel's path from the start, so that it is tested where the
 * kernel has RWF_NOWAIT (test_io.rb); qemu-user refuses it too. */
void farce_step_pipe_init(void)
{
    const char *nowait = getenv("FARCE_PIPE_NOWAIT");
    if (nowait && !strcmp(nowait, "0")) __atomic_store_n(&nowait_pipes, 0, __ATOMIC_RELAXED);
}

/* inlined into the step: the pipe ping-pong's every call */
static inline __attribute__((always_inline)) ssize_t pipe_call(farce_fd_ent *f, int fd, int reading, void *at,
                                                                size_t room)
{
    if (RB_LIKELY(__atomic_load_n(&nowait_pipes, __ATOMIC_RELAXED))) {
        struct iovec v = {at, room};
        ssize_t n = reading ? preadv2(fd, &v, 1, -1, RWF_NOWAIT) : pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
        if (n >= 0 || errno != EOPNOTSUPP) return n;
        __atomic_store_n(&nowait_pipes, 0, __ATOMIC_RELAXED); /* an older kernel */
    }
    return farce_terminal_call(f, fd, reading, at, room);
}
#else
void farce_step_pipe_init(void) {}

static inline ssize_t pipe_call(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    return farce_terminal_call(f, fd, reading, at, room);
}
#endif

ssize_t farce_pipe_call(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    return pipe_call(f, fd, reading, at, room);
}

int64_t farce_step_pipe(farce_transfer *t)
{
    int64_t r = farce_step_ready_first(t);
    if (r) return r;
    t->l->transfer_calls++; /* stats: system calls per request */
    return farce_step_stream_result(t, pipe_call(t->f, t->fd, t->reading, t->at, t->room));
}
