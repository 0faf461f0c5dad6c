/*
 * Ruby 4.1's read and write hooks: scheduler interface version 4
 * (ruby/ruby#18483). io_read/io_write(io, buffer, offset, length) and
 * io_pread/io_pwrite(io, buffer, from, offset, length) are each one
 * transfer, read(2)-style: `length` is the most to move, a short count is
 * returned as it is, and a descriptor that is not ready gets -EAGAIN.
 * Ruby's IO layer waits (io_wait) and calls again when the caller is a
 * blocking read or write; IO#read_nonblock and IO#write_nonblock hand
 * -EAGAIN to their caller. So the hook never waits for readiness, and needs
 * none of io_transfer.c's loop: a length of 0 means "move nothing" here,
 * not "read without waiting".
 *
 * One transfer may still be a completion operation (io_uring) that the
 * calling fiber parks on: what "one transfer" asks is one operation, not
 * no wait (io-event's io_uring selector does the same on interface 4: one
 * nonblocking attempt, then one operation, the fiber suspended until it
 * completes). A stream read or write that found the descriptor not ready
 * becomes one operation of the same range when io_transfer.c would use one
 * (farce_io_use_ops: io_uring, a non-blocking socket or pipe, a fiber that
 * can park) and the Ruby method that called the hook is not a *_nonblock
 * one (it must get -EAGAIN at once, whatever Ruby passes); the operation's
 * own -EAGAIN (a kernel without fast poll) goes back to Ruby, which then
 * waits for readiness. A stream's reads after one that had to be an
 * operation, or after a short read, go to the operation at once, as in
 * io_transfer.c: the attempt would mostly answer EAGAIN (a system call per
 * read of a ping-pong). Buffer holds, pins, cancellation on close and exceptions
 * that reach the parked fiber are step_completion.c's, shared.
 *
 * Kept apart from io_transfer.c (interface versions 1 to 3), whose hot path
 * stays exactly as it is; io_transfer.h says which one a build binds to the
 * hook names, and both front ends also define the version 4 forms under
 * their own names (__io_read_v4, ...) on every Ruby, so that they are
 * tested before a Ruby that calls them is at hand.
 *
 * Around the nonblocking attempt the buffer is held (buffer_lock.h) and
 * nothing between taking and giving back the hold can raise or switch
 * fibers: no Ruby call, no Go call, no wait.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include "platforms/sys_io.h"
#include "hook_io/buffer_lock.h"
#include "hook_io/io_transfer.h"

/* Whether a descriptor in blocking mode (a tty, or an IO someone set
 * `nonblock = false`) is ready now: read(2) on it would block the thread
 * otherwise. poll(2) with no timeout, no Go call. */
static int ready_now(int fd, int reading)
{
    struct pollfd p = {fd, (short)(reading ? POLLIN : POLLOUT), 0};
    int r;
    do r = poll(&p, 1, 0);
    while (r < 0 && errno == EINTR);
    return r != 0; /* an error: let the call itself report it */
}

/* One transfer: what it moves and where. f: the descriptor's entry (a
 * stream transfer's only). */
struct once {
    farce_loop *l;
    VALUE io, buffer;
    farce_fd_ent *f;
    int fd, reading, positional;
    char *at;
    size_t length;
    off_t from;
};

/* The transfer as one completion operation; what it teaches about a
 * stream read, as in io_transfer.c's steps. -EINTR: try again. */
static int64_t once_op(struct once *o)
{
    farce_loop *l = o->l;
    int64_t op = farce_io_run_op(l, o->io, o->fd, o->buffer, o->reading ? FARCE_READ : FARCE_WRITE, o->at, o->length);
    if (op == -EINTR) return op;
    /* the table may have grown while the fiber was parked */
    farce_fd_ent *f = farce_fd_table_entry(&l->fds, l->handle, l->backend, o->io, o->fd);
    if (o->reading) {
        if (op == -EAGAIN || op == -EWOULDBLOCK) f->read_with_op = f->drained = 0; /* no fast poll: readiness next time */
        else f->drained = op >= 0 && (size_t)op < o->length;
    }
    return op == -EWOULDBLOCK ? -EAGAIN : op;
}

/* The nonblocking attempt, the buffer held around it: the count or -errno. */
static int64_t once_call(struct once *o)
{
    farce_fd_ent *f = o->f;
    int fd = o->fd, reading = o->reading;
    int held = farce_buffer_hold(o->buffer);
    ssize_t n = o->positional ? (reading ? pread(fd, o->at, o->length, o->from) : pwrite(fd, o->at, o->length, o->from))
                : f->pollable ? farce_stream_nowait(f, fd, reading, o->at, o->length)
                              : (reading ? read(fd, o->at, o->length) : write(fd, o->at, o->length));
    int e = errno;
    farce_buffer_release(o->buffer, held);
    o->l->transfer_calls++; /* stats: system calls per request */
    if (n < 0) return -(e == EWOULDBLOCK ? EAGAIN : e);
    if (reading && !o->positional) {
        f->drained = f->stream && (size_t)n < o->length;
        f->read_with_op = 0;
    }
    return n;
}

/* Whether a stream call that found the descriptor not ready becomes one
 * operation: when io_transfer.c's would (farce_io_use_ops) and the caller
 * is not a *_nonblock method (it must get -EAGAIN at once). */
static int becomes_op(struct once *o)
{
    farce_fd_ent *f = o->f;
    if (o->positional || !f->stream || !f->pollable || f->blocking || !farce_loop_can_park(o->l) ||
        farce_io_nonblocking_call())
        return 0;
    farce_loop_start(o->l, NULL); /* the selector's lazy core: operations need it */
    return farce_io_use_ops(o->l, f);
}

/* The count (0 at end of file), or -errno; -EINTR: try again. */
static int64_t once(struct once *o)
{
    farce_loop *l = o->l;
    if (!o->positional) {
        /* the number may name another file by now: the table forgets the old one */
        farce_fd_ent *f = o->f = farce_fd_table_entry(&l->fds, l->handle, l->backend, o->io, o->fd);
        if (f->pollable && f->blocking && !ready_now(o->fd, o->reading)) return -EAGAIN;
        /* no kernel wait (a Windows pipe): asked instead */
        if (!f->pollable && o->reading && !f->steps->ready_now(o->fd, RUBY_IO_READABLE)) return -EAGAIN;
        if (o->reading && (f->read_with_op || f->drained) && farce_io_use_ops(l, f) && !farce_io_nonblocking_call())
            return once_op(o);
    }
    int64_t n = once_call(o);
    if (n != -EAGAIN || !becomes_op(o)) return n;
    if (o->reading) o->f->read_with_op = 1; /* and every later read of the stream, as in io_transfer.c */
    return once_op(o);
}

VALUE farce_io_transfer_once(farce_loop *l, VALUE io, VALUE buffer, VALUE offset_v, VALUE length_v, off_t from,
                             enum farce_direction direction)
{
    io = rb_io_get_io(io);
    farce_loop_give_owed_turn(l, io); /* before any byte moves, as in farce_io_transfer */
    int64_t turn = l->turns.started_ns;
    size_t offset = NUM2SIZET(offset_v), length = NUM2SIZET(length_v);
    struct once o = {.l = l, .io = io, .buffer = buffer, .reading = direction == FARCE_READ, .positional = from >= 0,
                     .length = length, .from = from};
    int64_t result;
    for (;;) {
        o.fd = farce_io_descriptor(io); /* IOError once closed, also after EINTR */
        void *base;
        size_t size;
        farce_buffer_bytes(buffer, o.reading, &base, &size);
        if (offset > size || length > size - offset) return INT2NUM(-EINVAL);
        if (length == 0) return INT2FIX(0); /* no transfer asked: none made (io-event answers the same) */
        o.at = (char *)base + offset;
        result = once(&o);
        if (result != -EINTR) break;
        rb_thread_check_ints(); /* traps, Thread#raise: nothing is held */
    }
    /* a transfer that does not park must not hold the loop: the turn is
     * owed to the fiber's next hook, never given here (event_loop.h); a
     * fiber that parked on an operation began a new turn when it resumed */
    if (l->turns.started_ns == turn) farce_loop_turn_check_after_transfer(l);
    return LL2NUM(result);
}

/* Which read/write hook forms the running Ruby calls can only be read from
 * its headers, at build time; an extension built against one Ruby's
 * headers and loaded into another of the same X.Y (a snapshot against the
 * release, or the other way round) would read every offset as a length.
 * The Ruby-level sign of the version 4 forms is IO::Buffer::VERSION 3 or
 * more (the buffer side of the same change, what io-event's pure-Ruby
 * selector reads too): the build must agree with it. Set
 * FARCE_HOOK_FORMS_UNCHECKED=1 only where the hooks are called by hand
 * (rake test:single_transfer builds the version 4 forms for a Ruby that
 * does not call them). */
void farce_single_transfer_check(void)
{
    int v4 = 0;
    if (rb_const_defined_at(rb_cIOBuffer, rb_intern("VERSION"))) {
        VALUE version = rb_const_get_at(rb_cIOBuffer, rb_intern("VERSION"));
        v4 = RB_INTEGER_TYPE_P(version) && NUM2INT(version) >= 3;
    }
    if (v4 == FARCE_SINGLE_TRANSFER_HOOKS) return;
    const char *unchecked = getenv("FARCE_HOOK_FORMS_UNCHECKED");
    if (unchecked && strcmp(unchecked, "1") == 0) return;
    VALUE description = rb_const_get(rb_cObject, rb_intern("RUBY_DESCRIPTION"));
    rb_raise(rb_eLoadError,
             "farce was built for a Ruby that calls io_read/io_write as %s, but this Ruby (%" PRIsVALUE
             ") %s: rebuild farce for it (`gem pristine farce` or `rake compile`)",
             FARCE_SINGLE_TRANSFER_HOOKS ? "(io, buffer, offset, length), scheduler interface 4"
                                         : "(io, buffer, length, offset), scheduler interface 3 or older",
             description,
             v4 ? "has IO::Buffer::VERSION 3 or more, so it calls them as (io, buffer, offset, length)"
                : "has no IO::Buffer::VERSION 3, so it calls them as (io, buffer, length, offset)");
}
