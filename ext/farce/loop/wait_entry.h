/*
 * One entry of the wait table (farce_loop.waits, indexed by a token's
 * slot): what is parked on a token of the Go core. Its own header so that
 * the completion-op keeper (inflight_ops.h) can mark entries without the loop.
 */
#ifndef FARCE_WAIT_ENTRY_H
#define FARCE_WAIT_ENTRY_H 1

#include <stdint.h>
#include <ruby.h>

/* What a wait table entry parks. */
enum farce_wait_kind {
    FARCE_WAIT_NONE,  /* free */
    FARCE_WAIT_FIBER, /* sleep, block, yield: resumed with the wait's result */
    FARCE_WAIT_FD,    /* a descriptor wait; extra holds the events when they were ready at once */
    FARCE_WAIT_ALARM, /* no fiber parked: raise extra ([class, *arguments]) in fiber when due */
    FARCE_WAIT_OP,    /* a completion operation (io_uring) whose memory, extra, the kernel owns until reaped */
};

/* One entry of the wait table, indexed by the token's slot. */
typedef struct {
    uint32_t gen; /* generation of the token parked here; 0 when free */
    uint8_t kind; /* enum farce_wait_kind */
    uint8_t stopped; /* FARCE_WAIT_OP cancelled because its loop stopped (inflight_ops.c): wait for readiness instead */
    VALUE fiber;
    VALUE extra;
} farce_wait;

#endif
