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
#include "loop/stall.h"

/* Loops with stall detection on (a few at most): the job looks for the
 * stalled one among those of its thread. Touched only with the GVL. */
static farce_stall **watched;
static long nwatched, watched_cap;

static void stall_job(void *unused)
{
    (void)unused;
    VALUE thread = rb_thread_current();
    for (long i = 0; i < nwatched; i++) {
        farce_stall *st = watched[i];
        farce_turn_state *ts = st->turns;
        if (*st->thread != thread || !ts) continue;
        int64_t seq = __atomic_load_n(&ts->seq, __ATOMIC_ACQUIRE);
        if (!__atomic_load_n(&ts->active, __ATOMIC_ACQUIRE) || __atomic_load_n(&ts->stall_seq, __ATOMIC_ACQUIRE) != seq) continue;
        if (st->sampled_seq == seq) continue;
        st->sampled_seq = seq;
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
    if (threshold_ns > 0 && farce_stall_install_handler(stall_job) != 0) return -1;
    if (!st->turns && threshold_ns > 0) {
        st->turns = calloc(1, sizeof(farce_turn_state));
        if (!st->turns) return -ENOMEM;
    }
    return 0;
}

static void watch_add(farce_stall *st)
{
    for (long i = 0; i < nwatched; i++) if (watched[i] == st) return;
    if (nwatched == watched_cap) {
        long cap = watched_cap ? watched_cap * 2 : 4;
        REALLOC_N(watched, farce_stall *, cap);
        watched_cap = cap;
    }
    watched[nwatched++] = st;
}

void farce_stall_watching(farce_stall *st, int64_t threshold_ns)
{
    if (threshold_ns > 0) watch_add(st);
    else farce_stall_forget(st);
}

void farce_stall_forget(farce_stall *st)
{
    for (long i = 0; i < nwatched; i++) {
        if (watched[i] == st) {
            watched[i] = watched[--nwatched];
            break;
        }
    }
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
