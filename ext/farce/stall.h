/*
 * Stall detection (stall.c): the Go core's watchdog notices a turn (one
 * fiber running without returning to the loop) longer than the threshold,
 * signals the loop's thread, and the signal's postponed job samples the
 * running fiber's backtrace at Ruby's next safe point. The loop reports the
 * stall, with its final duration, when the turn ends.
 */
#ifndef FARCE_STALL_H
#define FARCE_STALL_H 1

#include "loop_core.h"

/* Turns stall detection on (threshold_ns > 0) or off for the loop; raises
 * Farce::Error when the core cannot watch. Before the core starts it is
 * noted, and farce_loop_start turns it on. */
void farce_loop_watch_stalls(farce_loop *l, int64_t threshold_ns);
/* The loop's thread is now the calling one (the signal goes to it). */
void farce_stall_thread_changed(farce_loop *l);
/* A turn ended: reports a stall the watchdog saw in it (calls the owner's
 * __report_stall(fiber, seconds, backtrace)). */
void farce_stall_report(farce_loop *l);
/* The loop is released or freed: no more samples for it. */
void farce_stall_forget(farce_loop *l);
void farce_stall_mark(farce_loop *l);

#endif
