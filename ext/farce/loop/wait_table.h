/*
 * The wait table's operations: how a fiber parks on a token of the Go core
 * and is switched to again (wait_table.c). The table itself is part of the
 * loop (farce_loop.waits, event_loop.h).
 */
#ifndef FARCE_WAIT_TABLE_H
#define FARCE_WAIT_TABLE_H 1

#include "loop/event_loop.h"

/* What park and farce_loop_wait_fd return when the fiber was switched to by
 * someone other than the loop: the wait was cancelled. */
#define FARCE_RESUMED_ELSEWHERE INT64_MIN

/* Parks the current fiber on token until the loop resumes it; returns the
 * wait's result, or FARCE_RESUMED_ELSEWHERE. An exception raised into the
 * fiber cancels the wait and propagates. extra: the blocker for a `block`
 * wait (registered for unblock), else Qundef. */
int64_t farce_loop_park(farce_loop *l, uint64_t token, enum farce_wait_kind kind, VALUE extra);
/* Parks on a completion operation whose memory belongs to pin; returns its
 * result (bytes or -errno), also stored in *reaped before a held exception
 * is re-raised (a read that completed anyway: the caller keeps its bytes).
 * Never returns before the kernel is done with the memory (see
 * event_loop.c). */
int64_t farce_loop_park_op(farce_loop *l, uint64_t token, VALUE pin, int64_t *reaped);
/* Cancels a wait whose fiber runs again without the loop resuming it. */
void farce_loop_abandon(farce_loop *l, uint64_t token);
/* Waits for events on fd (timeout_ns < 0: no bound); returns ready events,
 * 0 on timeout, or FARCE_RESUMED_ELSEWHERE. Raises IOError when the
 * descriptor is closed meanwhile. Starts the core if needed. */
int64_t farce_loop_wait_fd(farce_loop *l, int fd, uint32_t events, int64_t timeout_ns, int known);
/* One step of a polled wait on fd, which has no kernel wait (on Windows,
 * only a socket has one): parks the current fiber for ns on a timer of the core, or
 * sleeps the thread for ns (the GVL released) when the fiber cannot park.
 * Returns 0 when the time passed (or the thread slept), FARCE_RESUMED_ELSEWHERE;
 * raises IOError when io_close of fd came meanwhile (it wakes the fiber at
 * once), and whatever exception reached the fiber. Starts the core if
 * needed. */
int64_t farce_loop_park_polled(farce_loop *l, int fd, int64_t ns);
/* A token for an untimed park that the next poll starts (a reserved one,
 * no call into Go), or 0 when none is left: the caller asks the core.
 * Park on it at once with farce_loop_park_parkable (the caller checked
 * farce_loop_can_park). */
uint64_t farce_loop_defer_park(farce_loop *l);
/* farce_loop_park for a fiber known to be able to park. */
int64_t farce_loop_park_parkable(farce_loop *l, uint64_t token, enum farce_wait_kind kind, VALUE extra);
farce_wait *farce_loop_wait_grow(farce_loop *l, uint32_t slot);
/* The wait table entry of slot, growing the table when needed. */
static inline farce_wait *farce_loop_wait_at(farce_loop *l, uint32_t slot)
{
    return RB_LIKELY(slot < l->nwaits) ? &l->waits[slot] : farce_loop_wait_grow(l, slot);
}

#endif
