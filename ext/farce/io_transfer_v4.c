/*
 * Ruby 4.1's read and write hooks: scheduler interface version 4
 * (ruby/ruby#18483). io_read/io_write(io, buffer, offset, length) and
 * io_pread/io_pwrite(io, buffer, from, offset, length) are each one
 * transfer, read(2)-style: `length` is the most to move, a short count is
 * returned as it is, and a descriptor that is not ready gets -EAGAIN at
 * once. Ruby's IO layer waits (io_wait) and calls again when the caller is
 * a blocking read or write; IO#read_nonblock and IO#write_nonblock hand
 * -EAGAIN to their caller. So the hook never waits, and needs neither
 * io_transfer.c's loop nor its question of which Ruby method called it
 * (nonblocking_call): a length of 0 means "move nothing" here, not "read
 * without waiting".
 *
 * Kept apart from io_transfer.c (interface versions 1 to 3), whose hot path
 * stays exactly as it is; io_transfer.h says which one a build binds to the
 * hook names, and both front ends also define the version 4 forms under
 * their own names (__io_read_v4, ...) on every Ruby, so that they are
 * tested before a Ruby that calls them is at hand.
 *
 * No completion operation (io_uring) here: one would wait for the kernel to
 * finish it. Readiness for the retry comes from io_wait, as on the other
 * backends.
 *
 * The buffer is held (buffer_lock.h) around the system call, and nothing
 * between taking and giving back the hold can raise or switch fibers: no
 * Ruby call, no Go call, no wait.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include "buffer_lock.h"
#include "io_transfer.h"

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
    farce_loop_give_owed_turn(l); /* before any byte moves, as in farce_io_transfer */
    io = rb_io_get_io(io);
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
        if (!positional) {
            /* the number may name another file by now: the table forgets the old one */
            f = farce_fd_table_entry(&l->fds, l->handle, l->backend, io, fd);
            if (f->pollable && f->blocking && !ready_now(fd, reading)) {
                result = INT2NUM(-EAGAIN);
                break;
            }
        }
        int held = farce_buffer_hold(buffer);
        ssize_t n = positional    ? (reading ? pread(fd, at, length, from) : pwrite(fd, at, length, from))
                    : f->pollable ? farce_stream_nowait(f, fd, reading, at, length)
                                  : (reading ? read(fd, at, length) : write(fd, at, length));
        int e = errno;
        farce_buffer_release(buffer, held);
        if (n >= 0) {
            result = SSIZET2NUM(n);
            break;
        }
        if (e == EINTR) {
            rb_thread_check_ints(); /* traps, Thread#raise: nothing is held */
            continue;
        }
        result = INT2NUM(e == EWOULDBLOCK ? -EAGAIN : -e);
        break;
    }
    /* a transfer that never waits must not hold the loop: the turn is owed
     * to the fiber's next hook, never given here (event_loop.h) */
    farce_loop_turn_check_after_transfer(l);
    return result;
}
