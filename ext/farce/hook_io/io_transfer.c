/*
 * The one read/write loop of both front ends (Ruby's scheduler interface
 * versions 1 to 3): try the step; if it would block and the caller may
 * wait, park; repeat until the length is met. What a step does, and how it
 * parks, depends on the kind of descriptor only, and the descriptor table
 * picked both when the IO took the number (transfer_step.h names the steps
 * and their files). How the waiting fiber parks is the front end's (yield
 * to the scheduler's loop, or transfer to the selector's loop); the loop
 * hides that (event_loop.h).
 *
 * A length of 0 is what Ruby passes for every read and write it sends
 * here (Ruby 3.1 to 3.4), IO#read_nonblock and IO#write_nonblock included,
 * and those must never wait: they expect -EAGAIN when nothing can be done.
 * -EAGAIN is always a correct answer to a length of 0 (a blocking read then
 * calls io_wait and the hook again), but for a blocking read it costs a
 * second hook call, a second IO::Buffer and Ruby's io_wait, about a quarter
 * of a pipe ping-pong round trip. So a length of 0 waits here like any
 * other, unless the Ruby method that called the hook is read_nonblock or
 * write_nonblock (caller_may_wait.c: asked only when it would wait).
 */
#include <ruby.h>
#include <ruby/io.h>
#include "hook_io/buffer_lock.h"
#include "hook_io/io_transfer.h"
#include "hook_io/transfer_step.h"

void farce_io_transfer_init(VALUE mFarce)
{
    farce_buffer_lock_init();
    farce_caller_may_wait_init();
    farce_caller_may_wait_define(mFarce);
    farce_transfer_steps_init();
}

/* Before each step: the descriptor, the entry and the room, asked again,
 * because another fiber or thread may have closed io while this one waited
 * (IOError here, as Ruby raises after its own waits), its number may name
 * another file by now, which must not be read, and the buffer may have been
 * resized. 0 when the transfer is over, its result in t->done. */
static inline int next_step(farce_transfer *t)
{
    t->fd = farce_io_descriptor(t->io);
    void *base;
    size_t size;
    farce_buffer_bytes(t->buffer, t->reading, &base, &size);
    if (t->offset > size || t->length > size - t->offset) { /* io-event's selectors answer -EINVAL here; both front ends do */
        t->done = INT2NUM(-EINVAL);
        return 0;
    }
    t->room = size - t->offset - t->total;
    if (t->room == 0) {
        t->done = SIZET2NUM(t->total);
        return 0;
    }
    t->at = (char *)base + t->offset + t->total;
    t->f = farce_fd_table_entry(&t->l->fds, t->l->handle, t->l->backend, t->io, t->fd);
    return 1;
}

static VALUE transfer(farce_transfer *t)
{
    while (next_step(t)) {
        const farce_fd_steps *s = t->f->steps;
        int64_t n = t->from < 0 ? s->step(t) : s->positional(t);
        t->waited = 0;
        if (n > 0 || (n == 0 && !t->reading)) {
            t->total += (size_t)n;
            if (t->total >= t->length) return SIZET2NUM(t->total);
        } else if (n == 0) {
            return SIZET2NUM(t->total); /* end of file */
        } else if (n == -EINTR) {
            rb_thread_check_ints();
        } else if (n == FARCE_STEP_DONE) {
            return t->done;
        } else if (n != -EAGAIN && n != -EWOULDBLOCK) {
            return t->total ? SIZET2NUM(t->total) : LL2NUM(n);
        } else if (!farce_transfer_may_wait(t)) {
            /* read_nonblock/write_nonblock never wait: -EAGAIN, as io-event
             * answers (waiting parked the fiber until data came, forever if
             * none did); a length of 0 moved nothing yet */
            return LL2NUM(n);
        } else {
            s->park(t);
        }
    }
    return t->done;
}

VALUE farce_io_transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length_v, size_t offset, off_t from,
                        enum farce_direction direction)
{
    io = rb_io_get_io(io);
    farce_loop_give_owed_turn(l, io); /* before any byte moves: an exception in the turn loses nothing */
    int64_t turn = l->turns.started_ns;
    size_t length = NUM2SIZET(length_v);
    farce_transfer t = {.l = l, .io = io, .buffer = buffer, .length_v = length_v, .reading = direction == FARCE_READ,
                        .may_wait = length > 0 ? 1 : -1, .known = FARCE_KNOWN_NOT_READY, .offset = offset,
                        .length = length, .from = from};
    VALUE result = transfer(&t);
    /* A transfer that never waits must not hold the loop (event_loop.c).
     * Checked once it is done, and only when no new turn began meanwhile
     * (the fiber parked and the loop resumed it: the loop had its turn,
     * and the clock read would be wasted; two of a ping-pong round trip's
     * four transfers park). A wait that did not park (ready at once, or
     * a blocking fiber) leaves the turn as it was: the check runs. The turn
     * is owed, not given here (farce_loop_turn_check_after_transfer). */
    if (l->turns.started_ns == turn) farce_loop_turn_check_after_transfer(l);
    return result;
}

/* io_transfer_v4.c's completion operation and its questions, the same ones
 * this loop's steps ask. */
int farce_io_use_ops(const farce_loop *l, const farce_fd_ent *f)
{
    return l->ops && f->stream && f->pollable && !f->blocking && farce_loop_can_park(l);
}
int farce_io_nonblocking_call(void) { return farce_caller_is_nonblock(); }
int64_t farce_io_run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *at,
                        size_t len)
{
    return farce_transfer_run_op(l, io, fd, buffer, direction, at, len, 0, -1, 0); /* a stream: its position, inline */
}
