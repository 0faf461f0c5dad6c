/*
 * The step of a descriptor that is pollable but neither a socket nor a pipe
 * (a tty, a character device, an eventfd), and of a pipe where the kernel
 * has no RWF_NOWAIT for pipes (step_pipe_unix.c): a plain read or write,
 * which must never block the thread. f->blocking was read when the IO took
 * the number, and `io.nonblock = false` (or a process sharing the file) may
 * have cleared O_NONBLOCK since, so the flags are read again before the
 * call; a descriptor found blocking is waited on before every call from
 * then on (farce_step_ready_first).
 */
#include <fcntl.h>
#include <unistd.h>
#include <ruby.h>
#include "hook_io/transfer_step.h"

ssize_t farce_terminal_call(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    if (!f->blocking) {
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && !(flags & O_NONBLOCK)) {
            f->blocking = 1;
            errno = EAGAIN; /* the caller waits for readiness, then calls again */
            return -1;
        }
    }
    return reading ? read(fd, at, room) : write(fd, at, room);
}

int64_t farce_step_terminal(farce_transfer *t)
{
    int64_t r = farce_step_ready_first(t);
    if (r) return r;
    t->l->transfer_calls++; /* stats: system calls per request */
    return farce_step_stream_result(t, farce_terminal_call(t->f, t->fd, t->reading, t->at, t->room));
}
