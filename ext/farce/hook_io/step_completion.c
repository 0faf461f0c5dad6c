/*
 * Completion operations (io_uring performs the read or write itself: no
 * readiness wait, no EAGAIN call), and the step of a socket or pipe when
 * the core performs them.
 *
 * A stream read is tried first unless the last one drained the stream or
 * had to be an operation. An EAGAIN turns the step into an operation that
 * completes when the kernel can do it: for a read, every later read of that
 * stream too, until one finds it empty; for a write, just the rest of this
 * one (sockets are mostly writable, so a plain write comes first). A
 * caller that may not wait gets no operation, and a fiber that cannot park
 * (nothing would resume it when the completion is reaped) or a descriptor
 * in blocking mode takes the readiness step.
 */
#include <ruby.h>
#include <ruby/io.h>
#include "hook_io/buffer_lock.h"
#include "hook_io/transfer_step.h"

struct parked_op {
    farce_loop *l;
    uint64_t token;
    VALUE buffer;
    int64_t result;
};

static VALUE park_op_body(VALUE arg)
{
    struct parked_op *p = (struct parked_op *)arg;
    farce_loop_park_op(p->l, p->token, p->buffer, &p->result);
    return Qnil;
}

static VALUE unread_body(VALUE pair) { return rb_io_ungetbyte(RARRAY_AREF(pair, 0), RARRAY_AREF(pair, 1)); }

/* An exception (Timeout, Fiber#raise, Thread#raise, Fiber#kill) reached a
 * fiber parked in a read operation, and the read completed before the
 * cancel could stop it: the hook raises, so Ruby never sees the len bytes
 * this transfer read at data, and a readiness wait would have consumed
 * nothing. They go back into the IO's own read buffer (IO#ungetbyte), so
 * the next read of the stream, by anyone, returns them first. Not when the
 * IO was closed meanwhile: nobody can read them. */
void farce_transfer_keep_unread(VALUE io, int fd, const char *data, size_t len)
{
    if (farce_io_fd_or_closed(io) != fd) return;
    int state = 0;
    VALUE err = rb_errinfo(); /* the held jump's: a Fiber#kill's is no exception */
    rb_protect(unread_body, rb_assoc_new(io, rb_str_new(data, (long)len)), &state);
    /* it raised (out of memory): the held jump goes on, not this */
    if (state && !RB_SPECIAL_CONST_P(err) && rb_obj_is_kind_of(err, rb_eException)) rb_set_errinfo(err);
}

/* Runs one completion operation on len bytes at ptr, memory owned by
 * buffer, and returns its result (bytes or -errno). The buffer is held
 * (buffer_lock.h) so that it cannot be resized or freed while the kernel
 * uses it, and pinned in the wait table until the completion is reaped
 * (farce_loop_park_op). A cancellation that did not come from an
 * exception (the descriptor was closed) raises IOError, as a closed wait
 * does. before: the bytes this transfer read into the buffer just ahead of
 * ptr (see keep_unread). pos: the file position of a positional read or
 * write (IORING_OP_READ/WRITE with that offset), or -1 for the descriptor's
 * own position (a stream's, or a regular file's, which the kernel reads and
 * advances as read(2) would). async: the kernel's worker threads perform it
 * (regular files: see step_file_unix.c). */
int64_t farce_transfer_run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *ptr,
                              size_t len, size_t before, off_t pos, int async)
{
    uint64_t token = 0;
    farce_stack_guard();
    int op = pos >= 0 ? (direction == FARCE_READ ? FARCE_OP_PREAD : FARCE_OP_PWRITE)
                      : (direction == FARCE_READ ? FARCE_OP_READ : FARCE_OP_WRITE);
    if (async) op |= FARCE_OP_ASYNC;
    farce_loop_op_room(l); /* may raise: not between the submission and the park, nor with the hold taken */
    int held = farce_buffer_hold(buffer); /* from here, every way out gives it back */
    int64_t r = farce_core_submit_op(l->core, l->handle, op, fd, (uint64_t)(uintptr_t)ptr, (uint64_t)len, pos, &token);
    if (r < 0) {
        farce_buffer_release(buffer, held);
        if (r == -EAGAIN) return r; /* the caller waits for readiness instead */
        farce_loop_raise(l, r, direction == FARCE_READ ? "read" : "write");
    }
    /* checked against io at the poll that submits it (event_loop.h) */
    farce_loop_note_op(l, token, io, fd);
    l->ops_submitted++;
    l->ops_in_flight++;
    /* a pending exception must not reach this fiber between submission
     * and park_op: park_op is the only place that handles it. park_op
     * returns or raises only once the completion was reaped (the kernel is
     * done with the memory), so the unlock below is never early, and it
     * runs on every exit: a Timeout or Thread#raise re-raised by park_op
     * must not leave the buffer locked (IO::Buffer#free or #resize would
     * then raise for ever after). */
    struct parked_op p = {l, token, buffer, 0};
    int state = 0;
    rb_protect(park_op_body, (VALUE)&p, &state);
    int64_t result = p.result;
    if (state) {
        /* errinfo is still the held jump's (park_op replays it the same
         * way): nothing below raises before rb_jump_tag */
        /* (a positional read moved no file position: nothing to give back) */
        if (direction == FARCE_READ && pos < 0 && result > 0) farce_transfer_keep_unread(io, fd, (char *)ptr - before, before + (size_t)result);
        farce_buffer_release(buffer, held);
        rb_jump_tag(state);
    }
    farce_buffer_release(buffer, held);
    /* Only the core cancels an operation park_op did not: the descriptor
     * was closed (close scan, io_close) or its number changed hands (the
     * check before the poll that would have submitted it). An
     * operation holds the open file, so one that finished otherwise after
     * the IO was closed (end of file once the peer closed too) is reported
     * as the close, as a readiness wait would. */
    if (result == -ECANCELED || farce_io_fd_or_closed(io) != fd) farce_raise_closed(fd);
    return result;
}

/* The operation step itself: the count or -errno; the table may have grown
 * while the fiber was parked, so the entry is asked again. */
static int64_t op_step(farce_transfer *t)
{
    farce_loop *l = t->l;
    int64_t n = farce_transfer_run_op(l, t->io, t->fd, t->buffer, t->reading ? FARCE_READ : FARCE_WRITE, t->at,
                                      t->room, t->total, -1, 0);
    farce_fd_ent *f = t->f = farce_fd_table_entry(&l->fds, l->handle, l->backend, t->io, t->fd);
    if (t->reading) {
        if (n > 0) f->drained = (size_t)n < t->room;
        else if (n == -EAGAIN || n == -EWOULDBLOCK) f->read_with_op = f->drained = 0; /* no fast poll: readiness next */
    }
    return n;
}

static inline int64_t completion_step(farce_transfer *t, int64_t (*readiness)(farce_transfer *))
{
    farce_fd_ent *f = t->f;
    if (f->blocking || !farce_loop_can_park(t->l)) return readiness(t);
    if (!(t->reading && (f->read_with_op || f->drained)) || !farce_transfer_may_wait(t)) {
        int64_t n = readiness(t);
        if ((n != -EAGAIN && n != -EWOULDBLOCK) || !farce_transfer_may_wait(t)) return n;
        if (t->reading) f->read_with_op = 1;
    }
    return op_step(t);
}

int64_t farce_step_completion_socket(farce_transfer *t) { return completion_step(t, farce_step_socket); }
int64_t farce_step_completion_pipe(farce_transfer *t) { return completion_step(t, farce_step_pipe); }
