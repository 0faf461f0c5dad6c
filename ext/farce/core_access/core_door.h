/*
 * The one door into the Go core (libfarce_core.so): core_door.c is the only
 * file that sees the core's function table. Everything else holds an opaque
 * farce_core_copy (the table of one loaded copy of the library; a forked
 * child loads its own, see core_loader.c) and calls the typed wrappers
 * below, passing the copy its handle belongs to (farce_loop.core).
 *
 * The stack: Go runs on the caller's (fiber) stack (docs/cgo-hazards.md rule
 * 5; on Windows on a stack of its own, core_call_windows.c), so a wrapper
 * marked "checks the stack" raises SystemStackError before it enters Go when
 * the stack is nearly used up. The others do not check:
 * they run in cleanup paths (ensure, release, free) where an exception would
 * leave the state half undone, without the GVL, or right after a checked
 * call; each says which. Codes: a wrapper returns the core's result (>= 0)
 * or a negative errno / -FARCE_E_* code; farce_core_raise turns one into the
 * Ruby exception.
 */
#ifndef FARCE_CORE_DOOR_H
#define FARCE_CORE_DOOR_H 1

#include <stdint.h>
#include <unistd.h>
#include <ruby.h>
#include "core/farce_core.h"

/* One loaded copy of the Go core (opaque outside core_door.c). */
typedef struct farce_core_copy farce_core_copy;

extern VALUE farce_eError;

/* docs/cgo-hazards.md rule 5: Go runs its callbacks on the caller's (fiber)
 * stack; raise in Ruby rather than let Go fault near the end of it. The
 * wrappers that check call this; a caller calls it itself only where the
 * check must come before other work it cannot undo (a buffer hold, a release). */
static inline void farce_stack_guard(void)
{
    if (ruby_stack_check()) rb_raise(rb_eSysStackError, "stack level too deep (before entering farce's core)");
}

/* A token names a wait: slot in the low 32 bits, generation in the high. */
static inline uint32_t farce_token_slot(uint64_t token) { return (uint32_t)token; }
static inline uint32_t farce_token_gen(uint64_t token) { return (uint32_t)(token >> 32); }

/* ---- what differs by platform: core_door_unix.c, core_door_windows.c ---- */

/* The unblock function of the core's kernel wait, p pointing at the loop's
 * wake_fd. On Linux it writes that wake descriptor and nothing else
 * (docs/cgo-hazards.md rule 4: async-signal-safe). Windows has no wake
 * descriptor: the core hands out a wake number, and this (never run in a
 * signal handler there) calls the core's farce_wake_number with it. */
void farce_write_wake(void *p);
/* What farce_core_resolve stores for the library's function `symbol`: on
 * Linux the function itself (dlsym); on Windows one of the same signature
 * that runs it on the thread's core call stack (core_call_windows.c). NULL
 * when the library has none. */
void *farce_core_symbol(void *dl, const char *symbol);
/* The functions of the library the platform needs beyond the table: the
 * name of a missing one, or NULL. */
const char *farce_core_resolve_platform(void *dl);

/* ---- for the loader (core_loader.c, core_open.c) --------------------------- */

/* Resolves every function of the library dlopen'ed as dl into a new copy
 * (never freed: a Go library is never unloaded). NULL when a symbol is
 * missing (*missing names it) or memory ran out (*missing NULL). */
farce_core_copy *farce_core_resolve(void *dl, const char **missing);
/* The copy that answers "unknown handle" to every call: before the first
 * load, and for an object inherited through fork (never the parent's
 * runtime, whose threads did not survive the fork: it hangs). */
const farce_core_copy *farce_core_none(void);
/* farce_core_abi: the first call, which waits until the runtime started. */
int64_t farce_core_abi_of(const farce_core_copy *c);
/* farce_set_handle_base: before the first farce_new. */
int64_t farce_core_set_handle_base(const farce_core_copy *c, int64_t base);

/* ---- scheduler handles ------------------------------------------------------ */

/* farce_new. Checks the stack. */
int64_t farce_core_new(const farce_core_copy *c, const char *backend, char *name, int name_len, char *reason,
                       int reason_len, int *wake_fd);
/* farce_close. No check: releases run it and must not raise. */
int64_t farce_core_close(const farce_core_copy *c, int64_t h);
/* farce_backends; no handle. No check (called once, from a Ruby method). */
int64_t farce_core_backends(const farce_core_copy *c, char *buf, int len);
/* farce_probe: readiness of fd now, without a handle. Checks the stack. */
int64_t farce_core_probe(const farce_core_copy *c, int fd, uint32_t events);
/* farce_stats. Checks the stack. */
int64_t farce_core_stats(const farce_core_copy *c, int64_t h, int64_t *out, int n);
/* farce_stall_watch. Checks the stack. */
int64_t farce_core_stall_watch(const farce_core_copy *c, int64_t h, farce_turn_state *state, int64_t threshold_ns,
                               int signo);

/* Raises the Ruby exception for code, a failed call on handle h:
 * ArgumentError for bad input, SystemCallError for an errno, Farce::Error
 * otherwise (with the handle's last error text). */
NORETURN(void farce_core_raise(const farce_core_copy *c, int64_t h, int64_t code, const char *what, VALUE backend));

/* ---- waits -------------------------------------------------------------------- */

/* farce_wait_fd. Checks the stack. */
int64_t farce_core_wait_fd(const farce_core_copy *c, int64_t h, int fd, uint32_t events, int64_t timeout_ns,
                           int known, uint64_t *token);
/* farce_park. Checks the stack. */
int64_t farce_core_park(const farce_core_copy *c, int64_t h, int64_t timeout_ns, uint64_t *token);
/* farce_yield, or farce_yield_last when last (behind the next poll's timers
 * and events). Checks the stack. */
int64_t farce_core_yield(const farce_core_copy *c, int64_t h, int last, uint64_t *token);
/* farce_cancel. Checks the stack. */
int64_t farce_core_cancel(const farce_core_copy *c, int64_t h, uint64_t token);
/* farce_cancel from a cleanup path (an unwinding fiber, a refused park, or
 * right after a checked call). No check. */
int64_t farce_core_cancel_quietly(const farce_core_copy *c, int64_t h, uint64_t token);
/* farce_forget_fd. Checks the stack. */
int64_t farce_core_forget_fd(const farce_core_copy *c, int64_t h, int fd);
/* farce_forget_fd from an ensure clause. No check. */
int64_t farce_core_forget_fd_quietly(const farce_core_copy *c, int64_t h, int fd);
/* farce_set_fd_file: which open file fd names now (1: another than before,
 * whose waiters the core woke with FARCE_RESULT_CLOSED). Checks the stack. */
int64_t farce_core_set_fd_file(const farce_core_copy *c, int64_t h, int fd, uint64_t dev, uint64_t ino);
/* farce_bind_waits: starts the waits parked on reserved tokens. Checks the stack. */
int64_t farce_core_bind_waits(const farce_core_copy *c, int64_t h, farce_fd_wait *waits, int n);

/* ---- polls -------------------------------------------------------------------- */

/* farce_poll_batch with a zero timeout. Checks the stack (a selector's
 * loop may run on a fiber stack). */
int64_t farce_core_poll_batch(const farce_core_copy *c, int64_t h, farce_completion *out, int capacity,
                              farce_poll_args *args);
/* farce_poll with a zero timeout. No check: only right after farce_core_poll_batch. */
int64_t farce_core_poll_now(const farce_core_copy *c, int64_t h, farce_completion *out, int capacity);
/* farce_poll waiting up to block_ns (< 0: forever) with the GVL released;
 * an interrupt writes *wake_fd (farce_write_wake). No check: only right
 * after farce_core_poll_batch. */
int64_t farce_core_poll_blocking(const farce_core_copy *c, int64_t h, int64_t block_ns, farce_completion *out,
                                 int capacity, int *wake_fd);

/* ---- completion operations (io_uring) ----------------------------------------- */

/* farce_tick: keeps Go's sysmon from taking the thread's P while the loop
 * runs Ruby for long between polls (core/sched_tick.go). Never raises: with
 * too little stack left it does nothing. */
int64_t farce_core_tick(const farce_core_copy *c, int64_t h);
/* farce_ops_supported: 1 when the handle's driver performs them. No check
 * (called right after farce_core_new). */
int farce_core_ops_supported(const farce_core_copy *c, int64_t h);
/* farce_submit_op. No check: the caller checks before it takes the buffer's
 * hold (io_transfer.c), which an exception here would leak. */
int64_t farce_core_submit_op(const farce_core_copy *c, int64_t h, int kind, int fd, uint64_t ptr, uint64_t len,
                             int64_t offset, uint64_t *token);
/* farce_cancel_op; a stale token is ignored. Checks the stack. */
int64_t farce_core_cancel_op(const farce_core_copy *c, int64_t h, uint64_t token);
/* farce_cancel_op from a cleanup path (an unwinding fiber). No check. */
int64_t farce_core_cancel_op_quietly(const farce_core_copy *c, int64_t h, uint64_t token);
/* One farce_drain_ops call of up to slice_ns with the GVL released (an
 * interrupt writes *wake_fd when wake_fd is not NULL): 0 when no operation
 * is left in flight. No check: releases run it and must not raise. */
int64_t farce_core_drain_ops_blocking(const farce_core_copy *c, int64_t h, int64_t slice_ns, int *wake_fd);

#endif
