/*
 * What every call into the Go core from the Ruby extension needs: the stack
 * check before it (docs/cgo-hazards.md rule 5), the layout of the tokens it hands
 * out, its error codes as Ruby exceptions, and the one thing an unblock
 * function may do to interrupt its kernel wait (rule 4).
 */
#ifndef FARCE_CORE_CALLS_H
#define FARCE_CORE_CALLS_H 1

#include <stdint.h>
#include <unistd.h>
#include <ruby.h>
#include "core_loader.h"

/* docs/cgo-hazards.md rule 5: Go runs its callbacks on the caller's (fiber) stack;
 * raise in Ruby rather than let Go fault near the end of it. */
static inline void farce_stack_guard(void)
{
    if (ruby_stack_check()) rb_raise(rb_eSysStackError, "stack level too deep (before entering farce's core)");
}

/* A token names a wait: slot in the low 32 bits, generation in the high. */
static inline uint32_t farce_token_slot(uint64_t token) { return (uint32_t)token; }
static inline uint32_t farce_token_gen(uint64_t token) { return (uint32_t)(token >> 32); }

/* docs/cgo-hazards.md rule 4: an unblock function only writes the core's wake
 * descriptor (async-signal-safe); p points at that descriptor. */
static inline void farce_write_wake(void *p)
{
    uint64_t one = 1;
    ssize_t unused = write(*(int *)p, &one, sizeof(one));
    (void)unused;
}

/* Raises the Ruby exception for a failed core call: ArgumentError for bad
 * input, SystemCallError for an errno, Farce::Error otherwise. */
NORETURN(void farce_raise_core_error(const struct farce_core_api *core, int64_t handle, int64_t code, const char *what, VALUE backend));

#endif
