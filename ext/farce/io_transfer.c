/*
 * The one read/write loop of both front ends, and its completion-operation
 * policy (io_uring performs the read or write itself: no readiness wait, no
 * EAGAIN call). How the waiting fiber parks is the front end's (yield to
 * the scheduler's loop, or transfer to the selector's loop); the loop
 * hides that (event_loop.h).
 *
 * A stream read is tried first unless the last one drained the stream; a
 * blocking descriptor is waited on before every call, so it never blocks the
 * loop. With completion operations, an EAGAIN turns the next step into an
 * operation that completes when the kernel can do it: for a read, every
 * later read of that stream too, until one finds it empty; for a write, just
 * the rest of this one (sockets are mostly writable, so a plain write comes
 * first). Positional transfers (files) have no readiness and run directly.
 *
 * A length of 0 is what Ruby passes for every read and write it sends
 * here (Ruby 3.1 to 3.4), IO#read_nonblock and IO#write_nonblock included,
 * and those must never wait: they expect -EAGAIN when nothing can be done.
 * -EAGAIN is always a correct answer to a length of 0 (a blocking read then
 * calls io_wait and the hook again), but for a blocking read it costs a
 * second hook call, a second IO::Buffer and Ruby's io_wait, about a quarter
 * of a pipe ping-pong round trip. So a length of 0 waits here like any
 * other, unless the Ruby method that called the hook is read_nonblock or
 * write_nonblock (nonblocking_call: asked only when it would wait).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <string.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include <ruby/debug.h>
#include "buffer_lock.h"
#include "io_transfer.h"
#include "wait_table.h"

/* Whether the Ruby method that called this hook never waits: a method
 * whose name ends in _nonblock (IO#read_nonblock and IO#write_nonblock
 * themselves, io.rb) among the few frames above this hook. A false "yes"
 * only costs the slow path (-EAGAIN, then Ruby's io_wait); a false "no"
 * would park a nonblocking call, so the search is generous. Every read
 * that would wait asks (two per pipe ping-pong round trip), so the common
 * case is answered from two frames: the hook's own and the one below it.
 * When that one is a C method (IO#read, IO#gets, IO#sysread, ...), it is
 * the IO method that called the hook, with nothing in between (Ruby's IO
 * code calls the scheduler from inside the method's own frame), and its
 * name is the answer. Only when it is Ruby code (Async's scheduler, a
 * subclass's io_read calling super, the Ruby loop's routing) are up to
 * NONBLOCK_FRAMES frames searched. No line numbers are asked for (Ruby
 * computes one per frame otherwise, by a search in the frame's line
 * table), and each frame's kind is cached by the frame's identity. */
#define NONBLOCK_FRAMES 8

enum frame_kind { FRAME_RUBY = 1, FRAME_C, FRAME_NONBLOCK };

/* A frame from rb_profile_frames is a method entry or an instruction
 * sequence. The cache's keys are marked by frame_keeper (rb_gc_mark pins
 * them): a cached frame is neither freed nor moved, so no other method can
 * come to have its address while it is cached. One entry per hash slot; a
 * collision replaces the older answer. */
#define FRAME_CACHE 64 /* a power of two */
static struct frame_answer {
    VALUE frame;
    int kind;
} frame_cache[FRAME_CACHE];

static void frame_keeper_mark(void *cache)
{
    struct frame_answer *c = cache;
    for (int i = 0; i < FRAME_CACHE; i++)
        if (c[i].frame) rb_gc_mark(c[i].frame);
}

static const rb_data_type_t frame_keeper_type = {
    "Farce::FrameCache",
    {frame_keeper_mark, NULL, NULL},
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY,
};

static int ends_with_nonblock(VALUE name)
{
    if (!RB_TYPE_P(name, T_STRING)) return 0;
    long len = RSTRING_LEN(name);
    return len > 9 && memcmp(RSTRING_PTR(name) + len - 9, "_nonblock", 9) == 0;
}

static enum frame_kind frame_kind(VALUE frame)
{
    if (RB_SPECIAL_CONST_P(frame)) return FRAME_RUBY;
    struct frame_answer *a = &frame_cache[((uint64_t)frame * 0x9E3779B97F4A7C15ull) >> 58];
    if (a->frame == frame) return (enum frame_kind)a->kind;
    enum frame_kind kind = ends_with_nonblock(rb_profile_frame_method_name(frame)) ? FRAME_NONBLOCK
                         : NIL_P(rb_profile_frame_path(frame))                   ? FRAME_C /* no instruction sequence */
                                                                                 : FRAME_RUBY;
    a->frame = frame;
    a->kind = kind;
    return kind;
}

static int nonblocking_call(void)
{
    VALUE frames[NONBLOCK_FRAMES];
    /* frames[0] is the hook (a C method), frames[1] what called it */
    int n = rb_profile_frames(0, 2, frames, NULL); /* NULL: no lines (every Ruby since 2.1) */
    if (n == 2) {
        enum frame_kind k = frame_kind(frames[1]);
        if (k != FRAME_RUBY) return k == FRAME_NONBLOCK;
    }
    n = rb_profile_frames(0, NONBLOCK_FRAMES, frames, NULL);
    for (int i = 0; i < n; i++)
        if (frame_kind(frames[i]) == FRAME_NONBLOCK) return 1;
    return 0;
}

void farce_io_transfer_init(void)
{
    farce_buffer_lock_init();
    /* not NULL: Ruby calls no mark function for a data object without data */
    rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &frame_keeper_type, frame_cache));
}

/* Whether reads and writes on f go through completion operations: the core
 * performs them (io_uring), f is a non-blocking socket or pipe, and the
 * calling fiber can park until the completion is reaped (a blocking fiber
 * waits for readiness with the thread instead: issue 13 item 3). */
static inline int use_ops(const farce_loop *l, const farce_fd_ent *f)
{
    return l->ops && f->stream && f->pollable && !f->blocking && farce_loop_can_park(l);
}

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

#ifdef RWF_NOWAIT
static int nowait_pipes = 1; /* preadv2/pwritev2 take RWF_NOWAIT for pipes (Linux 5.x); cleared on EOPNOTSUPP */
#endif

/* One stream read or write that never blocks the thread, whatever
 * O_NONBLOCK says by now (issue 13 item 10): f->blocking was cached when
 * the IO was first seen, and `io.nonblock = false` may have changed it
 * since. No extra system call for sockets (MSG_DONTWAIT) and pipes
 * (RWF_NOWAIT); anything else (a tty) has its flags read again first, and
 * a descriptor found blocking is waited on before every call from then on.
 * Returns what read/write would, EAGAIN included. */
static inline __attribute__((always_inline)) ssize_t stream_nowait(farce_fd_ent *f, int fd, int reading, void *at,
                                                                    size_t room)
{
    if (f->socket) return reading ? recv(fd, at, room, MSG_DONTWAIT) : send(fd, at, room, MSG_DONTWAIT);
#ifdef RWF_NOWAIT
    if (f->stream && nowait_pipes) {
        struct iovec v = {at, room};
        ssize_t n = reading ? preadv2(fd, &v, 1, -1, RWF_NOWAIT) : pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
        if (n >= 0 || errno != EOPNOTSUPP) return n;
        nowait_pipes = 0; /* an older kernel: flags, below */
    }
#endif
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

static VALUE unread_body(VALUE pair) { return rb_io_ungetbyte(RARRAY_AREF(pair, 0), RARRAY_AREF(pair, 1)); }

/* An exception (Timeout, Fiber#raise, Thread#raise, Fiber#kill) reached a
 * fiber parked in a read operation, and the read completed before the
 * cancel could stop it: the hook raises, so Ruby never sees the len bytes
 * this transfer read at data, and a readiness wait would have consumed
 * nothing. They go back into the IO's own read buffer (IO#ungetbyte), so
 * the next read of the stream, by anyone, returns them first. Not when the
 * IO was closed meanwhile: nobody can read them. */
static void keep_unread(VALUE io, int fd, const char *data, size_t len)
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
 * ptr (see keep_unread). */
static int64_t run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *ptr,
                      size_t len, size_t before)
{
    uint64_t token = 0;
    farce_stack_guard();
    int op = direction == FARCE_READ ? FARCE_OP_READ : FARCE_OP_WRITE;
    farce_loop_op_room(l); /* may raise: not between the submission and the park, nor with the hold taken */
    int held = farce_buffer_hold(buffer); /* from here, every way out gives it back */
    int64_t r = farce_core_submit_op(l->core, l->handle, op, fd, (uint64_t)(uintptr_t)ptr, (uint64_t)len, -1, &token);
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
     * must not leave the buffer locked (issue 13 item 2). */
    struct parked_op p = {l, token, buffer, 0};
    int state = 0;
    rb_protect(park_op_body, (VALUE)&p, &state);
    int64_t result = p.result;
    if (state) {
        /* errinfo is still the held jump's (park_op replays it the same
         * way): nothing below raises before rb_jump_tag */
        if (direction == FARCE_READ && result > 0) keep_unread(io, fd, (char *)ptr - before, before + (size_t)result);
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
    if (result == -ECANCELED || farce_io_fd_or_closed(io) != fd) rb_raise(rb_eIOError, "closed stream");
    return result;
}

/* farce_io_transfer's loop. */
static VALUE transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length_v, size_t offset, off_t from,
                      enum farce_direction direction)
{
    int reading = direction == FARCE_READ;
    io = rb_io_get_io(io);
    size_t length = NUM2SIZET(length_v);
    int events = reading ? RUBY_IO_READABLE : RUBY_IO_WRITABLE;
    int positional = from >= 0;
    size_t total = 0;
    int waited = 0; /* the last step was a wait: try the call now, whatever we knew before */
    int op_next = 0;
    int may_wait = length > 0 ? 1 : -1; /* -1: length 0, not asked yet (see the top of this file) */
#define MAY_WAIT() (may_wait >= 0 ? may_wait : (may_wait = !nonblocking_call()))
    for (;;) {
        /* Each step asks the IO again: another fiber or thread may have
         * closed it while this one waited (IOError here, as Ruby raises
         * after its own waits), and its number may name another file by
         * now, which must not be read. */
        int fd = farce_io_descriptor(io);
        void *base;
        size_t size;
        farce_buffer_bytes(buffer, reading, &base, &size);
        /* io-event's selectors answer -EINVAL here; both front ends do */
        if (offset > size || length > size - offset) return INT2NUM(-EINVAL);
        size_t room = size - offset - total;
        if (room == 0) return SIZET2NUM(total);
        char *at = (char *)base + offset + total;
        farce_fd_ent *f = farce_fd_table_entry(&l->fds, l->handle, l->backend, io, fd);
        /* a call that may not wait (below) gets no operation that waits for data either */
        if (!positional && reading && use_ops(l, f) && (f->read_with_op || f->drained) && MAY_WAIT()) op_next = 1;
        if (op_next) {
            op_next = 0;
            int64_t n = run_op(l, io, fd, buffer, direction, at, room, total);
            f = farce_fd_table_entry(&l->fds, l->handle, l->backend, io, fd);
            if (n > 0 || (n == 0 && !reading)) {
                total += (size_t)n;
                if (reading) f->drained = (size_t)n < room;
                if (total >= length) return SIZET2NUM(total);
                continue;
            }
            if (n == 0) return SIZET2NUM(total); /* end of file */
            if (n == -EINTR) {
                rb_thread_check_ints();
                continue;
            }
            if (n == -EAGAIN || n == -EWOULDBLOCK) { /* no fast poll: wait for readiness */
                if (reading) f->read_with_op = f->drained = 0;
                farce_loop_wait_fd(l, fd, events, -1, FARCE_KNOWN_NOT_READY);
                waited = 1;
                continue;
            }
            return total ? SIZET2NUM(total) : LL2NUM(n);
        }
        int drained = reading && !positional && f->drained;
        if (!waited && f->pollable && (drained || f->blocking)) {
            if (drained) f->drained = 0;
            if (MAY_WAIT()) {
                farce_loop_wait_fd(l, fd, events, -1, drained ? FARCE_KNOWN_DRAINED : FARCE_KNOWN_NOTHING);
                waited = 1;
                continue;
            }
            /* read_nonblock/write_nonblock: a drained stream is just tried;
             * a blocking descriptor only when it is ready now */
            if (f->blocking) {
                if (farce_loop_wait_fd(l, fd, events, 0, FARCE_KNOWN_NOTHING) == 0) return INT2NUM(-EAGAIN);
                waited = 1;
                continue;
            }
        }
        waited = 0;
        off_t pos = from + (off_t)total;
        l->transfer_calls++; /* stats: system calls per request */
        ssize_t n = positional ? (reading ? pread(fd, at, room, pos) : pwrite(fd, at, room, pos))
                               : f->pollable ? stream_nowait(f, fd, reading, at, room)
                                             : (reading ? read(fd, at, room) : write(fd, at, room));
        if (n > 0 || (n == 0 && !reading)) {
            total += (size_t)n;
            if (reading && !positional) {
                f->drained = f->stream && (size_t)n < room;
                f->read_with_op = 0;
            }
            if (total >= length) return SIZET2NUM(total);
            continue;
        }
        if (n == 0) return SIZET2NUM(total); /* end of file */
        int e = errno;
        if (e == EINTR) {
            rb_thread_check_ints();
            continue;
        }
        if (e == EAGAIN || e == EWOULDBLOCK) {
            /* read_nonblock/write_nonblock never wait: -EAGAIN, as
             * io-event answers. Waiting parked the fiber until data came,
             * forever if none did. */
            if (!MAY_WAIT()) return INT2NUM(-e);
            farce_loop_start(l, NULL); /* it must wait: the selector's lazy core is needed now, ops included */
            if (!positional && use_ops(l, f)) {
                if (reading) f->read_with_op = 1;
                else op_next = 1;
                continue;
            }
            farce_loop_wait_fd(l, fd, events, -1, FARCE_KNOWN_NOT_READY);
            waited = 1;
            continue;
        }
        return total ? SIZET2NUM(total) : LONG2NUM(-e);
    }
#undef MAY_WAIT
}

VALUE farce_io_transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length_v, size_t offset, off_t from,
                        enum farce_direction direction)
{
    farce_loop_give_owed_turn(l); /* before any byte moves: an exception in the turn loses nothing */
    int64_t turn = l->turns.started_ns;
    VALUE result = transfer(l, io, buffer, length_v, offset, from, direction);
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

/* A second caller must not cost the loop above its inlined copy (hence
 * always_inline on stream_nowait): io_transfer_v4.c's. */
ssize_t farce_stream_nowait(farce_fd_ent *f, int fd, int reading, void *at, size_t room)
{
    return stream_nowait(f, fd, reading, at, room);
}
