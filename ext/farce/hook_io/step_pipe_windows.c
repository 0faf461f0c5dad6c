/*
 * The step of a pipe on Windows, where only sockets can be waited on (AFD
 * polls sockets). A read of a pipe with nothing in it would block: the
 * transfer parks, polling the pipe from its fiber until it holds bytes
 * (where an exception or io_close can reach it), then reads what is there,
 * which does not wait. A write writes what fits now and, while nothing
 * fits, parks for a poll step and tries again (stream_offload_windows.c). A
 * pipe whose wait mode cannot be changed goes to the worker pool, as a file
 * does (step_file_windows.c). A fiber that cannot park makes the call
 * itself, and the thread waits, as a blocking fiber's does.
 */
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/stream_offload_windows.h"
#include "hook_io/transfer_step.h"

static int64_t pipe_read(farce_transfer *t)
{
    if (farce_win32_read_would_block(t->fd)) return -EAGAIN;
    size_t room = farce_win32_pipe_room(t->fd, t->room);
    if (!room) return farce_step_file(t); /* not a pipe after all */
    t->l->transfer_calls++;
    ssize_t n = read(t->fd, t->at, room);
    return n < 0 ? -errno : n;
}

static int64_t pipe_write(farce_transfer *t)
{
    t->l->transfer_calls++;
    ssize_t n = farce_win32_pipe_write_nowait(t->fd, t->at, t->room);
    if (n > 0) {
        t->poll_ns = 0; /* the next wait for room starts at the first poll step again */
        return n;
    }
    if (n == -EAGAIN) {
        if (!farce_transfer_may_wait(t) || farce_loop_can_park(t->l)) return -EAGAIN; /* farce_park_pipe */
        n = write(t->fd, t->at, t->room); /* the thread waits, as a blocking fiber's does */
        return n < 0 ? -errno : n;
    }
    if (n != -ENOTSUP) return n;
    return farce_step_file(t);
}

int64_t farce_step_pipe(farce_transfer *t) { return t->reading ? pipe_read(t) : pipe_write(t); }

void farce_park_pipe(farce_transfer *t)
{
    if (t->reading) {
        farce_win32_wait_stream(t->l, t->io, t->fd, RUBY_IO_READABLE, -1);
        return;
    }
    int64_t step = t->poll_ns ? t->poll_ns : FARCE_WIN32_FIRST_POLL_NS;
    farce_loop_park_polled(t->l, t->fd, step);
    t->poll_ns = farce_win32_next_poll_ns(step);
}
