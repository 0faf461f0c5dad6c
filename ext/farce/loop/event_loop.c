/*
 * The loop's lifetime, its poll and dispatch, and the hooks both front
 * ends answer the same way (io_close, stats); see event_loop.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "loop/event_loop.h"
#include "loop/ruby_io.h"

/* ---- errors ------------------------------------------------------------------ */

void farce_loop_raise(const farce_loop *l, int64_t code, const char *what)
{
    farce_core_raise(l->core, l->handle, code, what, l->backend);
}

int64_t farce_timeout_ns(VALUE timeout)
{
    if (NIL_P(timeout)) return -1;
    double d = NUM2DBL(timeout);
    if (d != d) rb_raise(rb_eArgError, "timeout is NaN");
    if (d < 0) rb_raise(rb_eArgError, "timeout must not be negative (got %f)", d);
    if (d > 9.0e9) return -1; /* centuries: as good as forever, and no overflow */
    return (int64_t)(d * 1e9);
}

VALUE farce_backend_names(void)
{
    const farce_core_copy *core = farce_core_load();
    char buf[256] = "";
    farce_core_backends(core, buf, sizeof(buf));
    VALUE names = rb_ary_new();
    for (char *name = strtok(buf, ", "); name; name = strtok(NULL, ", ")) rb_ary_push(names, ID2SYM(rb_intern(name)));
    return rb_ary_freeze(names);
}

/* ---- lifetime ------------------------------------------------------------------- */

void farce_loop_init(farce_loop *l, const farce_front_end *front, VALUE owner)
{
    l->front = front;
    l->owner = owner;
    l->wake_fd = -1;
    l->core = l->fds.core = farce_core_none(); /* until start: every call fails safely */
    l->fork_generation = farce_fork_generation;
    l->thread = rb_thread_current();
    l->backend = l->fallback_reason = Qnil;
    l->blocked = st_init_numtable();
    l->turns.budget_ns = FARCE_DEFAULT_TURN_BUDGET_NS;
    l->turns.started_ns = l->created_ns = farce_monotonic_ns();
    farce_stall_init(&l->stall, &l->thread);
}

void farce_loop_start_core(farce_loop *l, const char *backend)
{
    if (l->handle) return;
    if (l->closed) farce_loop_check_usable(l);
    farce_stack_guard(); /* before the load, whose first call starts Go's runtime */
    l->core = l->fds.core = farce_core_load();
    farce_release_orphans();
    VALUE from_environment = Qnil;
    if (!backend) {
        /* FARCE_BACKEND is read in one place, Farce.backend_from_environment
         * (lib/farce/native.rb), since the Ruby loop's choice needs it too.
         * Only a selector gets here without a name, and it has no Ruby loop:
         * :ruby means the best native backend there. */
        from_environment = rb_sym2str(rb_funcall(rb_define_module("Farce"), rb_intern("backend_from_environment"), 0));
        backend = strcmp(RSTRING_PTR(from_environment), "ruby") == 0 ? "auto" : StringValueCStr(from_environment);
    }
    char name[64] = "", reason[512] = "";
    int wake_fd = -1;
    int64_t h = farce_core_new(l->core, backend, name, sizeof(name), reason, sizeof(reason), &wake_fd);
    if (h == -FARCE_E_ARGUMENT) {
        VALUE names = farce_backend_names(), list = rb_str_new_cstr("");
        for (long i = 0; i < RARRAY_LEN(names); i++) {
            rb_str_catf(list, "%s%"PRIsVALUE, i ? ", " : "", rb_inspect(RARRAY_AREF(names, i)));
        }
        rb_raise(rb_eArgError, "unknown farce backend :%s (choices: %"PRIsVALUE")", backend, list);
    }
    if (h <= 0) rb_raise(farce_eError, "cannot start farce with backend %s: %s", backend, reason);
    l->handle = h;
    l->wake_fd = wake_fd;
    l->backend = ID2SYM(rb_intern(name));
    l->fallback_reason = reason[0] ? rb_str_freeze(rb_str_new_cstr(reason)) : Qnil;
    l->ops = farce_core_ops_supported(l->core, h);
    farce_fd_table_use_completion(&l->fds, l->ops); /* descriptors seen before the start included */
    if (l->ops) farce_inflight_ops_register(&l->inflight_ops, &l->waits, &l->nwaits, &l->ops_in_flight);
    if (l->stall.threshold_ns > 0) farce_loop_watch_stalls(l, l->stall.threshold_ns); /* asked for before the start */
    RB_GC_GUARD(from_environment); /* backend points into it until here */
}

int farce_loop_release(farce_loop *l)
{
    if (l->handle && !farce_loop_inert(l)) {
        int foreign = rb_thread_current() != l->thread;
        if (foreign && (l->running || l->in_kernel_wait || l->ops_in_flight > 0)) {
            /* Another thread: only the loop's thread can reap its ring, and
             * its poll may be running, and the core's per-thread state is not
             * synchronised. Hand the release over: closed for every hook
             * from now on, released by the loop when it wakes
             * (farce_loop_finish_release). */
            l->closed = l->release_pending = 1;
            farce_write_wake(&l->wake_fd);
            return 0;
        }
        if (!foreign && !farce_loop_drain_ops(l, 1)) {
            l->closed = l->release_pending = 1; /* the kernel still holds memory: keep every pin */
            return 0;
        }
    }
    /* no more stall samples or reports; the core frees the turn state at close */
    farce_stall_forget(&l->stall);
    if (l->stall.turns) __atomic_store_n(&l->stall.turns->active, 0, __ATOMIC_RELEASE);
    l->stall.turns = NULL;
    if (l->handle && !farce_loop_inert(l)) farce_core_close(l->core, l->handle);
    l->handle = 0;
    l->release_pending = 0;
    l->ops_in_flight = 0;
    l->closed = 1;
    if (l->waits) memset(l->waits, 0, l->nwaits * sizeof(farce_wait));
    farce_fd_table_clear(&l->fds);
    l->nreserve = 0; /* the released core's */
    l->nwakes = 0;
    l->nqueued_ops = 0;
    st_clear(l->blocked);
    l->batch_pos = l->batch_len = 0;
    l->parked = l->fd_parked = 0;
    return 1;
}

void farce_loop_finish_release(farce_loop *l)
{
    if (l->release_pending && rb_thread_current() == l->thread) farce_loop_release(l);
}

int farce_loop_try_claim(farce_loop *l)
{
    VALUE current = rb_thread_current();
    if (current == l->thread) return 1;
    if (l->parked == 0 && l->ops_in_flight == 0 && !l->running && !l->in_kernel_wait) {
        l->thread = current;
        farce_stall_thread_changed(&l->stall); /* the watchdog signals this thread now */
        return 1;
    }
    return 0;
}

void farce_loop_claim_or_raise(farce_loop *l)
{
    ID hook = rb_frame_this_func(); /* the hook the caller is in, for the message */
    VALUE current = rb_thread_current();
    if (farce_loop_try_claim(l)) return;
    rb_raise(farce_eError, "%s#%s called from %"PRIsVALUE", but this %s belongs to %"PRIsVALUE" (%ld fibers "
             "wait in it there): a scheduler serves only the thread that runs it. Create one per thread "
             "(Fiber.set_scheduler(Farce::Scheduler.new) inside each), and pass work between threads with a "
             "Thread::Queue; only unblock, fiber_interrupt, stats, io_close and the selector's push and wakeup may "
             "be called from anywhere",
             l->front->name, hook ? rb_id2name(hook) : "hook", rb_inspect(current), l->front->name, rb_inspect(l->thread), l->parked);
}

void farce_loop_raise_unusable(const farce_loop *l)
{
    if (farce_loop_inert(l)) {
        rb_raise(farce_eError, "this %s was created before fork and is inert in the child; "
                 "create a new one after fork", l->front->name);
    }
    rb_raise(farce_eError, "%s is closed", l->front->name);
}

void farce_loop_mark(farce_loop *l)
{
    rb_gc_mark(l->thread);
    rb_gc_mark(l->backend);
    rb_gc_mark(l->fallback_reason);
    farce_stall_mark(&l->stall);
    for (uint32_t i = 0; i < l->nwaits; i++) {
        if (l->waits[i].gen) {
            rb_gc_mark(l->waits[i].fiber); /* pinned: the blocked table is keyed by address */
            rb_gc_mark(l->waits[i].extra);
        }
    }
    farce_fd_table_mark(&l->fds);
    for (long i = 0; i < l->nqueued_ops; i++) rb_gc_mark(l->queued_ops[i].io);
}

/* ---- completion operations' memory (the keeper: inflight_ops.c) ------------------- */

int farce_loop_drain_ops(farce_loop *l, int check_ints)
{
    if (!l->ops || !l->handle || farce_loop_inert(l)) return 1;
    return farce_inflight_ops_drain(l->core, l->handle, &l->wake_fd, check_ints) == 0;
}

void farce_loop_stop_ops(farce_loop *l)
{
    if (!l->ops_in_flight || !l->handle || farce_loop_inert(l) || rb_thread_current() != l->thread) return;
    for (uint32_t i = 0; i < l->nwaits; i++) {
        if (l->waits[i].gen && l->waits[i].kind == FARCE_WAIT_OP) l->waits[i].stopped = 1;
    }
    farce_loop_drain_ops(l, 0); /* what is left stays pinned, by the keeper */
}

/* From the free function: the handle, and the wait table if operations are
 * in flight (the keeper marks its pins), go to the orphans. */
static void loop_orphan(farce_loop *l)
{
    farce_inflight_ops_unregister(&l->inflight_ops);
    if (!l->handle || farce_loop_inert(l)) return;
    int moves = l->ops_in_flight > 0; /* the table goes with it */
    if (farce_inflight_ops_orphan(l->core, l->handle, l->fork_generation, l->wake_fd, moves ? l->waits : NULL,
                             moves ? l->nwaits : 0) != 0) {
        /* out of memory in a free function: leak the handle, and the
         * table if the kernel still uses its buffers (never a free) */
        if (moves) l->waits = NULL;
        return;
    }
    if (moves) {
        l->waits = NULL;
        l->nwaits = 0;
    }
    l->handle = 0;
}

void farce_loop_free(farce_loop *l)
{
    farce_stall_forget(&l->stall);
    /* turns: the core frees it when the orphaned handle is closed (farce_release_orphans) */
    if (l->stall.turns && !farce_loop_inert(l)) __atomic_store_n(&l->stall.turns->active, 0, __ATOMIC_RELEASE);
    loop_orphan(l); /* the handle, and the wait table if operations are in flight */
    if (l->blocked) st_free_table(l->blocked);
    if (l->polled) st_free_table(l->polled);
    xfree(l->waits);
    xfree(l->wakes);
    xfree(l->queued_ops);
    farce_fd_table_free(&l->fds);
}

size_t farce_loop_memsize(const farce_loop *l)
{
    return l->nwaits * sizeof(farce_wait) + farce_fd_table_memsize(&l->fds) +
           (size_t)l->queued_ops_cap * sizeof(farce_queued_op);
}

/* ---- Go's scheduler tick ----------------------------------------------------- */

/* A poll moves the tick too (the core does it itself, and farce_loop_poll
 * notes when), so a loop that polls often never calls this; but between two
 * polls a loop with a thousand fibers ready runs Ruby for tens of milliseconds;
 * without this, sysmon took the P each iteration and then polled every
 * 20 us for a millisecond, a cost that grew with the connections served
 * (docs/benchmarks.md, "Cost against connections"). */
void farce_loop_tick_core(farce_loop *l, int64_t now)
{
    l->core_ticked_ns = now;
    if (!l->handle || farce_loop_inert(l)) return;
    farce_core_tick(l->core, l->handle);
    l->core_ticks++;
}

/* ---- the loop ------------------------------------------------------------------- */

/* Ruby before 4.0 tells a scheduler nothing when an IO is closed: every
 * FARCE_CLOSE_SCAN_NS the loop drops descriptors whose IO was closed, which
 * wakes their waiters with IOError instead of leaving them parked forever. */
static void scan_closed(farce_loop *l)
{
    if (!l->fd_parked) return;
    /* A loop that polls without waiting in the kernel polls every few
     * microseconds: it reads the clock for the scan every 8th poll only.
     * After a kernel wait (every poll of an idle loop, capped at
     * FARCE_CLOSE_SCAN_NS) it always does, so the scan keeps its period. */
    if (!l->slept && (++l->scan_polls & 7) != 0) return;
    l->scan_polls = 0;
    int64_t now = farce_monotonic_ns();
    if (now - l->last_scan < FARCE_CLOSE_SCAN_NS) return;
    l->last_scan = now;
    farce_fd_table_forget_closed(&l->fds, l->handle);
}

void farce_loop_op_room(farce_loop *l)
{
    if (l->nqueued_ops < l->queued_ops_cap) return;
    long cap = l->queued_ops_cap ? l->queued_ops_cap * 2 : 64;
    REALLOC_N(l->queued_ops, farce_queued_op, cap);
    l->queued_ops_cap = cap;
}

/* Cancels each operation queued since the last poll whose IO was closed or
 * no longer has the descriptor it was queued on (event_loop.h). The caller
 * polls next, with the GVL still held: that poll submits the others. */
static void check_queued_ops(farce_loop *l)
{
    for (long i = 0; i < l->nqueued_ops; i++) {
        const farce_queued_op *q = &l->queued_ops[i];
        if (farce_io_fd_or_closed(q->io) == q->fd) continue;
        farce_core_cancel_op(l->core, l->handle, q->token); /* a stale token (reaped meanwhile) is ignored */
    }
    l->nqueued_ops = 0;
}

int64_t farce_loop_poll(farce_loop *l, int64_t block_ns)
{
    farce_loop_turn_ends(l);
    scan_closed(l);
    if (l->nqueued_ops) check_queued_ops(l); /* right before the poll that submits them */
    l->slept = 0;
    int64_t n;
    l->polled_at = 0;
    /* the last batch's resume stamps (the core's wake-up latency
     * histogram, once someone reads it), the descriptor waits begun
     * since, and the reserve of tokens for the next ones, all in the
     * one call */
    farce_poll_args a = {NULL, 0, l->fds.ndeferred, l->fds.deferred, l->reserve, l->nreserve,
                         FARCE_DEFERRED_WAITS, (int32_t)l->nwakes, l->wakes, 0, 0, 0};
    int last = 0;
    if (RB_UNLIKELY(l->wakeup_latency)) { /* kept once stats were read; until then this test is its whole cost */
        a.resumed = l->resumed_at;
        a.nresumed = last = l->batch_len;
        a.flags = FARCE_POLL_WAKEUP_LATENCY;
    }
    n = farce_core_poll_batch(l->core, l->handle, l->batch, FARCE_BATCH, &a);
    l->fds.ndeferred = 0;
    l->nwakes = 0;
    if (a.reserved >= 0 && a.reserved <= FARCE_DEFERRED_WAITS) l->nreserve = a.reserved;
    if (last) memset(l->resumed_at, 0, (size_t)last * sizeof(int64_t));
    if (n > 0) l->polled_at = a.polled_at;
    if (a.polled_at) l->core_ticked_ns = a.polled_at; /* the core moved Go's tick itself if it was due */
    l->batch_pos = l->batch_len = 0;
    if (n == 0 && block_ns == 0) {
        /* The io_uring driver defers submissions from a zero-timeout poll
         * that finds nothing to the blocking poll it expects next, never
         * twice in a row (uring_linux.go). A zero-timeout select has no
         * next: the second call submits, so readiness armed in this very
         * call is seen (io-event's contract). */
        n = farce_core_poll_now(l->core, l->handle, l->batch, FARCE_BATCH);
    } else if (n == 0 && l->wake_pending) {
        l->wake_pending = 0; /* woken from another thread since the front end looked: no wait */
    } else if (n == 0) {
        /* the close scan must get its turn while descriptor waits are parked */
        if (l->fd_parked && (block_ns < 0 || block_ns > FARCE_CLOSE_SCAN_NS)) block_ns = FARCE_CLOSE_SCAN_NS;
        int64_t t0 = farce_monotonic_ns();
        l->in_kernel_wait = 1;
        n = farce_core_poll_blocking(l->core, l->handle, block_ns, l->batch, FARCE_BATCH, &l->wake_fd);
        l->in_kernel_wait = 0;
        l->slept = 1;
        int64_t woke = farce_monotonic_ns(), slept = woke - t0;
        l->core_ticked_ns = woke; /* as the poll above */
        l->idle_ns += slept;
        l->idle_duration = (double)slept / 1e9;
        l->batch_len = n > 0 ? (int)n : 0;
        rb_thread_check_ints(); /* traps, Thread#raise, Timeout: may raise, the batch is kept */
    }
    if (n == -EINTR) {
        /* even a zero-timeout poll is interrupted by signals (Ruby's timer) */
        rb_thread_check_ints();
        return -EINTR;
    }
    if (n < 0) farce_loop_raise(l, n, "poll");
    l->batch_len = (int)n;
    return n;
}

int farce_loop_next(farce_loop *l, farce_wait *w, int64_t *result)
{
    farce_loop_turn_ends(l);
    while (!l->closed && l->batch_pos < l->batch_len) {
        farce_completion c = l->batch[l->batch_pos++];
        uint32_t slot = farce_token_slot(c.token);
        if (slot >= l->nwaits) continue;
        farce_wait *e = &l->waits[slot];
        if (e->gen != farce_token_gen(c.token) || !e->fiber) continue; /* cancelled meanwhile */
        *w = *e;
        memset(e, 0, sizeof(*e));
        *result = c.result;
        if (w->kind == FARCE_WAIT_OP) l->ops_in_flight--;
        if (w->kind != FARCE_WAIT_ALARM) {
            l->parked--;
            if (w->kind == FARCE_WAIT_FD || w->kind == FARCE_WAIT_OP) l->fd_parked--;
        }
        /* a descriptor that was ready when the wait began: its events */
        if (w->kind == FARCE_WAIT_FD && FIXNUM_P(w->extra)) *result = FIX2LONG(w->extra);
        if (w->kind == FARCE_WAIT_FIBER && w->extra != Qundef && w->extra) {
            st_data_t key = (st_data_t)w->fiber;
            st_delete(l->blocked, &key, NULL);
        }
        /* cancelled because the loop stopped, not by a close: try again */
        if (w->kind == FARCE_WAIT_OP && w->stopped && c.result == -ECANCELED) *result = -EAGAIN;
        /* the first fiber after a poll that did not wait: the poll's clock */
        int64_t now = l->polled_at ? l->polled_at : farce_monotonic_ns();
        l->polled_at = 0;
        farce_loop_turn_begins_at(l, now);
        if (l->wakeup_latency) l->resumed_at[l->batch_pos - 1] = now;
        return 1;
    }
    return 0;
}

void farce_loop_wake(farce_loop *l, uint64_t token)
{
    if (l->nwakes == l->wakes_cap) {
        long cap = l->wakes_cap ? l->wakes_cap * 2 : 64;
        REALLOC_N(l->wakes, uint64_t, cap);
        l->wakes_cap = cap;
    }
    l->wakes[l->nwakes++] = token;
}

/* ---- turns --------------------------------------------------------------------- */

/*
 * Fiber.schedule runs the new fiber at once and returns to the spawner when
 * it first blocks, and a read that finds data returns without the loop: a
 * spawner, an acceptor whose backlog is full, or a reader of a socket that
 * always has data would hold the loop for as long as it goes on, with every
 * timer and every ready fiber waiting. So the loop notes when it switched to
 * a fiber (farce_loop_turn_begins), and the hooks that would return without
 * blocking check the time (farce_loop_turn_check, one clock read: ~20 ns
 * next to a read(2) of ~1 us): past the budget, the fiber is queued as
 * ready behind what is ready already, and runs again after one iteration.
 *
 * The default, 0.5 ms, from bench/workloads.rb's spawn_burst (2,000 sleeps
 * of 1-100 ms spawned in one go: lateness p99) and accept_burst (1,500
 * connections in the backlog, a 1 ms ticker: its worst gap) on Ruby 3.3,
 * medians of 5 alternating runs with Async in the same runs: 5.2 ms and
 * 3.1 ms at 2 ms, 4.1 and 2.3 at 1 ms, 3.8 and 1.8 at 0.5 ms, 4.1 and 2.3
 * at 0.25 ms (more iterations than they save); Async 3.4 and 4.3. The
 * bursts' total time did not change. A turn costs one zero-timeout poll
 * (~1 us), so at 0.5 ms a spawner loses at most ~0.2% to them. What is
 * left of spawn_burst's tail is Ruby's own pauses inside the new fiber's
 * first resume (the fiber pool growing by 512 or 1,024 stacks: 3-7 ms)
 * and GC, which no turn can split; farce spawning twice as fast as Async
 * puts twice as many timers due inside each of those pauses.
 */
static void give_turn_without_usable_check(farce_loop *l)
{
    if (l->front->give_turn(l)) l->turns.given++;
    /* where the front end could not give one (see its give_turn), the
     * check stays quiet for another budget */
    farce_loop_turn_begins(l);
}

void farce_loop_give_turn(farce_loop *l)
{
    give_turn_without_usable_check(l);
    /* closed meanwhile (by a fiber the turn ran, or from another thread,
     * handed to the loop): the hook that asked cannot go on */
    farce_loop_check_usable(l);
}

/* A hook on io gives its turn before it reads io's descriptor, so that a
 * close by a fiber the turn ran is seen (IOError). But the hook was asked
 * about the open file the number named when it was called, and within the
 * turn C code may close that number behind io's back and get it again for
 * another file. Read only afterwards, the number would hand the new file
 * this wait (its readiness) or these bytes, and the fd table could not
 * tell: to it, io presents the number for the first time or names what
 * it named last. So the file is noted before the turn, and when the number
 * names another one (or none) after it, the hook raises the IOError a wait
 * parked on the old file gets. A turn is given at most once a budget: the
 * fstat and fcntl on each side of it cost nothing on the common path. */
void farce_loop_give_turn_on(farce_loop *l, VALUE io)
{
    int fd = farce_io_fd_or_closed(io);
    uint64_t dev = 0, ino = 0, dev_after, ino_after;
    /* not known where a number is not reused while its IO is open (a
     * Windows SOCKET): the turn is all there is to do */
    int known = fd >= 0 && farce_fd_file_now(fd, &dev, &ino);
    farce_loop_give_turn(l);
    /* io itself closed (or never open): the hook's own check raises */
    if (!known || farce_io_fd_or_closed(io) != fd) return;
    if (!farce_fd_file_now(fd, &dev_after, &ino_after) || dev_after != dev || ino_after != ino) farce_raise_closed(fd);
}

/* ---- stall detection (the state and the signal: stall.c) ------------------------- */

void farce_loop_watch_stalls(farce_loop *l, int64_t threshold_ns)
{
    farce_loop_check_usable(l);
    l->stall.threshold_ns = threshold_ns > 0 ? threshold_ns : 0;
    if (!l->handle) return; /* farce_loop_start applies it */
    int e = farce_stall_prepare(&l->stall, threshold_ns);
    if (e == -ENOMEM) rb_raise(rb_eNoMemError, "stall detection: out of memory");
    if (e != 0) rb_raise(farce_eError, "cannot install the stall signal handler");
    if (!l->stall.turns) return; /* off, and never on */
    farce_stall_thread_changed(&l->stall);
    int64_t r = farce_core_stall_watch(l->core, l->handle, l->stall.turns, threshold_ns, farce_stall_signal());
    if (r < 0) farce_loop_raise(l, r, "stall watch");
    /* out of memory: the stalls are still reported, unsampled (fiber nil) */
    (void)farce_stall_watching(&l->stall, threshold_ns);
}

void farce_loop_report_stall(farce_loop *l)
{
    VALUE fiber, backtrace;
    double seconds;
    if (!farce_stall_take_report(&l->stall, farce_monotonic_ns(), &fiber, &seconds, &backtrace)) return;
    /* rb_intern's own cache (a constant name): every Ractor's threads may ask */
    rb_funcall(l->owner, rb_intern("__report_stall"), 3, fiber, DBL2NUM(seconds), NIL_P(backtrace) ? rb_ary_new() : backtrace);
}

int64_t farce_turn_budget_ns(VALUE seconds)
{
    if (NIL_P(seconds)) return 0;
    double d = NUM2DBL(seconds);
    if (d != d || d < 0) rb_raise(rb_eArgError, "turn_budget must be nil or a duration >= 0 in seconds (got %f)", d);
    if (d > 9.0e9) return 0;
    return (int64_t)(d * 1e9);
}

/* ---- hooks both front ends answer the same way ---------------------------------- */

struct polled_close {
    farce_loop *l;
    int fd;
};

/* A fiber polling the closed descriptor: woken at the next poll, it raises
 * IOError (farce_loop_park_polled), as a kernel wait's fiber does. */
static int wake_polled(st_data_t token, st_data_t fd, st_data_t arg)
{
    struct polled_close *c = (struct polled_close *)arg;
    if ((int)fd != c->fd) return ST_CONTINUE;
    farce_loop_wake(c->l, (uint64_t)token);
    return ST_DELETE;
}

void farce_loop_io_close(farce_loop *l, VALUE target)
{
    /* from another thread nothing is done here: the close scan finds it */
    if (!l->handle || l->closed || farce_loop_inert(l) || rb_thread_current() != l->thread) return;
    int fd = RB_INTEGER_TYPE_P(target) ? NUM2INT(target) : farce_io_fd_or_closed(rb_io_get_io(target));
    /* a polled descriptor's waiters (a Windows pipe's), whom no kernel wait names */
    if (fd >= 0 && l->polled && l->polled->num_entries) {
        struct polled_close c = {l, fd};
        st_foreach(l->polled, wake_polled, (st_data_t)&c);
    }
    if (fd < 0 || fd >= l->fds.nfds || !l->fds.fds[fd].io) return;
    farce_fd_table_forget(&l->fds, l->handle, fd); /* checks the stack: io_close runs on the closing fiber's */
}

VALUE farce_loop_stats(farce_loop *l)
{
    int64_t v[FARCE_STAT_COUNT];
    l->wakeup_latency = 1; /* from now on (the next poll tells the core) */
    int64_t r = farce_core_stats(l->core, l->handle, v, FARCE_STAT_COUNT);
    if (r < 0) farce_loop_raise(l, r, "stats");
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("backend")), l->backend);
    rb_hash_aset(h, ID2SYM(rb_intern("parked_fibers")), LONG2NUM(l->parked));
    /* with the descriptor waits the next poll starts */
    rb_hash_aset(h, ID2SYM(rb_intern("pending_waits")), LL2NUM(v[FARCE_STAT_PENDING_WAITS] + l->fds.ndeferred));
    rb_hash_aset(h, ID2SYM(rb_intern("ready_waits")), LL2NUM(v[FARCE_STAT_READY_WAITS]));
    rb_hash_aset(h, ID2SYM(rb_intern("timers")), LL2NUM(v[FARCE_STAT_TIMERS]));
    rb_hash_aset(h, ID2SYM(rb_intern("registered_descriptors")), LL2NUM(v[FARCE_STAT_REGISTERED_FDS]));
    rb_hash_aset(h, ID2SYM(rb_intern("iterations")), LL2NUM(v[FARCE_STAT_ITERATIONS]));
    rb_hash_aset(h, ID2SYM(rb_intern("completed_waits")), LL2NUM(v[FARCE_STAT_COMPLETED]));
    rb_hash_aset(h, ID2SYM(rb_intern("goroutines")), LL2NUM(v[FARCE_STAT_GOROUTINES]));
    /* wake-up latency (a wait finishing -> its fiber running), the core's histogram */
    rb_hash_aset(h, ID2SYM(rb_intern("wakeups")), LL2NUM(v[FARCE_STAT_WAKEUPS]));
    rb_hash_aset(h, ID2SYM(rb_intern("wakeup_p50")), DBL2NUM(v[FARCE_STAT_WAKEUP_P50_NS] / 1e9));
    rb_hash_aset(h, ID2SYM(rb_intern("wakeup_p90")), DBL2NUM(v[FARCE_STAT_WAKEUP_P90_NS] / 1e9));
    rb_hash_aset(h, ID2SYM(rb_intern("wakeup_p99")), DBL2NUM(v[FARCE_STAT_WAKEUP_P99_NS] / 1e9));
    rb_hash_aset(h, ID2SYM(rb_intern("wakeup_max")), DBL2NUM(v[FARCE_STAT_WAKEUP_MAX_NS] / 1e9));
    rb_hash_aset(h, ID2SYM(rb_intern("completion_ops")), l->ops ? Qtrue : Qfalse);
    rb_hash_aset(h, ID2SYM(rb_intern("completion_ops_submitted")), LONG2NUM(l->ops_submitted));
    /* System calls, so that users can see io_uring's batching: the driver's
     * (epoll_wait/epoll_ctl, poll, io_uring_enter, wake drains) and the reads
     * and writes the extension made itself; divided by the requests served,
     * the calls per request. */
    rb_hash_aset(h, ID2SYM(rb_intern("io_uring_enters")), LL2NUM(v[FARCE_STAT_URING_ENTERS]));
    rb_hash_aset(h, ID2SYM(rb_intern("driver_calls")), LL2NUM(v[FARCE_STAT_KERNEL_CALLS]));
    rb_hash_aset(h, ID2SYM(rb_intern("transfer_calls")), LONG2NUM(l->transfer_calls));
    rb_hash_aset(h, ID2SYM(rb_intern("file_transfers_cached")), LONG2NUM(l->file_cached));
    rb_hash_aset(h, ID2SYM(rb_intern("file_transfers_offloaded")), LONG2NUM(l->file_offloads));
    rb_hash_aset(h, ID2SYM(rb_intern("system_calls")), LL2NUM(v[FARCE_STAT_KERNEL_CALLS] + l->transfer_calls));
    rb_hash_aset(h, ID2SYM(rb_intern("turn_budget")), l->turns.budget_ns > 0 ? DBL2NUM(l->turns.budget_ns / 1e9) : Qnil);
    rb_hash_aset(h, ID2SYM(rb_intern("turns_given")), LONG2NUM(l->turns.given));
    rb_hash_aset(h, ID2SYM(rb_intern("core_ticks")), LONG2NUM(l->core_ticks));
    rb_hash_aset(h, ID2SYM(rb_intern("stall_threshold")), l->stall.threshold_ns > 0 ? DBL2NUM(l->stall.threshold_ns / 1e9) : Qnil);
    rb_hash_aset(h, ID2SYM(rb_intern("stalls")), LONG2NUM(l->stall.reports));
    double total = (double)(farce_monotonic_ns() - l->created_ns) / 1e9, idle = (double)l->idle_ns / 1e9;
    if (idle > total) idle = total;
    rb_hash_aset(h, ID2SYM(rb_intern("idle_seconds")), DBL2NUM(idle));
    rb_hash_aset(h, ID2SYM(rb_intern("busy_seconds")), DBL2NUM(total - idle));
    rb_hash_aset(h, ID2SYM(rb_intern("load")), DBL2NUM(total > 0 ? (total - idle) / total : 0.0));
    return h;
}
