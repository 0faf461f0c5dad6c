/*
 * Positional file I/O for the io_pread/io_pwrite hooks (Ruby 3.3+). A read
 * from a regular file never reports "not ready", so waiting for readiness
 * cannot keep it from stalling the loop: lib/farce/worker_pool.rb runs these
 * functions on a worker thread (which has no scheduler), and they block that
 * thread with the GVL released while the loop runs other fibers.
 *
 * No Go here: these run on worker threads and touch only the descriptor and
 * the IO::Buffer's memory, which the waiting fiber keeps alive.
 *
 * Ruby 3.3 and 3.4 call io_pread/io_pwrite for IO#pread/IO#pwrite from
 * inside a blocking region, without the GVL (IO::Buffer#pread/#pwrite call
 * them with it). No Ruby code may run then, so the hooks are C methods
 * that, without the GVL, do the transfer right there with plain system
 * calls, as Ruby itself would without a scheduler (blocking the loop for
 * that long); with the GVL they hand it to the worker pool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include <ruby/thread.h>
#include "platforms/sys_io.h"
#include "hook_io/buffer_lock.h"
#include "hook_io/io_transfer.h"
#include "loop/ruby_io.h"

/* Exported by libruby (every version farce supports), not in its public headers. */
int ruby_thread_has_gvl_p(void);

static ID id_offload_positional;

struct positional {
    int fd;
    int writing;
    char *base;
    size_t size;
    off_t from;
    ssize_t result;
    int error;
};

/* from < 0 (only from __file_transfer_once): at the file position */
static void *positional_nogvl(void *p)
{
    struct positional *a = p;
    if (a->from < 0) a->result = a->writing ? write(a->fd, a->base, a->size) : read(a->fd, a->base, a->size);
    else a->result = a->writing ? pwrite(a->fd, a->base, a->size, a->from) : pread(a->fd, a->base, a->size, a->from);
    a->error = a->result < 0 ? errno : 0;
    return NULL;
}

static int descriptor(VALUE io)
{
    rb_io_t *fptr;
    io = rb_io_get_io(io);
    GetOpenFile(io, fptr);
    rb_io_check_closed(fptr);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return fptr->fd;
#pragma GCC diagnostic pop
}

/* Reads (or writes) at least `length` bytes of buffer[offset...] at file
 * position `from`, at least once when length is 0; returns the byte count,
 * or -errno when the first transfer fails. A read stops at end of file.
 * Runs with the buffer held (positional_io). */
static VALUE positional_transfer(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE length_v, VALUE offset_v)
{
    size_t length = NUM2SIZET(length_v), offset = NUM2SIZET(offset_v), total = 0;
    off_t from = NUM2OFFT(from_v);
    if (from < 0) return INT2NUM(-EINVAL);
    for (;;) {
        int fd = descriptor(io); /* again each time: raises IOError once the IO is closed */
        void *base;
        size_t size;
        farce_buffer_bytes(buffer, !writing, &base, &size);
        if (offset > size || length > size - offset) {
            rb_raise(rb_eArgError, "io_p%s: length %zu at offset %zu exceeds the buffer (%zu bytes)",
                     writing ? "write" : "read", length, offset, size);
        }
        size_t room = size - offset - total;
        if (room == 0) return SIZET2NUM(total);
        struct positional a = {fd, writing, (char *)base + offset + total, room, from + (off_t)total, 0, 0};
        rb_thread_call_without_gvl(positional_nogvl, &a, NULL, NULL);
        if (a.result > 0) {
            total += (size_t)a.result;
            if (total >= length) return SIZET2NUM(total);
            continue;
        }
        if (a.result == 0) return SIZET2NUM(total); /* end of file (or a zero-byte write) */
        if (a.error == EINTR) {
            rb_thread_check_ints();
            continue;
        }
        return total ? SIZET2NUM(total) : INT2NUM(-a.error);
    }
}

struct positional_call {
    int writing;
    VALUE io, buffer, from, length, offset;
};

static VALUE positional_call_body(VALUE p)
{
    struct positional_call *c = (struct positional_call *)p;
    return positional_transfer(c->writing, c->io, c->buffer, c->from, c->length, c->offset);
}

/* The worker thread transfers with the GVL released, so the loop's other
 * fibers run meanwhile: the buffer is held for the whole transfer so that
 * none of them can resize or free it under the system call (they get
 * IO::Buffer::LockedError), and given back however it ends
 * (buffer_lock.h). */
static VALUE positional_io(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE length_v, VALUE offset_v)
{
    struct positional_call c = {writing, io, buffer, from_v, length_v, offset_v};
    if (!rb_obj_is_kind_of(buffer, rb_cIOBuffer)) return positional_call_body((VALUE)&c);
    return farce_buffer_held(buffer, positional_call_body, (VALUE)&c);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* What a transfer made without the GVL may touch: the descriptor, and the
 * buffer's bytes from offset to its end. */
struct positional_range {
    int fd;
    char *start;   /* the buffer at offset */
    size_t room;   /* from offset to the buffer's end */
    size_t length; /* what the caller asked for */
    off_t from;    /* the file position */
};

/* The checks both paths without the GVL make, on plain C structures only
 * (see the top of this file): 0 with *r filled, or the -errno to answer. */
static int positional_range_without_gvl(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE length_v,
                                        VALUE offset_v, struct positional_range *r)
{
    if (!FIXNUM_P(from_v) || !FIXNUM_P(length_v) || !FIXNUM_P(offset_v) || !RB_TYPE_P(io, T_FILE)) return -EINVAL;
    rb_io_t *fptr = RFILE(io)->fptr;
    if (!fptr || fptr->fd < 0) return -EBADF;
    long from = FIX2LONG(from_v), length = FIX2LONG(length_v), offset = FIX2LONG(offset_v);
    void *base;
    size_t size;
    farce_buffer_bytes(buffer, !writing, &base, &size);
    if (from < 0 || offset < 0 || length < 0 || (size_t)offset > size || (size_t)length > size - (size_t)offset) {
        return -EINVAL;
    }
    *r = (struct positional_range){fptr->fd, (char *)base + offset, size - (size_t)offset, (size_t)length, (off_t)from};
    return 0;
}
#pragma GCC diagnostic pop

/* Without the GVL (see the top of this file): no allocation, no exception,
 * no Ruby call beyond reading the buffer's and the IO's C structures. */
static VALUE positional_without_gvl(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE length_v, VALUE offset_v)
{
    struct positional_range r;
    int bad = positional_range_without_gvl(writing, io, buffer, from_v, length_v, offset_v, &r);
    if (bad) return INT2FIX(bad);
    size_t total = 0;
    while (total < r.room) {
        struct positional a = {r.fd, writing, r.start + total, r.room - total, r.from + (off_t)total, 0, 0};
        positional_nogvl(&a);
        if (a.result > 0) {
            total += (size_t)a.result;
            if (total >= r.length) break;
            continue;
        }
        if (a.result == 0) break;
        if (a.error == EINTR) continue;
        if (total == 0) return INT2FIX(-a.error);
        break;
    }
    return LONG2FIX((long)total);
}

/* The scheduler's loop when its file steps are completion operations
 * (io_uring, on the loop's thread, in a fiber that can park), else NULL:
 * fiber_scheduler.c's answer (farce_offload_init). */
static farce_loop *(*file_ops_loop)(VALUE scheduler);

/* Whether io is a regular file: only those go to completion operations
 * (io_transfer.c serves a pollable descriptor, a device such as /dev/zero,
 * with a plain pread, which would hold the loop). */
static int regular_file(VALUE io)
{
    struct stat st;
    return fstat(descriptor(io), &st) == 0 && S_ISREG(st.st_mode);
}

/* io_pread/io_pwrite as completion operations (IORING_OP_READ/WRITE at
 * `from`): io_transfer.c's loop, whose file steps are operations on such a
 * loop. The checks are positional_transfer's, so that both ways answer
 * alike. */
static VALUE positional_op(farce_loop *l, int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE length_v,
                           VALUE offset_v)
{
    size_t length = NUM2SIZET(length_v), offset = NUM2SIZET(offset_v);
    off_t from = NUM2OFFT(from_v);
    if (from < 0) return INT2NUM(-EINVAL);
    void *base;
    size_t size;
    farce_buffer_bytes(buffer, !writing, &base, &size);
    if (offset > size || length > size - offset) {
        rb_raise(rb_eArgError, "io_p%s: length %zu at offset %zu exceeds the buffer (%zu bytes)",
                 writing ? "write" : "read", length, offset, size);
    }
    return farce_io_transfer(l, io, buffer, length_v, offset, from, writing ? FARCE_WRITE : FARCE_READ);
}

/* call-seq: io_pread(io, buffer, from, length, offset) -> count or -errno
 * Ruby 3.3+: IO#pread and IO::Buffer#pread. */
static VALUE sched_io_pread(VALUE self, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    if (!ruby_thread_has_gvl_p()) return positional_without_gvl(0, io, buffer, from, length, offset);
    farce_loop *l = rb_obj_is_kind_of(buffer, rb_cIOBuffer) ? file_ops_loop(self) : NULL;
    if (l && regular_file(io)) return positional_op(l, 0, io, buffer, from, length, offset);
    VALUE args[] = {Qfalse, io, buffer, from, length, offset};
    return rb_funcallv(self, id_offload_positional, 6, args);
}

/* call-seq: io_pwrite(io, buffer, from, length, offset) -> count or -errno
 * Ruby 3.3+: IO#pwrite and IO::Buffer#pwrite. */
static VALUE sched_io_pwrite(VALUE self, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    if (!ruby_thread_has_gvl_p()) return positional_without_gvl(1, io, buffer, from, length, offset);
    farce_loop *l = rb_obj_is_kind_of(buffer, rb_cIOBuffer) ? file_ops_loop(self) : NULL;
    if (l && regular_file(io)) return positional_op(l, 1, io, buffer, from, length, offset);
    VALUE args[] = {Qtrue, io, buffer, from, length, offset};
    return rb_funcallv(self, id_offload_positional, 6, args);
}

/* call-seq: Farce.__pread(io, buffer, from, length, offset) -> count or -errno */
static VALUE farce_pread(VALUE mod, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    return positional_io(0, io, buffer, from, length, offset);
}

/* call-seq: Farce.__pwrite(io, buffer, from, length, offset) -> count or -errno */
static VALUE farce_pwrite(VALUE mod, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    return positional_io(1, io, buffer, from, length, offset);
}

/* ---- Ruby 4.1: scheduler interface version 4 (ruby/ruby#18483) -----------
 * io_pread/io_pwrite(io, buffer, from, offset, length): one transfer of at
 * most `length` bytes of buffer[offset, length] at file position `from`;
 * the count (short counts included, 0 at end of file and for a length of
 * 0) or -errno, -EINVAL for a range outside the buffer or a negative
 * position. Still on a worker thread: a file is always "ready", and one
 * pread of a slow disk would stall the loop as much as many. */

/* One positional transfer with the GVL (on a worker thread, or the
 * caller's when there is no pool), the buffer held around it. */
struct positional_once {
    int writing;
    VALUE io, buffer;
    off_t from;
    size_t offset, length;
};

static VALUE positional_once_body(VALUE p)
{
    struct positional_once *o = (struct positional_once *)p;
    for (;;) {
        int fd = descriptor(o->io); /* again after EINTR: raises IOError once the IO is closed */
        void *base;
        size_t size;
        farce_buffer_bytes(o->buffer, !o->writing, &base, &size);
        if (o->offset > size || o->length > size - o->offset) return INT2NUM(-EINVAL);
        struct positional a = {fd, o->writing, (char *)base + o->offset, o->length, o->from, 0, 0};
        rb_thread_call_without_gvl(positional_nogvl, &a, NULL, NULL);
        if (a.result >= 0) return SSIZET2NUM(a.result);
        if (a.error != EINTR) return INT2NUM(-a.error);
        rb_thread_check_ints();
    }
}

static VALUE positional_once(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE offset_v, VALUE length_v,
                             int file_position_allowed)
{
    struct positional_once o = {writing, io, buffer, NUM2OFFT(from_v), NUM2SIZET(offset_v), NUM2SIZET(length_v)};
    if (o.from < -1 || (o.from == -1 && !file_position_allowed)) return INT2NUM(-EINVAL);
    if (o.length == 0) return INT2FIX(0); /* no transfer asked: none made */
    if (!rb_obj_is_kind_of(buffer, rb_cIOBuffer)) return positional_once_body((VALUE)&o);
    return farce_buffer_held(buffer, positional_once_body, (VALUE)&o);
}

/* positional_without_gvl's single transfer (see the top of this file). */
static VALUE positional_once_without_gvl(int writing, VALUE io, VALUE buffer, VALUE from_v, VALUE offset_v, VALUE length_v)
{
    struct positional_range r;
    int bad = positional_range_without_gvl(writing, io, buffer, from_v, length_v, offset_v, &r);
    if (bad) return INT2FIX(bad);
    if (r.length == 0) return INT2FIX(0);
    struct positional a = {r.fd, writing, r.start, r.length, r.from, 0, 0};
    do positional_nogvl(&a);
    while (a.result < 0 && a.error == EINTR);
    return a.result >= 0 ? LONG2FIX((long)a.result) : INT2FIX(-a.error);
}

static ID id_offload_positional_once;

/* call-seq: io_pread(io, buffer, from, offset, length) -> count or -errno
 * (Ruby 4.1; on older Rubies as __io_pread_v4) */
static VALUE sched_io_pread_v4(VALUE self, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    if (!ruby_thread_has_gvl_p()) return positional_once_without_gvl(0, io, buffer, from, offset, length);
    VALUE args[] = {Qfalse, io, buffer, from, offset, length};
    return rb_funcallv(self, id_offload_positional_once, 6, args);
}

/* call-seq: io_pwrite(io, buffer, from, offset, length) -> count or -errno
 * (Ruby 4.1; on older Rubies as __io_pwrite_v4) */
static VALUE sched_io_pwrite_v4(VALUE self, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    if (!ruby_thread_has_gvl_p()) return positional_once_without_gvl(1, io, buffer, from, offset, length);
    VALUE args[] = {Qtrue, io, buffer, from, offset, length};
    return rb_funcallv(self, id_offload_positional_once, 6, args);
}

/* call-seq: Farce.__pread_once(io, buffer, from, offset, length) -> count or -errno */
static VALUE farce_pread_once(VALUE mod, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    return positional_once(0, io, buffer, from, offset, length, 0);
}

/* call-seq: Farce.__pwrite_once(io, buffer, from, offset, length) -> count or -errno */
static VALUE farce_pwrite_once(VALUE mod, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    return positional_once(1, io, buffer, from, offset, length, 0);
}

/* call-seq: Farce.__file_transfer_once(writing, io, buffer, from, offset, length) -> count or -errno
 * One read or write of a regular file for io_read/io_write (io_transfer.c's
 * file_offload, the Ruby loop's transfer), on a worker thread: at file
 * position `from`, or at the file's own position when from is -1 (the
 * kernel advances it, as for any read(2)). */
static VALUE farce_file_transfer_once(VALUE mod, VALUE writing, VALUE io, VALUE buffer, VALUE from, VALUE offset,
                                      VALUE length)
{
    return positional_once(RTEST(writing), io, buffer, from, offset, length, 1);
}

/* call-seq: Farce.__file_nowait(writing, io, buffer, from, offset, length) -> count or -errno
 * The Ruby loop's first try at a file step: farce_file_nowait (io_transfer.c)
 * on this thread, the buffer held around it; -EAGAIN when it would wait for
 * the disk (or cannot say). */
static VALUE nowait_body(VALUE p)
{
    struct positional_once *o = (struct positional_once *)p;
    int fd = descriptor(o->io);
    void *base;
    size_t size;
    farce_buffer_bytes(o->buffer, !o->writing, &base, &size);
    if (o->offset > size || o->length > size - o->offset) return INT2NUM(-EINVAL);
    ssize_t n = farce_file_nowait(fd, !o->writing, (char *)base + o->offset, o->length, o->from, SIZE_MAX);
    return n >= 0 ? SSIZET2NUM(n) : INT2NUM(-errno);
}

static VALUE farce_file_nowait_m(VALUE mod, VALUE writing, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    struct positional_once o = {RTEST(writing), io, buffer, NUM2OFFT(from), NUM2SIZET(offset), NUM2SIZET(length)};
    if (o.from < -1) return INT2NUM(-EINVAL);
    if (o.length == 0) return INT2FIX(0);
    return farce_buffer_held(buffer, nowait_body, (VALUE)&o);
}

void farce_offload_init(VALUE mFarce, VALUE cScheduler, farce_loop *(*ops_loop)(VALUE scheduler))
{
    file_ops_loop = ops_loop;
    id_offload_positional = rb_intern("__offload_positional");
    id_offload_positional_once = rb_intern("__offload_positional_once");
#if FARCE_SINGLE_TRANSFER_HOOKS
    rb_define_method(cScheduler, "io_pread", sched_io_pread_v4, 5);
    rb_define_method(cScheduler, "io_pwrite", sched_io_pwrite_v4, 5);
    (void)sched_io_pread; /* the version 3 forms: unused on this Ruby */
    (void)sched_io_pwrite;
#else
    rb_define_method(cScheduler, "io_pread", sched_io_pread, 5);
    rb_define_method(cScheduler, "io_pwrite", sched_io_pwrite, 5);
#endif
    /* the version 4 forms under their own names on every Ruby (tests) */
    rb_define_private_method(cScheduler, "__io_pread_v4", sched_io_pread_v4, 5);
    rb_define_private_method(cScheduler, "__io_pwrite_v4", sched_io_pwrite_v4, 5);
    rb_define_singleton_method(mFarce, "__pread", farce_pread, 5);
    rb_define_singleton_method(mFarce, "__pwrite", farce_pwrite, 5);
    rb_define_singleton_method(mFarce, "__pread_once", farce_pread_once, 5);
    rb_define_singleton_method(mFarce, "__pwrite_once", farce_pwrite_once, 5);
    rb_define_singleton_method(mFarce, "__file_transfer_once", farce_file_transfer_once, 6);
    rb_define_singleton_method(mFarce, "__file_nowait", farce_file_nowait_m, 6);
}
