/*
 * The step of a file or console on Windows, where nothing says whether its
 * read would wait: the whole transfer runs on the scheduler's worker pool
 * (Scheduler#__offload_stream), so that it never blocks the loop. The
 * selector has no pool and makes the call itself, as does a fiber that
 * cannot park to wait for a worker (one resumed inside another fiber's
 * turn: Fiber#raise from a fiber), and a transfer that already moved bytes.
 */
#include <ruby.h>
#include "platforms/sys_io.h"
#include "hook_io/buffer_lock.h"
#include "hook_io/stream_offload_windows.h"
#include "hook_io/io_transfer.h"
#include "hook_io/transfer_step.h"

/* The Ruby loop asks this too (io_transfer.h): on Windows nothing says
 * whether a file read would wait, so every step goes to the worker pool. */
ssize_t farce_file_nowait(int fd, int reading, void *at, size_t room, off_t pos, size_t copy_max)
{
    errno = EAGAIN;
    return -1;
}

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

/* The transfer on the worker pool. When an exception reaches the fiber
 * while it waits (the pool holds it until the worker is done), the bytes
 * the worker read go back to the IO's buffer, as an operation's do:
 * otherwise the next read of the file would start past them. */
static VALUE stream_offload(farce_transfer *t)
{
    struct stream_offload_call c = {t->l, t->io, t->buffer, t->length_v, rb_ary_new_capa(1), t->offset, !t->reading};
    int state = 0;
    VALUE r = rb_protect(stream_offload_body, (VALUE)&c, &state);
    if (state) {
        VALUE n = rb_ary_entry(c.moved, 0);
        if (t->reading && FIXNUM_P(n) && FIX2LONG(n) > 0) {
            /* the buffer may have been resized since the worker let it go */
            void *base;
            size_t size;
            farce_buffer_bytes(t->buffer, 1, &base, &size);
            size_t got = (size_t)FIX2LONG(n);
            if (t->offset + got <= size) farce_transfer_keep_unread(t->io, t->fd, (char *)base + t->offset, got);
        }
        rb_jump_tag(state);
    }
    return r;
}

int64_t farce_step_file(farce_transfer *t)
{
    if (t->total == 0 && t->from < 0 && farce_loop_can_park(t->l)) {
        VALUE done = stream_offload(t);
        if (done != Qundef) {
            t->done = done;
            return FARCE_STEP_DONE;
        }
    }
    t->l->transfer_calls++;
    ssize_t n = t->reading ? read(t->fd, t->at, t->room) : write(t->fd, t->at, t->room);
    return n < 0 ? -errno : n;
}
