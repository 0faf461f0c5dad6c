/*
 * The parts of a transfer (io_transfer.c's loop): the state one transfer
 * carries from step to step, and the steps the descriptor table picks for
 * each kind of descriptor (loop/fd_table.h). Each step lives in a file
 * named for it:
 *
 *   step_readiness.c      what every step of a descriptor with a kernel wait does first, and its park
 *   step_socket.c         a socket: recv/send with MSG_DONTWAIT
 *   step_pipe_unix.c      a pipe or FIFO: preadv2/pwritev2 with RWF_NOWAIT
 *   step_terminal_unix.c  anything else pollable (a tty): O_NONBLOCK read again first
 *   step_file_unix.c      a regular file: the page cache, an operation, or the worker pool
 *   step_completion.c     a socket or pipe when the core performs operations (io_uring)
 *   step_positional.c     pread/pwrite at a file position
 *   step_pipe_windows.c   a Windows pipe: polled from its fiber
 *   step_file_windows.c   a Windows file or console: the worker pool
 *
 * and steps_unix.c / steps_windows.c say which kind takes which.
 */
#ifndef FARCE_TRANSFER_STEP_H
#define FARCE_TRANSFER_STEP_H 1

#include <errno.h>
#include <sys/types.h>
#include "hook_io/caller_may_wait.h"
#include "loop/event_loop.h"
#include "loop/wait_table.h"

enum farce_direction { FARCE_READ, FARCE_WRITE };

typedef struct farce_transfer {
    farce_loop *l;
    VALUE io, buffer, length_v;
    farce_fd_ent *f; /* fd's entry, asked again before every step (the table may grow while a fiber parks) */
    int fd;          /* asked again before every step too: another fiber may have closed io */
    uint8_t reading;
    int8_t may_wait; /* 1, 0, or -1: not asked yet (farce_transfer_may_wait) */
    uint8_t waited;  /* the last step parked: the next one tries the call, whatever it knew before */
    uint8_t known;   /* what the next readiness park knows (FARCE_KNOWN_*) */
    char *at;        /* where this step's bytes go or come from */
    size_t offset, length, room, total;
    off_t from;      /* the file position of a positional transfer, or -1 */
    int64_t poll_ns; /* a Windows pipe write's next poll step (0: the first) */
    VALUE done;      /* the whole transfer's result, when a step made all of it (FARCE_STEP_DONE) */
} farce_transfer;

/* A step's answer that the step made the whole transfer: its result is
 * t->done. */
#define FARCE_STEP_DONE INT64_MIN

/* Whether the caller may wait: yes for any length above 0; for a length of
 * 0, no when the Ruby method that called the hook is a *_nonblock one
 * (caller_may_wait.c), asked once per transfer and only when it would wait. */
static inline int farce_transfer_may_wait(farce_transfer *t)
{
    if (RB_UNLIKELY(t->may_wait < 0)) t->may_wait = !farce_caller_is_nonblock();
    return t->may_wait;
}

static inline int farce_transfer_events(const farce_transfer *t)
{
    return t->reading ? RUBY_IO_READABLE : RUBY_IO_WRITABLE;
}

/* ---- readiness (step_readiness.c) ----------------------------------------
 * Before a stream step's call: 0 to make it; -EAGAIN to park first (a read
 * of a stream the last read drained, or any call on a blocking descriptor,
 * whose call would block the thread), or, for a caller that may not wait,
 * because a blocking descriptor is not ready now. A drained stream is just
 * tried when the caller may not wait. */
int64_t farce_step_ready_first_slow(farce_transfer *t);
static inline int64_t farce_step_ready_first(farce_transfer *t)
{
    if (t->waited || RB_LIKELY(!(t->reading && t->f->drained) && !t->f->blocking)) return 0;
    return farce_step_ready_first_slow(t);
}
/* A stream call's return, as a step answers: the count or -errno, and what
 * a read teaches about the stream (a short read drained it). */
static inline int64_t farce_step_stream_result(farce_transfer *t, ssize_t n)
{
    if (n < 0) return -errno;
    if (t->reading && n > 0) {
        t->f->drained = t->f->stream && (size_t)n < t->room;
        t->f->read_with_op = 0;
    }
    return n;
}
/* The park of every descriptor with a kernel wait: the loop's readiness
 * wait (farce_loop_wait_fd) with what the step knew. */
void farce_park_readiness(farce_transfer *t);

/* ---- the steps ------------------------------------------------------------ */
int64_t farce_step_socket(farce_transfer *t);
int64_t farce_step_positional(farce_transfer *t);
int64_t farce_step_completion_socket(farce_transfer *t);
int64_t farce_step_completion_pipe(farce_transfer *t);
/* the platform's own: steps_unix.c or steps_windows.c names them */
int64_t farce_step_pipe(farce_transfer *t);
int64_t farce_step_terminal(farce_transfer *t);
int64_t farce_step_file(farce_transfer *t);

/* The calls of the pipe and terminal steps (step_pipe_unix.c,
 * step_terminal_unix.c): what read(2)/write(2) return, EAGAIN included,
 * and never a blocked thread. */
ssize_t farce_pipe_call(farce_fd_ent *f, int fd, int reading, void *at, size_t room);
ssize_t farce_terminal_call(farce_fd_ent *f, int fd, int reading, void *at, size_t room);

/* Fills in farce_fd_steps_by_kind (steps_unix.c, steps_windows.c). */
void farce_transfer_steps_init(void);

/* ---- completion operations (step_completion.c) ---------------------------- */

/* One completion operation on len bytes at ptr, memory owned by buffer: its
 * result (bytes or -errno), -EAGAIN when the core withdrew it. before: the
 * bytes this transfer read just ahead of ptr (given back with the
 * operation's when an exception reaches the parked fiber). pos: a file
 * position, or -1 for the descriptor's own. async: the kernel's worker
 * threads perform it. IOError when io was closed meanwhile. */
int64_t farce_transfer_run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *ptr,
                              size_t len, size_t before, off_t pos, int async);

/* Gives the len bytes a read consumed from io at data back to io's own read
 * buffer, because an exception reached the fiber before Ruby saw them. */
void farce_transfer_keep_unread(VALUE io, int fd, const char *data, size_t len);

#endif
