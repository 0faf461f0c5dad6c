/*
 * What a front end (scheduler or selector) knows of each descriptor number:
 * which IO object uses it, so that a number handed to a new IO is noticed,
 * and the few facts that decide how to read it.
 */
#ifndef FARCE_FD_TABLE_H
#define FARCE_FD_TABLE_H 1

#include <stdint.h>
#include <ruby.h>
#include "core_access/core_door.h"

/* What kind of file a descriptor names, read once when an IO takes the
 * number (fd_table_unix.c, fd_table_windows.c): it picks the steps that move
 * its bytes (farce_fd_steps). A terminal is any other pollable file (a tty,
 * a character device, an eventfd; a Windows console). */
typedef enum {
    FARCE_FD_SOCKET,
    FARCE_FD_PIPE, /* a pipe or FIFO */
    FARCE_FD_FILE, /* a regular file or directory: no readiness */
    FARCE_FD_TERMINAL,
    FARCE_FD_KINDS
} farce_fd_kind;

/* One transfer under way (hook_io/transfer_step.h). The loop only keeps,
 * for each descriptor, the steps that move its bytes: hook_io fills them in
 * (farce_fd_steps_by_kind), the table picks them once per descriptor. */
struct farce_transfer;
struct farce_loop;
typedef struct {
    /* One try at moving bytes at the stream's position, and at a file
     * position: the count (0 at end of file), or -errno; -EAGAIN (or
     * -EWOULDBLOCK) when it would block, and the transfer parks (or, when its
     * caller may not wait, answers -EAGAIN). */
    int64_t (*step)(struct farce_transfer *t);
    int64_t (*positional)(struct farce_transfer *t);
    /* Waits until a step that would block may be tried again. */
    void (*park)(struct farce_transfer *t);
    /* For a descriptor with no kernel wait (not pollable: a regular file;
     * on Windows anything but a socket), the front ends' io_wait: the
     * events of `events` it is ready for now, and a wait until it is ready
     * for some (those events, 0 once timeout_ns passed (< 0: never), or
     * FARCE_RESUMED_ELSEWHERE). */
    int (*ready_now)(int fd, int events);
    int64_t (*wait)(struct farce_loop *l, VALUE io, int fd, int events, int64_t timeout_ns);
} farce_fd_steps;

/* [kind][1 when the loop performs completion operations (io_uring)] */
extern farce_fd_steps farce_fd_steps_by_kind[FARCE_FD_KINDS][2];

typedef struct {
    VALUE io;         /* the IO object last waited on with this number: NOT marked (see fd_table.c) */
    VALUE io_id;      /* its object id (a Fixnum): tells it from a new object at the same address */
    size_t gc_seen;   /* rb_gc_count() when io was last known alive */
    uint64_t dev, ino; /* the open file the number named when io took it (fd_table.c: file_identity) */
    uint8_t stream;   /* socket or FIFO: a short read means it was drained */
    uint8_t socket;   /* a socket: recv/send take MSG_DONTWAIT */
    uint8_t blocking; /* O_NONBLOCK was clear: never read before it is ready */
    uint8_t pollable; /* not a regular file or directory */
    uint8_t drained;  /* the last read was short */
    uint8_t read_with_op; /* completion ops: the last read had to wait, so read with an op at once */
    uint8_t file_told; /* the core was told dev/ino (no core yet when io took the number: not) */
    uint8_t kind;     /* farce_fd_kind */
    const farce_fd_steps *steps; /* farce_fd_steps_by_kind[kind][the table's completion] */
    unsigned long reopens; /* farce_fd_reopens when dev/ino were last read */
} farce_fd_ent;

/* How many IO#reopen calls the process made (lib/farce/reopen_notice.rb):
 * a reopen keeps the IO object and its number but changes the open file,
 * so every entry checks its file again (one fstat) after one. */
extern unsigned long farce_fd_reopens;

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
    int completion; /* the loop performs completion operations: the entries' steps are those */
} farce_fd_table;

/* Descriptor numbers the table accepts: the Go core's bound. A larger one
 * raises before any table grows (2^24 entries would be ~512 MB, and the
 * doubling overflows at 2^30). */
#define FARCE_FD_MAX (1 << 24)

/* The entry for fd as used by io. When the number changed hands (the old IO
 * was closed, or collected), the core forgets it: the old owner's waiters
 * wake with IOError and stale events are dropped. When another IO presents
 * the number, the core is told which open file it names now (one fstat,
 * made here anyway): a registration belongs to the file it was made for,
 * so a file that changed behind the old IO's back is armed afresh and the
 * old file's waiters wake with IOError. Raises on core errors and
 * on numbers outside [0, FARCE_FD_MAX). A handle of
 * 0 means the front end has not started its core yet (the selector starts
 * it on first need): the core is then left alone, here and below. */
farce_fd_ent *farce_fd_table_entry_slow(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd);
/* Every transfer asks once per step (six times per ping-pong round trip):
 * the common case, the same IO again with no GC since (fd_table.c), is
 * answered inline; anything else (a new number, a new IO, a GC since, an
 * IO#reopen since, a number out of range, whose entry never holds an IO)
 * takes the call. */
static inline farce_fd_ent *farce_fd_table_entry(farce_fd_table *t, int64_t handle, VALUE backend, VALUE io, int fd)
{
    if (RB_LIKELY(fd >= 0 && fd < t->nfds)) {
        farce_fd_ent *f = &t->fds[fd];
        if (f->io == io && f->gc_seen == rb_gc_count() && f->reopens == farce_fd_reopens) return f;
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

/* The loop started a core, which performs completion operations or not:
 * every entry takes the steps for that. */
void farce_fd_table_use_completion(farce_fd_table *t, int completion);

/* ---- what differs by platform: fd_table_unix.c (fstat and fcntl: the
 * inode the core compares, the kind of file, O_NONBLOCK) and
 * fd_table_windows.c (a SOCKET or not, the only kind with a kernel wait
 * there; no identity to tell: a SOCKET value is not reused while its
 * socket is open) ---- */

/* io takes fd's entry f (before f->io is set): f's file facts (kind,
 * stream, socket, pollable, blocking; drained and read_with_op cleared) and
 * its identity, told to the core when handle is set. shared: the entry's
 * old IO is alive and uses the same open descriptor. Raises on core errors. */
void farce_fd_file_take(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd, int shared);

/* The same IO, after an IO#reopen somewhere in the process: when its file
 * is another now, the core drops the old file's registration and waiters
 * (they wake with IOError) and the facts are read again. */
void farce_fd_file_recheck(farce_fd_table *t, int64_t handle, VALUE backend, farce_fd_ent *f, int fd);

/* Which open file fd names now, as the table tells files apart (the inode
 * and the access mode): 1, or 0 when fd cannot be asked (then *dev and
 * *ino are 0), and always 0 where numbers are not reused under an open
 * IO (Windows). */
int farce_fd_file_now(int fd, uint64_t *dev, uint64_t *ino);

/* Raises IOError for a wait or transfer on fd that ended because its open
 * file went: the IO was closed, or the number names another file now
 * (closed or dup2'd over behind Ruby's back). Starts as Ruby's own does. */
NORETURN(void farce_raise_closed(int fd));

/* Defines Farce.__descriptors_reopened (lib/farce/reopen_notice.rb). */
void farce_fd_table_init(VALUE mFarce);

void farce_fd_table_mark(const farce_fd_table *t);
void farce_fd_table_clear(farce_fd_table *t);
void farce_fd_table_free(farce_fd_table *t);
size_t farce_fd_table_memsize(const farce_fd_table *t);

#endif
