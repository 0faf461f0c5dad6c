/*
 * The step of a regular file on Linux, at the file's position or at a
 * given one. A regular file is always "ready": a readiness wait cannot keep
 * its read from holding the loop for as long as the disk takes. So a step
 * on a file in a fiber that can park goes, in this order, to
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
 *    buffer pinning, withdraw and cancel rules as a socket's
 *    (step_completion.c). A stream-position step passes offset -1: the kernel reads and advances
 *    the file position itself, as read(2) does (O_APPEND writes append), so
 *    Ruby's `pos` (the position less its read buffer) stays right, and a
 *    read cancelled after it completed gives its bytes back to the IO's
 *    buffer (farce_transfer_keep_unread);
 *  - else the scheduler's worker pool (__offload_file, scheduler.rb): one
 *    read or write on a worker thread, the fiber parked meanwhile.
 *
 * A fiber that cannot park (a blocking one, the root fiber calling a hook by
 * hand), and the selector (no worker pool: Async's own does the offloading
 * it wants) when it has no operations, do the system call right here, as
 * Ruby does without a scheduler.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include "hook_io/buffer_lock.h"
#include "hook_io/io_transfer.h"
#include "hook_io/transfer_step.h"

static ID id_offload_file; /* Scheduler#__offload_file (scheduler.rb) */

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
/* ENOSYS once (a kernel before 6.5, a seccomp filter). Any Ractor's thread
 * may set it while others read it: relaxed atomics (plain loads and stores). */
static int cachestat_missing;

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
    if (__atomic_load_n(&cachestat_missing, __ATOMIC_RELAXED)) return -1;
    if (pos < 0 && (pos = lseek(fd, 0, SEEK_CUR)) < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    if (pos >= st.st_size) return 1; /* end of file: nothing to wait for */
    static uint64_t page_size; /* the same answer whichever thread asks first */
    uint64_t page = __atomic_load_n(&page_size, __ATOMIC_RELAXED);
    if (!page) __atomic_store_n(&page_size, page = (uint64_t)sysconf(_SC_PAGESIZE), __ATOMIC_RELAXED);
    uint64_t end = (uint64_t)pos + room < (uint64_t)st.st_size ? (uint64_t)pos + room : (uint64_t)st.st_size;
    uint64_t first = (uint64_t)pos / page, last = (end - 1) / page;
    struct cachestat_range r = {first * page, (last - first + 1) * page};
    struct cachestat_counts c;
    if (syscall(__NR_cachestat, fd, &r, &c, 0) != 0) {
        if (errno == ENOSYS) __atomic_store_n(&cachestat_missing, 1, __ATOMIC_RELAXED);
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
 * back to the IO's buffer, as an operation's do. */
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
            if (at_offset + got <= size) farce_transfer_keep_unread(io, fd, (char *)base + at_offset - before, before + got);
        }
        rb_jump_tag(state);
    }
    return NUM2LL(r);
}

/* The count, or -errno; a call that says EAGAIN (an O_NONBLOCK file the
 * loop had to read itself) is the transfer's answer: a file has no
 * readiness to park on. */
int64_t farce_step_file(farce_transfer *t)
{
    farce_loop *l = t->l;
    int fd = t->fd, reading = t->reading;
    off_t pos = t->from >= 0 ? t->from + (off_t)t->total : -1;
    ssize_t n;
    if (farce_loop_can_park(l) && (reading || t->room > FILE_WRITE_INLINE_MAX)) {
        l->transfer_calls++;
        n = farce_file_nowait(fd, reading, t->at, t->room, pos, file_ops(l) ? FILE_COPY_MAX_WITH_OPS : SIZE_MAX);
        if (n >= 0) {
            l->file_cached++;
            return n;
        }
        if (errno != EAGAIN) return -errno;
        if (file_ops(l)) {
            int64_t r = farce_transfer_run_op(l, t->io, fd, t->buffer, reading ? FARCE_READ : FARCE_WRITE, t->at,
                                              t->room, t->total, pos, 1);
            if (r != -EAGAIN) return r;
            /* withdrawn (a full submission queue, a rebuilt ring), or an
             * O_NONBLOCK file whose bytes are not cached: the pool */
        }
        if (rb_obj_respond_to(l->owner, id_offload_file, 1))
            return file_offload(l, t->io, fd, t->buffer, reading, t->offset + t->total, t->room, t->total, pos);
    }
    l->transfer_calls++;
    n = pos >= 0 ? (reading ? pread(fd, t->at, t->room, pos) : pwrite(fd, t->at, t->room, pos))
                 : (reading ? read(fd, t->at, t->room) : write(fd, t->at, t->room));
    if (n >= 0) return n;
    if (errno != EAGAIN) return -errno;
    t->done = t->total ? SIZET2NUM(t->total) : INT2NUM(-EAGAIN);
    return FARCE_STEP_DONE;
}

void farce_step_file_init(void) { id_offload_file = rb_intern("__offload_file"); }
