//go:build ignore

/*
 * Small helpers that both Ruby-facing front ends of the Go core need: the
 * Fiber::Scheduler (shim.c) and the io-event selector (selector.c).
 */
#ifndef FARCE_GLUE_H
#define FARCE_GLUE_H 1

#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include "core_loader.h"

/* DESIGN.md rule 5: Go runs its callbacks on the caller's (fiber) stack;
 * raise in Ruby rather than let Go fault near the end of it. */
static inline void farce_stack_guard(void)
{
    if (ruby_stack_check()) rb_raise(rb_eSysStackError, "stack level too deep (before entering farce's core)");
}

static inline int64_t farce_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A token names a wait: slot in the low 32 bits, generation in the high. */
static inline uint32_t farce_token_slot(uint64_t token) { return (uint32_t)token; }
static inline uint32_t farce_token_gen(uint64_t token) { return (uint32_t)(token >> 32); }

/* The descriptor of an IO, or -1 once it is closed, without raising (the
 * close scan runs in the loop, where raising would abandon other fibers). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline int farce_io_fd_or_closed(VALUE io)
{
    rb_io_t *fptr = RFILE(io)->fptr;
    return fptr ? fptr->fd : -1;
}

/* The IO's descriptor; raises IOError when it is closed. */
static inline int farce_io_descriptor(VALUE io)
{
    rb_io_t *fptr;
    GetOpenFile(io, fptr);
    rb_io_check_closed(fptr);
    return fptr->fd;
}
#pragma GCC diagnostic pop

/* DESIGN.md rule 4: an unblock function only writes the core's wake
 * descriptor (async-signal-safe); p points at that descriptor. */
static inline void farce_write_wake(void *p)
{
    uint64_t one = 1;
    ssize_t unused = write(*(int *)p, &one, sizeof(one));
    (void)unused;
}

/* Raises the Ruby exception for a failed core call: ArgumentError for bad
 * input, SystemCallError for an errno, Farce::Error otherwise. */
NORETURN(void farce_raise_core_error(int64_t handle, int64_t code, const char *what, VALUE backend));

/* Polls the core for up to block_ns (negative: no bound) with the GVL
 * released (rule 4); a signal, Thread#raise or unblock from another thread
 * interrupts it by writing *wake_fd. Returns the completions stored in out,
 * or a negative code (-EINTR included). Ruby's interrupts are not run here. */
int64_t farce_poll_without_gvl(int64_t handle, int *wake_fd, int64_t block_ns, farce_completion *out, int capacity);

/* Grows a table indexed by wait slot (items of `size` bytes, *count of
 * them) so that `index` fits, doubling from 256; new entries are zeroed.
 * Returns the table, which may have moved. */
void *farce_slot_table_grow(void *items, uint32_t *count, uint32_t index, size_t size);

/* Handles of front ends collected without close, released at the next
 * creation (see glue.c). */
void farce_core_release_later(int64_t handle);
void farce_core_release_orphans(void);

#endif
