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
#ifndef _WIN32
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#endif
#include <string.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include <ruby/debug.h>
#ifdef _WIN32
#include "hook_io/stream_offload_windows.h"
#include "platforms/win32_compat.h"
#endif
#include "hook_io/buffer_lock.h"
#include "hook_io/io_transfer.h"
#include "loop/wait_table.h"

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

static ID id_offload_file; /* Scheduler#__offload_file (see file_step) */

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
    id_offload_file = rb_intern("__offload_file");
    /* not NULL: Ruby calls no mark function for a data object without data */
    rb_gc_register_mark_object(TypedData_Wrap_Struct(rb_cObject, &frame_keeper_type, frame_cache));
}

/* Whether reads and writes on f go through completion operations: the core
 * performs them (io_uring), f is a non-blocking socket or pipe, and the
 * calling fiber can park until the completion is reaped (a blocking fiber
 * waits for readiness with the thread instead, since nothing would resume
 * it if it parked). */
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
 * O_NONBLOCK says by now (a process sharing the file may clear it, and a
 * blocked Ruby thread would stall every fiber): f->blocking was cached when
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
#ifndef _WIN32 /* no flags to read there: a socket is non-blocking (fd_table.c), nothing else reaches here */
    if (!f->blocking) {
        int flags = fcntl(fd, F_GETFL);
        if (flags >= 0 && !(flags & O_NONBLOCK)) {
            f->blocking = 1;
            errno = EAGAIN; /* the caller waits for readiness, then calls again */
            return -1;
        }
    }
#endif
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
 * ptr (see keep_unread). pos: the file position of a positional read or
 * write (IORING_OP_READ/WRITE with that offset), or -1 for the descriptor's
 * own position (a stream's, or a regular file's, which the kernel reads and
 * advances as read(2) would). async: the kernel's worker threads perform it
 * (regular files: see file_step). */
static int64_t run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *ptr,
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
        if (direction == FARCE_READ && pos < 0 && result > 0) keep_unread(io, fd, (char *)ptr - before, before + (size_t)result);
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

#ifndef _WIN32 /* Windows serves files on its worker pool (win32_compat.c) */
/* ---- regular files ---------------------------------------------------------
 * A regular file is always "ready": a readiness wait cannot keep its read
 * from holding the loop for as long as the disk takes. So a step on a file
 * (a descriptor that is not pollable: fd_table.c) in a fiber that can park
 * goes, in this order, to
 *
 *  - one preadv2/pwritev2 with RWF_NOWAIT on this thread (farce_file_nowait),
 *    when the page cache holds every byte of a read (with operations, of a
 *    read of at most FILE_COPY_MAX_WITH_OPS bytes) (cachestat, which reads
 *    nothing: a RWF_NOWAIT read that misses starts the readahead, and that
 *    sleeps while the disk's queue is full); a write is just tried, and says
 *    EAGAIN when it would wait (EOPNOTSUPP where the file system cannot say:
 *    ext4 for every buffered write); a write of at most FILE_WRITE_INLINE_MAX
 *    bytes is made on this thread at once. A cached 4 KiB read costs what a plain
 *    read does, a hand-off several times more (docs/behaviour.md);
 *  - a completion operation (io_uring), sent to the kernel's worker threads
 *    at once (IOSQE_ASYNC): inline, a read that misses the cache starts its
 *    readahead inside io_uring_enter and sleeps there while the disk's queue
 *    is full. The fiber parks until the completion is reaped, with the same
 *    buffer pinning, withdraw and cancel rules as a socket's (run_op). A
 *    stream-position step passes offset -1: the kernel reads and advances
 *    the file position itself, as read(2) does (O_APPEND writes append), so
 *    Ruby's `pos` (the position less its read buffer) stays right, and a
 *    read cancelled after it completed gives its bytes back to the IO's
 *    buffer (keep_unread);
 *  - else the scheduler's worker pool (__offload_file, scheduler.rb): one
 *    read or write on a worker thread, the fiber parked meanwhile.
 *
 * A fiber that cannot park (a blocking one, the root fiber calling a hook by
 * hand), and the selector (no worker pool: Async's own does the offloading
 * it wants) when it has no operations, do the system call right here, as
 * Ruby does without a scheduler. */

/* Whether steps on files on l are completion operations. */
static inline int file_ops(const farce_loop *l) { return l->ops && l->handle && farce_loop_can_park(l); }

/* cachestat(2) (Linux 6.5): how much of a file range the page cache holds,
 * asked without reading anything. The number is the same on every
 * architecture (the unified table's 451). */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
struct cachestat_range {
    uint64_t off, len;
};
struct cachestat_counts {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
static int cachestat_missing; /* ENOSYS once (a kernel before 6.5, a seccomp filter) */

/* Reads larger than this are not tried with RWF_NOWAIT where cachestat is
 * missing: such a try that misses starts the readahead, and submitting it
 * sleeps while the disk's queue is full (measured on uncached files, 64 of
 * them: 4 KiB tries took 27 us on average and 0.1 ms at worst, 256 KiB
 * ones 0.7 and 6 ms, 4 MiB ones 6.7 and 31 ms). */
#define NOWAIT_UNASKED_MAX (64 * 1024)

/* Writes up to this size are made on the loop's thread, with a plain
 * write(2): a buffered write that small is a copy into the page cache, and
 * ext4 cannot say with RWF_NOWAIT whether one would wait (EOPNOTSUPP for
 * every buffered write). Handing it off instead cost 15-24 us through the
 * worker pool and 11-17 us as an io_uring operation, against 2.5-3.7 us
 * inline, for every line a fiber logs to a file or to a redirected STDOUT. */
#define FILE_WRITE_INLINE_MAX (64 * 1024)

/* With completion operations, cached reads larger than this are operations
 * too: the kernel's workers copy them, not the loop. Readahead keeps most of
 * a sequential read cached by the time it is asked for, so copying those on
 * the loop's thread held it (64 tasks reading 16 MiB files in 256 KiB steps:
 * 97% of the steps were cached, the loop ran 25-45 iterations in 0.8-1.1 s
 * and a 1 ms ticker ticked 19-32 times; with this bound 1,077-2,376
 * iterations and 175-181 ticks, no slower). Without operations the hand-off
 * is a worker-pool job, which costs more than it saves (the same run:
 * 73-141 ticks copying on the loop, 91-100 through the pool). */
#define FILE_COPY_MAX_WITH_OPS (64 * 1024)

/* Whether the page cache holds every byte of [pos, pos + room) that the
 * file has (pos -1: its position): 1 yes, 0 no, -1 cannot say. */
static int file_range_cached(int fd, off_t pos, size_t room)
{
    if (cachestat_missing) return -1;
    if (pos < 0 && (pos = lseek(fd, 0, SEEK_CUR)) < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    if (pos >= st.st_size) return 1; /* end of file: nothing to wait for */
    static uint64_t page;
    if (!page) page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t end = (uint64_t)pos + room < (uint64_t)st.st_size ? (uint64_t)pos + room : (uint64_t)st.st_size;
    uint64_t first = (uint64_t)pos / page, last = (end - 1) / page;
    struct cachestat_range r = {first * page, (last - first + 1) * page};
    struct cachestat_counts c;
    if (syscall(__NR_cachestat, fd, &r, &c, 0) != 0) {
        if (errno == ENOSYS) cachestat_missing = 1;
        return -1;
    }
    return c.nr_cache >= last - first + 1;
}

ssize_t farce_file_nowait(int fd, int reading, void *at, size_t room, off_t pos, size_t copy_max)
{
#ifdef RWF_NOWAIT
    if (reading) {
        if (room > copy_max) {
            errno = EAGAIN;
            return -1;
        }
        int cached = file_range_cached(fd, pos, room);
        if (cached == 0 || (cached < 0 && room > NOWAIT_UNASKED_MAX)) {
            errno = EAGAIN;
            return -1;
        }
    }
    struct iovec v = {at, room};
    ssize_t n;
    do n = reading ? preadv2(fd, &v, 1, pos, RWF_NOWAIT) : pwritev2(fd, &v, 1, pos, RWF_NOWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) errno = EAGAIN; /* cannot say: off the thread */
    return n;
#else
    errno = EAGAIN;
    return -1;
#endif
}

struct offload_call {
    VALUE owner;
    VALUE args[7];
};

static VALUE offload_body(VALUE p)
{
    struct offload_call *c = (struct offload_call *)p;
    return rb_funcallv(c->owner, id_offload_file, 7, c->args);
}

/* One step on the worker pool: the worker reads or writes buffer[at_offset,
 * room] at pos (-1: the file position) and stores its count in a one-element
 * array, so that when an exception reaches the waiting fiber (the pool holds
 * it until the worker is done) the bytes a stream-position read consumed go
 * back to the IO's buffer, as run_op's do. */
static int64_t file_offload(farce_loop *l, VALUE io, int fd, VALUE buffer, int reading, size_t at_offset, size_t room,
                            size_t before, off_t pos)
{
    VALUE moved = rb_ary_new_capa(1);
    struct offload_call c = {l->owner,
                             {reading ? Qfalse : Qtrue, io, buffer, OFFT2NUM(pos), SIZET2NUM(at_offset), SIZET2NUM(room), moved}};
    l->file_offloads++;
    int state = 0;
    VALUE r = rb_protect(offload_body, (VALUE)&c, &state);
    if (state) {
        VALUE n = rb_ary_entry(moved, 0);
        if (reading && pos < 0 && FIXNUM_P(n) && FIX2LONG(n) > 0) {
            /* the worker held the buffer only for its call: it may have
             * been resized since, so its bytes are asked again, and only
             * a range still inside it is given back */
            void *base;
            size_t size;
            farce_buffer_bytes(buffer, 1, &base, &size);
            size_t got = (size_t)FIX2LONG(n);
            if (at_offset + got <= size) keep_unread(io, fd, (char *)base + at_offset - before, before + got);
        }
        rb_jump_tag(state);
    }
    return NUM2LL(r);
}

/* One step of a transfer on a regular file (see above): the count, or
 * -errno. */
static int64_t file_step(farce_loop *l, VALUE io, int fd, VALUE buffer, int reading, char *at, size_t at_offset,
                         size_t room, size_t before, off_t pos)
{
    ssize_t n;
    if (farce_loop_can_park(l) && (reading || room > FILE_WRITE_INLINE_MAX)) {
        l->transfer_calls++;
        n = farce_file_nowait(fd, reading, at, room, pos, file_ops(l) ? FILE_COPY_MAX_WITH_OPS : SIZE_MAX);
        if (n >= 0) {
            l->file_cached++;
            return n;
        }
        if (errno != EAGAIN) return -errno;
        if (file_ops(l)) {
            int64_t r = run_op(l, io, fd, buffer, reading ? FARCE_READ : FARCE_WRITE, at, room, before, pos, 1);
            if (r != -EAGAIN) return r;
            /* withdrawn (a full submission queue, a rebuilt ring), or an
             * O_NONBLOCK file whose bytes are not cached: the pool */
        }
        if (rb_obj_respond_to(l->owner, id_offload_file, 1))
            return file_offload(l, io, fd, buffer, reading, at_offset, room, before, pos);
    }
    l->transfer_calls++;
    n = pos >= 0 ? (reading ? pread(fd, at, room, pos) : pwrite(fd, at, room, pos))
                 : (reading ? read(fd, at, room) : write(fd, at, room));
    return n < 0 ? -errno : n;
}

#else
/* The Ruby loop asks this too: on Windows nothing says whether a file read
 * would wait, so every step goes to the worker pool. */
ssize_t farce_file_nowait(int fd, int reading, void *at, size_t room, off_t pos, size_t copy_max)
{
    errno = EAGAIN;
    return -1;
}
#endif

#ifdef _WIN32
struct stream_offload_call {
    farce_loop *l;
    VALUE io, buffer, length, moved;
    size_t offset;
    int writing;
};

static VALUE stream_offload_body(VALUE p)
{
    struct stream_offload_call *c = (struct stream_offload_call *)p;
    return farce_win32_offload_stream(c->l, c->io, c->buffer, c->length, c->offset, c->writing, c->moved);
}

/* A write, or a read of a file or console, on the worker pool (see the
 * Windows part of transfer). When an exception reaches the fiber while it
 * waits (the pool holds it until the worker is done), the bytes the worker
 * read go back to the IO's buffer, as file_offload's and run_op's do:
 * otherwise the next read of the file would start past them. */
static VALUE stream_offload(farce_loop *l, VALUE io, int fd, VALUE buffer, VALUE length, size_t offset, int reading)
{
    struct stream_offload_call c = {l, io, buffer, length, rb_ary_new_capa(1), offset, !reading};
    int state = 0;
    VALUE r = rb_protect(stream_offload_body, (VALUE)&c, &state);
    if (state) {
        VALUE n = rb_ary_entry(c.moved, 0);
        if (reading && FIXNUM_P(n) && FIX2LONG(n) > 0) {
            /* the buffer may have been resized since the worker let it go */
            void *base;
            size_t size;
            farce_buffer_bytes(buffer, 1, &base, &size);
            size_t got = (size_t)FIX2LONG(n);
            if (offset + got <= size) keep_unread(io, fd, (char *)base + offset, got);
        }
        rb_jump_tag(state);
    }
    return r;
}
#endif

/* farce_io_transfer's loop. */
static VALUE transfer(farce_loop *l, VALUE io, VALUE buffer, VALUE length_v, size_t offset, off_t from,
                      enum farce_direction direction)
{
    int reading = direction == FARCE_READ; /* io: converted by farce_io_transfer */
    size_t length = NUM2SIZET(length_v);
    int events = reading ? RUBY_IO_READABLE : RUBY_IO_WRITABLE;
    int positional = from >= 0;
    size_t total = 0;
    int waited = 0; /* the last step was a wait: try the call now, whatever we knew before */
    int op_next = 0;
    int may_wait = length > 0 ? 1 : -1; /* -1: length 0, not asked yet (see the top of this file) */
#ifdef _WIN32
    int64_t write_step = FARCE_WIN32_FIRST_POLL_NS; /* a pipe write's next poll (below) */
#endif
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
#ifdef _WIN32
        /* Only sockets can be waited on there (AFD polls sockets). A read
         * of a pipe first polls it from this fiber until it holds bytes,
         * where an exception or io_close can reach it, then reads what is
         * there, which does not wait. A write of a pipe writes what fits
         * now, and while nothing fits polls from this fiber the same way,
         * trying again after each step. Anything else (a file, a console)
         * runs on the scheduler's worker pool, so that it never blocks the
         * loop; the selector has no pool and makes the call itself, as does
         * a fiber that cannot park to wait for a worker or a step (one
         * resumed inside another fiber's turn: Fiber#raise from a fiber). */
        if (!f->socket && !positional) {
            if (reading && farce_win32_read_would_block(fd)) {
                if (!MAY_WAIT()) return total ? SIZET2NUM(total) : INT2NUM(-EAGAIN); /* read_nonblock */
                farce_win32_wait_stream(l, io, fd, RUBY_IO_READABLE, -1);
                continue;
            }
            if (!reading) {
                l->transfer_calls++;
                ssize_t n = farce_win32_pipe_write_nowait(fd, at, room);
                if (n > 0) {
                    total += (size_t)n;
                    write_step = FARCE_WIN32_FIRST_POLL_NS;
                    if (total >= length) return SIZET2NUM(total);
                    continue;
                }
                if (n == -EAGAIN) {
                    if (!MAY_WAIT()) return total ? SIZET2NUM(total) : INT2NUM(-EAGAIN); /* write_nonblock */
                    if (farce_loop_can_park(l)) {
                        farce_loop_park_polled(l, fd, write_step);
                        write_step = farce_win32_next_poll_ns(write_step);
                        continue;
                    }
                    /* the thread waits, as a blocking fiber's does */
                } else if (n != -ENOTSUP) {
                    return total ? SIZET2NUM(total) : LL2NUM(n);
                }
            }
            size_t pipe_room = reading ? farce_win32_pipe_room(fd, room) : 0;
            if (pipe_room) {
                room = pipe_room;
            } else if (total == 0 && farce_loop_can_park(l)) { /* else the thread waits, as a blocking fiber's does */
                VALUE done = stream_offload(l, io, fd, buffer, length_v, offset, reading);
                if (done != Qundef) return done;
            }
        }
#else
        if (!f->pollable) {
            int64_t n = file_step(l, io, fd, buffer, reading, at, offset + total, room, total,
                                  positional ? from + (off_t)total : -1);
            if (n > 0 || (n == 0 && !reading)) {
                total += (size_t)n;
                if (total >= length) return SIZET2NUM(total);
                continue;
            }
            if (n == 0) return SIZET2NUM(total); /* end of file */
            if (n == -EINTR) {
                rb_thread_check_ints();
                continue;
            }
            return total ? SIZET2NUM(total) : LL2NUM(n);
        }
#endif
        /* a call that may not wait (below) gets no operation that waits for data either */
        if (!positional && reading && use_ops(l, f) && (f->read_with_op || f->drained) && MAY_WAIT()) op_next = 1;
        if (op_next) {
            op_next = 0;
            int64_t n = run_op(l, io, fd, buffer, direction, at, room, total, -1, 0);
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
    io = rb_io_get_io(io);
    farce_loop_give_owed_turn(l, io); /* before any byte moves: an exception in the turn loses nothing */
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

/* io_transfer_v4.c's completion operation and its questions, the same ones
 * this loop asks (kept static here, so that the loop above inlines them). */
int farce_io_use_ops(const farce_loop *l, const farce_fd_ent *f) { return use_ops(l, f); }
int farce_io_nonblocking_call(void) { return nonblocking_call(); }
int64_t farce_io_run_op(farce_loop *l, VALUE io, int fd, VALUE buffer, enum farce_direction direction, void *at,
                        size_t len)
{
    return run_op(l, io, fd, buffer, direction, at, len, 0, -1, 0); /* a stream: its position, inline */
}
