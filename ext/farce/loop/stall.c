/*
 * Stall detection: which fiber holds the loop, caught while it does.
 *
 * The loop publishes its turns in a farce_turn_state (event_loop.h:
 * farce_loop_turn_begins/_ends write it with plain atomic stores, no call).
 * With a threshold set, a watchdog goroutine in the Go core reads it without
 * the GVL and, once per turn longer than the threshold, sends FARCE_STALL_SIGNAL
 * to the loop's thread (tgkill). The handler here only registers a
 * postponed job (async-signal-safe, and it runs on a Ruby thread, which Ruby
 * 3.1's rb_postponed_job_register_one needs). Ruby runs the job at its next
 * safe point in whatever runs on that thread: the stalled fiber, even right
 * after a long C call that held the GVL returns. The job records the fiber
 * and rb_make_backtrace() for the turn the watchdog named; the loop reports
 * it when the turn ends, with the turn's final duration, by calling the
 * front end's __report_stall (lib/farce/stall.rb), never from inside the
 * stalled fiber.
 *
 * The signal is a real-time one that neither Ruby nor Go uses (Go installs
 * handlers only for synchronous signals, SIGPIPE and SIGURG in a shared
 * library); the handler runs on the alternate stack Ruby or Go set up, and
 * system calls it interrupts restart (SA_RESTART; farce's own kernel wait
 * returns EINTR to C as it does for any signal, rule 4). The signal, its
 * handler and the thread's id are the platform's: stall_unix.c,
 * stall_windows.c (Windows has no signal to interrupt one thread with).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ruby.h>
#include <ruby/debug.h>
#include <ruby/thread_native.h>
#include "loop/stall.h"

/* Loops with stall detection on (a few at most): the job looks for the
 * stalled one among those of its thread. Every Ractor's loops are on it and
 * those Ractors run at once, so a native lock guards it; nothing under the
 * lock allocates from Ruby's heap (a GC, which stops every Ractor, would
 * wait for a thread that waits for the lock). Watching starts and stops
 * on rare paths only (a threshold set, a loop released or freed); the job
 * runs only after a stall. */
static rb_nativethread_lock_t watched_lock;
static farce_stall **watched;
static long nwatched, watched_cap;

void farce_stall_init_once(void) { rb_nativethread_lock_initialize(&watched_lock); }

/* The first loop of this thread whose current turn stalled and is not
 * sampled yet, marked as sampled (so the next call finds the next one). */
static farce_stall *next_unsampled(VALUE thread)
{
    farce_stall *found = NULL;
    rb_nativethread_lock_lock(&watched_lock);
    for (long i = 0; i < nwatched && !found; i++) {
        farce_stall *st = watched[i];
        farce_turn_state *ts = st->turns;
        if (*st->thread != thread || !ts) continue;
        int64_t seq = __atomic_load_n(&ts->seq, __ATOMIC_ACQUIRE);
        if (!__atomic_load_n(&ts->active, __ATOMIC_ACQUIRE) || __atomic_load_n(&ts->stall_seq, __ATOMIC_ACQUIRE) != seq) continue;
        if (st->sampled_seq == seq) continue;
        st->sampled_seq = seq;
        found = st;
    }
    rb_nativethread_lock_unlock(&watched_lock);
    return found;
}

static void stall_job(void *unused)
{
    (void)unused;
    VALUE thread = rb_thread_current();
    /* sampled outside the lock (the backtrace allocates); st is a loop of
     * this thread, which only this thread releases */
    farce_stall *st;
    while ((st = next_unsampled(thread))) {
        st->fiber = rb_fiber_current();
        st->backtrace = rb_make_backtrace();
    }
}

void farce_stall_init(farce_stall *st, const VALUE *thread)
{
    st->thread = thread;
    st->fiber = st->backtrace = Qnil;
}

int farce_stall_prepare(farce_stall *st, int64_t threshold_ns)
{
    if (threshold_ns > 0) {
        rb_nativethread_lock_lock(&watched_lock); /* two Ractors' first thresholds install it once */
        int installed = farce_stall_install_handler(stall_job);
        rb_nativethread_lock_unlock(&watched_lock);
        if (installed != 0) return -1;
    }
    if (!st->turns && threshold_ns > 0) {
        st->turns = calloc(1, sizeof(farce_turn_state));
        if (!st->turns) return -ENOMEM;
    }
    return 0;
}

/* 0, or -ENOMEM (realloc, not Ruby's heap: no GC under the lock). */
static int watch_add(farce_stall *st)
{
    int r = 0;
    rb_nativethread_lock_lock(&watched_lock);
    long i = 0;
    while (i < nwatched && watched[i] != st) i++;
    if (i == nwatched) {
        if (nwatched == watched_cap) {
            long cap = watched_cap ? watched_cap * 2 : 4;
            farce_stall **n = realloc(watched, cap * sizeof(*n));
            if (n) {
                watched = n;
                watched_cap = cap;
            }
        }
        if (nwatched < watched_cap) watched[nwatched++] = st;
        else r = -ENOMEM;
    }
    rb_nativethread_lock_unlock(&watched_lock);
    return r;
}

int farce_stall_watching(farce_stall *st, int64_t threshold_ns)
{
    if (threshold_ns > 0) return watch_add(st);
    farce_stall_forget(st);
    return 0;
}

void farce_stall_forget(farce_stall *st)
{
    rb_nativethread_lock_lock(&watched_lock);
    for (long i = 0; i < nwatched; i++) {
        if (watched[i] == st) {
            watched[i] = watched[--nwatched];
            break;
        }
    }
    rb_nativethread_lock_unlock(&watched_lock);
    st->fiber = st->backtrace = Qnil;
}

void farce_stall_thread_changed(farce_stall *st)
{
    if (st->turns) __atomic_store_n(&st->turns->tid, farce_stall_thread_id(), __ATOMIC_RELEASE);
}

int farce_stall_take_report(farce_stall *st, int64_t now_ns, VALUE *fiber, double *seconds, VALUE *backtrace)
{
    farce_turn_state *ts = st->turns;
    int64_t seq = ts->seq;
    if (__atomic_load_n(&ts->stall_seq, __ATOMIC_ACQUIRE) != seq || st->reported_seq == seq) return 0;
    st->reported_seq = seq;
    *seconds = (double)(now_ns - ts->started_ns) / 1e9;
    *fiber = *backtrace = Qnil;
    if (st->sampled_seq == seq) {
        *fiber = st->fiber;
        *backtrace = st->backtrace;
    }
    st->fiber = st->backtrace = Qnil;
    st->reports++;
    return 1;
}

void farce_stall_mark(farce_stall *st)
{
    rb_gc_mark(st->fiber);
    rb_gc_mark(st->backtrace);
}
