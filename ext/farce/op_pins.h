/*
 * What keeps memory the kernel owns alive (completion operations' fibers
 * and buffers) until the core says their completions were reaped, through
 * close, abandon, a loop that stopped, and GC; and the handles of loops
 * collected without close (op_pins.c).
 */
#ifndef FARCE_OP_PINS_H
#define FARCE_OP_PINS_H 1

#include "loop_core.h"

/* Cancels every completion operation of the loop and waits (GVL released)
 * until the kernel completed them. Returns 1 when none is left, 0 when
 * some are (another thread runs the ring; their pins must stay). Owner
 * thread only. check_ints: Ruby's interrupts run between waits (may raise). */
int farce_loop_drain_ops(farce_loop *l, int check_ints);
/* The loop stopped (run raised) with operations in flight: drain them now,
 * and let their fibers wait for readiness instead when they run again. */
void farce_loop_stop_ops(farce_loop *l);

/* A loop that can perform operations is marked by the keeper while it has
 * some in flight: registered at start, unregistered when freed. */
void farce_op_loop_register(farce_loop *l);
void farce_op_loop_unregister(farce_loop *l);

/* From a GC free function: the loop's handle (and its wait table, when
 * operations are in flight) wait for farce_release_orphans. Calls no Go. */
void farce_loop_orphan(farce_loop *l);
/* At a loop start: closes the orphans of this fork generation (draining
 * them first), drops other generations' ones. */
void farce_release_orphans(void);

#endif
