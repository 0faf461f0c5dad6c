/*
 * What a front end (scheduler or selector) knows of each descriptor number:
 * which IO object uses it, so that a number handed to a new IO is noticed,
 * and the few facts that decide how to read it.
 */
#ifndef FARCE_FD_TABLE_H
#define FARCE_FD_TABLE_H 1

#include <stdint.h>
#include <ruby.h>
#include "core_door.h"

typedef struct {
    VALUE io;         /* the IO object last waited on with this number: NOT marked (see fd_table.c) */
    VALUE io_id;      /* its object id (a Fixnum): tells it from a new object at the same address */
    size_t gc_seen;   /* rb_gc_count() when io was last known alive */
    uint8_t stream;   /* socket or FIFO: a short read means it was drained */
    uint8_t socket;   /* a socket: recv/send take MSG_DONTWAIT */
    uint8_t blocking; /* O_NONBLOCK was clear: never read before it is ready */
    uint8_t pollable; /* not a regular file or directory */
    uint8_t drained;  /* the last read was short */
    uint8_t read_with_op; /* completion ops: the last read had to wait, so read with an op at once */
} farce_fd_ent;

/* Descriptor waits fibers parked on since the last poll, on tokens the
 * core reserved (event_loop.c): the next poll starts them (farce_poll_batch). */
#define FARCE_DEFERRED_WAITS 256

typedef struct {
    farce_fd_ent *fds;
    int nfds;
    /* Kept here because forgetting a descriptor must find them started:
     * every forget below starts them first (farce_fd_table_start_deferred). */
    farce_fd_wait deferred[FARCE_DEFERRED_WAITS];
    int ndeferred;
    VALUE alive; /* ObjectSpace::WeakMap: object id => IO, while the IO lives (marked) */
    const farce_core_copy *core; /* the core copy the loop's handle belongs to */
} farce_fd_table;

/* Descriptor numbers the table accepts: the Go core's bound. A larger one
 * raises before any table grows (2^24 entries would be ~512 MB, and the
 * doubling overflows at 2^30). */
#define FARCE_FD_MAX (1 << 24)

/* The entry for fd as used by io. When the number changed hands (the old IO
 * was closed, or collected), the core forgets it: the old owner's waiters
 * wake with IOError and stale events are dropped. Raises on core errors and
 * on numbers outside [0, FARCE_FD_MAX). A handle of
 * 0 means the front end has not started its core yet (the selector starts
 * it on first need): the core is then left alone, here and below. */
farce_fd_ent *farce_fd_table_entry_slow(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd);
/* Every transfer asks once per step (six times per ping-pong round trip):
 * the common case, the same IO again with no GC since (fd_table.c), is
 * answered inline; anything else (a new number, a new IO, a GC since, a
 * number out of range, whose entry never holds an IO) takes the call. */
static inline farce_fd_ent *farce_fd_table_entry(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd)
{
    if (RB_LIKELY(fd >= 0 && fd < t->nfds)) {
        farce_fd_ent *f = &t->fds[fd];
        if (f->io == io && f->gc_seen == rb_gc_count()) return f;
    }
    return farce_fd_table_entry_slow(t, handle, backend, io, fd);
}

/* Drops every descriptor whose IO was closed or collected, waking its
 * waiters. Ruby before 4.0 tells a scheduler nothing when an IO is closed. */
void farce_fd_table_forget_closed(farce_fd_table *t, int64_t handle);

/* Drops fd (io_close): its waiters wake with IOError at once. Checks the
 * stack before it calls the core (core_door.h). */
void farce_fd_table_forget(farce_fd_table *t, int64_t handle, int fd);

/* Starts the deferred waits now (farce_bind_waits) instead of at the next
 * poll. A failure leaves them to the poll. */
void farce_fd_table_start_deferred(farce_fd_table *t, int64_t handle);

void farce_fd_table_mark(const farce_fd_table *t);
void farce_fd_table_clear(farce_fd_table *t);
void farce_fd_table_free(farce_fd_table *t);
size_t farce_fd_table_memsize(const farce_fd_table *t);

#endif
