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
 * that reach the parked fiber are io_transfer.c's run_op, shared.
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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#ifdef _WIN32
#include "hook_io/stream_offload_windows.h"
#include "platforms/win32_compat.h"
#else
#include <poll.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
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

VALUE farce_io_transfer_once(farce_loop *l, VALUE io, VALUE buffer, VALUE offset_v, VALUE length_v, off_t from,
                             enum farce_direction direction)
{
    int reading = direction == FARCE_READ;
    io = rb_io_get_io(io);
    farce_loop_give_owed_turn(l, io); /* before any byte moves, as in farce_io_transfer */
    int64_t turn = l->turns.started_ns;
    size_t offset = NUM2SIZET(offset_v), length = NUM2SIZET(length_v);
    int positional = from >= 0;
    VALUE result;
    for (;;) {
        int fd = farce_io_descriptor(io); /* IOError once closed, also after EINTR */
        void *base;
        size_t size;
        farce_buffer_bytes(buffer, reading, &base, &size);
        if (offset > size || length > size - offset) return INT2NUM(-EINVAL);
        if (length == 0) return INT2FIX(0); /* no transfer asked: none made (io-event answers the same) */
        char *at = (char *)base + offset;
        farce_fd_ent *f = NULL;
        int64_t op = 0; /* the operation's result, when one ran */
        int ran_op = 0;
        if (!positional) {
            /* the number may name another file by now: the table forgets the old one */
            f = farce_fd_table_entry(&l->fds, l->handle, l->backend, io, fd);
            if (f->pollable && f->blocking && !ready_now(fd, reading)) {
                result = INT2NUM(-EAGAIN);
                break;
            }
#ifdef _WIN32
            /* a pipe: never waited on there (only sockets are), asked instead */
            if (!f->socket && reading && farce_win32_read_would_block(fd)) {
                result = INT2NUM(-EAGAIN);
                break;
            }
#endif
            if (reading && (f->read_with_op || f->drained) && farce_io_use_ops(l, f) && !farce_io_nonblocking_call()) {
                op = farce_io_run_op(l, io, fd, buffer, direction, at, length);
                ran_op = 1;
            }
        }
        if (!ran_op) {
            int held = farce_buffer_hold(buffer);
            ssize_t n = positional    ? (reading ? pread(fd, at, length, from) : pwrite(fd, at, length, from))
                        : f->pollable ? farce_stream_nowait(f, fd, reading, at, length)
                                      : (reading ? read(fd, at, length) : write(fd, at, length));
            int e = errno;
            farce_buffer_release(buffer, held);
            l->transfer_calls++; /* stats: system calls per request */
            if (n >= 0) {
                if (reading && !positional) {
                    f->drained = f->stream && (size_t)n < length;
                    f->read_with_op = 0;
                }
                result = SSIZET2NUM(n);
                break;
            }
            if (e == EINTR) {
                rb_thread_check_ints(); /* traps, Thread#raise: nothing is held */
                continue;
            }
            if (e == EWOULDBLOCK) e = EAGAIN;
            if (e != EAGAIN || positional || !f->stream || !f->pollable || f->blocking || !farce_loop_can_park(l)
                || farce_io_nonblocking_call()) {
                result = INT2NUM(-e);
                break;
            }
            farce_loop_start(l, NULL); /* the selector's lazy core: operations need it */
            if (!farce_io_use_ops(l, f)) {
                result = INT2NUM(-EAGAIN);
                break;
            }
            if (reading) f->read_with_op = 1; /* and every later read of the stream, as in io_transfer.c */
            op = farce_io_run_op(l, io, fd, buffer, direction, at, length);
        }
        if (op == -EINTR) {
            rb_thread_check_ints();
            continue;
        }
        /* the table may have grown while the fiber was parked */
        f = farce_fd_table_entry(&l->fds, l->handle, l->backend, io, fd);
        if (reading) {
            if (op == -EAGAIN || op == -EWOULDBLOCK) f->read_with_op = f->drained = 0; /* no fast poll: readiness next time */
            else f->drained = op >= 0 && (size_t)op < length;
        }
        result = LL2NUM(op == -EWOULDBLOCK ? -EAGAIN : op);
        break;
    }
    /* a transfer that does not park must not hold the loop: the turn is
     * owed to the fiber's next hook, never given here (event_loop.h); a
     * fiber that parked on an operation began a new turn when it resumed */
    if (l->turns.started_ns == turn) farce_loop_turn_check_after_transfer(l);
    return result;
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
