/*
 * The step of a descriptor that is pollable but neither a socket nor a pipe
 * (a tty, a character device, an eventfd), and of a pipe where the kernel
 * has no RWF_NOWAIT for pipes (step_pipe_unix.c): a plain read or write,
 * which must never block the thread. f->blocking was read when the IO took
 * the number, and `io.nonblock = false` (or a process sharing the file) may
 * have cleared O_NONBLOCK since, so the flags are read again before the
 * call; a descriptor found blocking is waited on before every call from
 * then on (farce_step_ready_first), and written PIPE_BUF bytes at a time.
 */
#include <fcntl.h>
#include <limits.h>
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
    if (reading) return read(fd, at, room); /* once readable, read returns what there is */
    /* A blocking write returns only once all of it is taken, which can
     * wait for a reader that is a fiber of this same thread: a deadlock
     * (300 KB through a blocking pipe hung Ruby 3.1's suite under qemu,
     * which refuses RWF_NOWAIT). The descriptor polled writable first
     * (farce_step_ready_first), and a pipe that polls writable has a free
     * slot in its ring, where PIPE_BUF bytes always fit at once; the loop
     * calls again for the rest. */
    if (f->blocking && room > PIPE_BUF) room = PIPE_BUF;
    return write(fd, at, room);
}

int64_t farce_step_terminal(farce_transfer *t)
{
    int64_t r = farce_step_ready_first(t);
    if (r) return r;
    t->l->transfer_calls++; /* stats: system calls per request */
    return farce_step_stream_result(t, farce_terminal_call(t->f, t->fd, t->reading, t->at, t->room));
}
