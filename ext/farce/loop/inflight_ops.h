/*
 * What keeps memory the kernel owns alive (completion operations' fibers
 * and buffers) until the core says their completions were reaped, through
 * close, abandon, a loop that stopped, and GC; and the handles of loops
 * collected without close (inflight_ops.c).
 *
 * A loop's part is a farce_inflight_ops embedded in it (farce_loop.inflight_ops); the
 * functions here take that or plain values, return codes and never raise.
 * The loop's side (drain on release, stop, orphan at free) is in
 * event_loop.c.
 */
#ifndef FARCE_INFLIGHT_OPS_H
#define FARCE_INFLIGHT_OPS_H 1

#include <stdint.h>
#include "core_access/core_door.h"
#include "loop/wait_entry.h"

/* A loop on the keeper's list: while it has operations in flight, the
 * keeper (a GC root) marks the fibers and buffers of its FARCE_WAIT_OP
 * entries. The pointers name the loop's own fields (its table moves when
 * it grows). */
typedef struct farce_inflight_ops {
    farce_wait *const *waits;
    const uint32_t *nwaits;
    const long *in_flight;
    int registered;
    struct farce_inflight_ops *next, *prev;
} farce_inflight_ops;

/* Once per process, from Init: the lock over every Ractor's loops, and the
 * keeper (a GC root). */
void farce_inflight_ops_init_once(void);
/* Registered at start by a loop that can perform operations, unregistered
 * when it is freed. */
void farce_inflight_ops_register(farce_inflight_ops *p, farce_wait *const *waits, const uint32_t *nwaits, const long *in_flight);
void farce_inflight_ops_unregister(farce_inflight_ops *p);

/* Cancels every operation of handle and waits, GVL released, until the
 * kernel completed them all. Returns 0 when none is left (their memory may
 * be released), else a positive count or a negative code (-FARCE_E_THREAD:
 * another thread runs the ring): keep the pins. check_ints: run Ruby's
 * interrupts between calls (they may raise; nothing is released then). */
int64_t farce_inflight_ops_drain(const farce_core_copy *core, int64_t handle, int *wake_fd, int check_ints);

/* From a GC free function: a handle (and its wait table, when operations
 * are in flight, else NULL) wait for farce_release_orphans; the keeper
 * marks the table meanwhile. Calls no Go. 0, or -ENOMEM (nothing kept). */
int farce_inflight_ops_orphan(const farce_core_copy *core, int64_t handle, uint64_t generation, int wake_fd,
                         farce_wait *waits, uint32_t nwaits);
/* At a loop start: closes the orphans of this fork generation (draining
 * them first), drops other generations' ones. */
void farce_release_orphans(void);

#endif
