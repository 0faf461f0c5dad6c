/*
 * Stall detection (stall.c): the Go core's watchdog notices a turn (one
 * fiber running without returning to the loop) longer than the threshold,
 * signals the loop's thread, and the signal's postponed job samples the
 * running fiber's backtrace at Ruby's next safe point. The loop reports the
 * stall, with its final duration, when the turn ends.
 *
 * Its state is a farce_stall embedded in the loop (farce_loop.stall); the
 * functions here take that, return codes and never raise: the loop calls
 * the core and raises (event_loop.c: farce_loop_watch_stalls).
 */
#ifndef FARCE_STALL_H
#define FARCE_STALL_H 1

#include <stdint.h>
#include <ruby.h>
#include "core/farce_core.h"

typedef struct farce_stall {
    /* the turns as the core's watchdog sees them (NULL until detection is
     * first turned on; then the core's memory, freed when the handle closes) */
    farce_turn_state *turns;
    int64_t threshold_ns;        /* 0: off */
    int64_t sampled_seq, reported_seq;
    long reports;
    VALUE fiber, backtrace;      /* the sample of the current stall */
    const VALUE *thread;         /* the loop's thread (farce_loop.thread): the job samples only there */
} farce_stall;

/* Once per process, from Init: the lock over the loops watched (every
 * Ractor's). */
void farce_stall_init_once(void);
/* thread: where the loop keeps its thread, read by the signal's job. */
void farce_stall_init(farce_stall *st, const VALUE *thread);
/* ---- the platform's (stall_unix.c, stall_windows.c) ---- */
/* The real-time signal the watchdog sends (farce_stall_watch's signo). */
int farce_stall_signal(void);
/* Installs, once, the signal's handler, which has Ruby run job at its next
 * safe point on the signalled thread: 0, or -1 when it cannot. */
int farce_stall_install_handler(void (*job)(void *));
/* The calling thread's id, as the watchdog signals it. */
int64_t farce_stall_thread_id(void);
/* Before the core watches with threshold_ns: installs the signal handler
 * (threshold_ns > 0) and allocates the turn state (if none yet and
 * threshold_ns > 0). 0, or -1 (the handler cannot be installed) or -ENOMEM. */
int farce_stall_prepare(farce_stall *st, int64_t threshold_ns);
/* The core watches now (threshold_ns > 0) or no longer: the job looks at st.
 * 0, or -ENOMEM (st is not watched). */
int farce_stall_watching(farce_stall *st, int64_t threshold_ns);
/* The loop's thread is now the calling one (the signal goes to it). */
void farce_stall_thread_changed(farce_stall *st);
/* A turn ended in which the watchdog saw a stall: 1 with what to report
 * (the sampled fiber and backtrace, or nil, and the turn's duration so
 * far), 0 when it was reported already. */
int farce_stall_take_report(farce_stall *st, int64_t now_ns, VALUE *fiber, double *seconds, VALUE *backtrace);
/* The loop is released or freed: no more samples for it. */
void farce_stall_forget(farce_stall *st);
void farce_stall_mark(farce_stall *st);

#endif
