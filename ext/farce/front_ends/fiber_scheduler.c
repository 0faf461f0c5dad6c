/*
 * Farce::Scheduler: Ruby's Fiber::Scheduler interface over the loop
 * (event_loop.h). Its fibers are resumed by the loop and yield back to it;
 * everything else about waiting, the descriptor table, the poll and the
 * read/write loop is shared with the io-event selector. What is left here is
 * what only Fiber::Scheduler has: `run`, block/unblock (from any thread,
 * through an inbox), timeouts that raise into a fiber, fiber_interrupt, the
 * worker-pool handshake, and IO.select's instant check.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/fiber/scheduler.h>
#include "platforms/sys_io.h" /* suseconds_t on Windows */
#include "front_ends/fiber_scheduler.h"
#include "hook_io/io_transfer.h"
#include "loop/event_loop.h"
#include "loop/wait_table.h"
#include "hook_io/positional_io.h"
#include "loop/stall.h"

static VALUE cScheduler;

typedef struct {
    farce_loop loop;   /* first: the loop's callbacks get &s->loop */
    int running;
    VALUE interrupts;  /* [fiber, exception] pairs from fiber_interrupt, raised by the loop */
    uint64_t *inbox;   /* tokens woken by other threads, applied by the loop */
    long inbox_len, inbox_cap;
    long offloads;     /* jobs on worker threads that fibers wait for */
    long live_fibers;  /* started by Fiber.schedule, not finished */
    /* Fibers `unblock`ed before they were registered as blocked: Queue and
     * Mutex put a fiber on their wait list before they call `block`, and
     * when a Ruby frame sits in between (a subclass's `block` calling
     * super, or the Ruby loop's Hooks once installed) another thread can
     * run there and unblock it. Its next `block` (or unblockable
     * kernel_sleep) returns at once: a spurious wakeup, which Queue, Mutex
     * and ConditionVariable allow for, instead of a lost one (a hang). Keys
     * are marked. */
    st_table *early_unblocks;
    /* The fiber the loop (dispatch, an interrupt or alarm it raises) or
     * Fiber.schedule (__start) is running now, or nil (the thread's own
     * fiber outside those: code before `run`, hooks driven by hand). A fiber
     * parks by yielding, which returns to whoever resumed it: only this one
     * gets back to the loop (or to its spawner) that way. Another
     * non-blocking fiber running inside its turn was resumed by it (or by a
     * fiber it resumed): Enumerator#next's fiber, a Fiber.new the
     * application resumes. Its yield would land in that resume instead
     * (Enumerator#next returned nil for a character not read yet, and the
     * loop later resumed the enumerator's fiber on its own), so it cannot
     * park: it waits with the thread, as a blocking fiber does (can_park). */
    VALUE turn_fiber;
    /* A raise Farce::HeldAlarms' watcher thread makes into this loop's
     * thread (raise_held_alarm): the fiber it is for, until that fiber (or
     * the loop after it) takes it (take_held_raise, drop_held_raise); the
     * exception; whether the watcher is still inside Thread#raise. */
    struct {
        VALUE fiber, exception;
        int raising;
    } held;
} farce_sched;

/* ---- how its fibers switch ------------------------------------------------- */

/* The turn ends before the switch, not when the loop's resume returns: Ruby
 * checks interrupts as the switch completes, on the loop's side, and may let
 * another thread run there; HeldAlarms' watcher must not find this fiber
 * still named as the one holding the thread then (its Thread#raise would
 * land in the loop and leave Farce.run). A raise the watcher started into
 * this fiber before is taken here, before the switch (take_held_raise). */
static inline void take_held_raise(farce_sched *s, VALUE fiber);

static VALUE yield_to_loop(VALUE parking)
{
    const farce_parking *p = (const farce_parking *)parking;
    farce_sched *s = RTYPEDDATA_DATA(p->owner);
    VALUE fiber = p->fiber; /* the park asked Ruby already: a ping-pong round trip parks twice */
    if (s->turn_fiber == fiber) s->turn_fiber = Qnil;
    take_held_raise(s, fiber);
    return rb_fiber_yield(0, NULL);
}

static VALUE cFiber;
static ID id_blocking_p;

/* A fiber parks by yielding to whoever resumed it: that must be a
 * non-blocking fiber (the loop resumes those). Only a thread with no
 * scheduler set (this one driven by hand) needs the method call, which
 * may let another thread run. */
static int can_park(VALUE owner)
{
    VALUE turn = ((farce_sched *)RTYPEDDATA_DATA(owner))->turn_fiber;
    if (!NIL_P(turn) && rb_fiber_current() != turn && RTEST(rb_fiber_alive_p(turn))) {
        return 0; /* resumed by a fiber inside the turn, not by the loop (see turn_fiber) */
    }
    VALUE current = rb_fiber_scheduler_current(); /* nil for a blocking fiber */
    if (current == owner) return 1;
    if (!NIL_P(rb_fiber_scheduler_get())) return !NIL_P(current);
    return !RTEST(rb_funcall(cFiber, id_blocking_p, 0));
}

/* The oldest exception fiber_interrupt queued for fiber (a Fiber target);
 * Qundef when none is. Every interrupt queued for it is taken out of the
 * queue: they were all queued while it was parked in the wait it leaves
 * now, each to end that blocking operation, and the first one ends it.
 * Left queued, the others would be raised into its next waits. Ruby
 * 4.1 says the same with its operation stand-ins: an interrupt whose
 * operation is over answers alive? false and is left alone. */
static VALUE take_interrupt(farce_sched *s, VALUE fiber)
{
    VALUE first = Qundef;
    for (long i = 0; i < RARRAY_LEN(s->interrupts);) {
        VALUE pair = RARRAY_AREF(s->interrupts, i);
        if (RARRAY_AREF(pair, 0) != fiber) {
            i++;
            continue;
        }
        if (first == Qundef) first = RARRAY_AREF(pair, 1);
        rb_ary_delete_at(s->interrupts, i);
    }
    return first;
}

static inline void drop_held_raise(farce_sched *s, VALUE fiber);

/* Resumes the fibers whose waits finished; an alarm raises in its fiber.
 * A fiber's exception propagates with the batch cursor already past it.
 * Returns how many fibers it switched to.
 *
 * An interrupt queued for a fiber whose wait finished in the same
 * iteration is raised here, at that wait, instead of resuming it: Ruby 4.0
 * interrupts the blocking operation an IO#close found the fiber in, and the
 * fiber leaves that operation as soon as it is resumed. Queued until
 * deliver_interrupts, it was raised into whatever the fiber waited on
 * next (a sleep after the read the close was for). A completion operation
 * that was reaped has finished its transfer: it gets its result, and the
 * interrupt, meant for an operation that is over, is dropped. */
static long dispatch(farce_loop *l)
{
    farce_sched *s = (farce_sched *)l;
    farce_wait w;
    int64_t result;
    long switched = 0;
    while (farce_loop_next(l, &w, &result)) {
        switched++;
        /* a fiber that raises out of its resume is dead: can_park ignores
         * a dead turn_fiber, and run's end clears it */
        s->turn_fiber = w.fiber;
        if (w.kind == FARCE_WAIT_ALARM) {
            /* the entry was cleared: only w holds the array whose elements
             * rb_fiber_raise reads, so keep it alive until it returned */
            VALUE alarm = w.extra;
            /* argv is const VALUE * in 3.1's prototype, VALUE * from 3.2 on;
             * rb_fiber_raise only reads it. The deadline (alarm[0]) is not
             * part of the exception. */
            if (RTEST(rb_fiber_alive_p(w.fiber)))
                rb_fiber_raise(w.fiber, (int)RARRAY_LEN(alarm) - 1, (VALUE *)RARRAY_CONST_PTR(alarm) + 1);
            RB_GC_GUARD(alarm);
            s->turn_fiber = Qnil;
            drop_held_raise(s, w.fiber);
            continue;
        }
        VALUE interrupt = RARRAY_LEN(s->interrupts) ? take_interrupt(s, w.fiber) : Qundef;
        if (interrupt != Qundef && w.kind != FARCE_WAIT_OP) {
            rb_fiber_raise(w.fiber, 1, &interrupt);
        } else {
            VALUE arg = LONG2FIX((long)result);
            rb_fiber_resume(w.fiber, 1, &arg);
        }
        RB_GC_GUARD(interrupt);
        s->turn_fiber = Qnil;
        drop_held_raise(s, w.fiber);
    }
    return switched;
}

static int give_turn(farce_loop *l);

static const farce_front_end scheduler_front_end = {"Farce::Scheduler", yield_to_loop, 0, can_park, give_turn};

/* ---- GC -------------------------------------------------------------------- */

static void sched_mark(void *p)
{
    farce_sched *s = p;
    farce_loop_mark(&s->loop);
    rb_gc_mark(s->interrupts);
    rb_gc_mark(s->turn_fiber);
    rb_gc_mark(s->held.fiber);
    rb_gc_mark(s->held.exception);
    if (s->early_unblocks) rb_mark_set(s->early_unblocks);
}

static void sched_free(void *p)
{
    farce_sched *s = p;
    farce_loop_free(&s->loop);
    if (s->early_unblocks) st_free_table(s->early_unblocks);
    xfree(s->inbox);
    xfree(s);
}

static size_t sched_memsize(const void *p)
{
    const farce_sched *s = p;
    return sizeof(*s) + farce_loop_memsize(&s->loop) + s->inbox_cap * sizeof(uint64_t);
}

static const rb_data_type_t sched_type = {
    "Farce::Scheduler",
    {sched_mark, sched_free, sched_memsize},
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE sched_alloc(VALUE klass)
{
    farce_sched *s;
    VALUE obj = TypedData_Make_Struct(klass, farce_sched, &sched_type, s);
    farce_loop_init(&s->loop, &scheduler_front_end, obj);
    s->interrupts = rb_ary_new();
    s->early_unblocks = st_init_numtable();
    s->turn_fiber = s->held.fiber = s->held.exception = Qnil;
    return obj;
}

/* Every hook asks (twice per ping-pong read or write): the receiver is a
 * Farce::Scheduler (or a subclass) in all but a misuse, and that is
 * checked inline; anything else goes through rb_check_typeddata, which
 * raises the TypeError. The type is not embeddable, so RTYPEDDATA_DATA is
 * the pointer on every Ruby (as can_park reads it). */
static inline farce_sched *sched_of(VALUE self)
{
    if (RB_LIKELY(RB_TYPE_P(self, T_DATA) && RTYPEDDATA_P(self) && RTYPEDDATA_TYPE(self) == &sched_type))
        return (farce_sched *)RTYPEDDATA_DATA(self);
    return rb_check_typeddata(self, &sched_type);
}

/* The scheduler behind self, or an exception saying why it cannot be used. */
static farce_sched *get_sched(VALUE self)
{
    farce_sched *s = sched_of(self);
    farce_loop_check_usable(&s->loop);
    if (!s->loop.handle) rb_raise(farce_eError, "scheduler is closed");
    farce_loop_check_thread(&s->loop);
    return s;
}

/* Whether calls into the core may be made (not released, not inherited). */
static int live(const farce_sched *s) { return s->loop.handle && !farce_loop_inert(&s->loop); }

/* For io_pread/io_pwrite (positional_io.c): the loop when its file steps are
 * completion operations here and now, else NULL (the worker pool serves:
 * a Ruby loop, another backend, a closed scheduler, another thread, a
 * fiber that cannot park). Never raises. */
static farce_loop *file_ops_loop(VALUE self)
{
    farce_sched *s = sched_of(self);
    farce_loop *l = &s->loop;
    if (!live(s) || l->closed || !l->ops || rb_thread_current() != l->thread || !farce_loop_can_park(l)) return NULL;
    return l;
}

/* ---- the loop ------------------------------------------------------------- */

/* Wakeups other threads asked for while they held the GVL. */
static void drain_inbox(farce_sched *s)
{
    for (long i = 0; i < s->inbox_len; i++) farce_loop_wake(&s->loop, s->inbox[i]);
    s->inbox_len = 0;
}

/* Whether fiber is parked in one of this scheduler's waits. */
static int fiber_parked(const farce_sched *s, VALUE fiber)
{
    for (uint32_t i = 0; i < s->loop.nwaits; i++) {
        const farce_wait *e = &s->loop.waits[i];
        if (e->gen && e->kind != FARCE_WAIT_ALARM && e->fiber == fiber) return 1;
    }
    return 0;
}

static ID id_alive_p, id_raise, id_transfer;

/* Raises the exceptions fiber_interrupt queued into their fibers, oldest
 * first. A fiber parked in one of our waits leaves it through the park's
 * rb_protect, which cancels the wait; a fiber no longer parked (it finished,
 * or never waited here) is left alone. An exception the fiber does not
 * rescue propagates out of run, as any fiber's does; the rest stay queued.
 * A target that is not a Fiber (Ruby 4.1's operation proxy) names no fiber
 * to look for: it is asked whether its operation is still going on (its
 * fiber is then in a hook, so parked: the loop runs), and raises into its
 * fiber itself. */
static void deliver_interrupts(farce_sched *s)
{
    while (RARRAY_LEN(s->interrupts) > 0) {
        VALUE pair = RARRAY_AREF(s->interrupts, 0);
        VALUE fiber = RARRAY_AREF(pair, 0), exception = RARRAY_AREF(pair, 1);
        if (!rb_obj_is_fiber(fiber)) {
            rb_ary_shift(s->interrupts);
            /* Ruby 4.1's operation target: it raises into its own fiber */
            if (RTEST(rb_funcall(fiber, id_alive_p, 0))) rb_funcall(fiber, id_raise, 1, exception);
        } else {
            if (!fiber_parked(s, fiber) || !RTEST(rb_fiber_alive_p(fiber))) {
                rb_ary_shift(s->interrupts);
                continue;
            }
            /* with the others queued for the same wait (take_interrupt):
             * the fiber may park again inside the raise, and they are not
             * for that wait */
            exception = take_interrupt(s, fiber);
            s->turn_fiber = fiber;
            rb_fiber_raise(fiber, 1, &exception);
            s->turn_fiber = Qnil;
            drop_held_raise(s, fiber);
        }
        if (s->loop.closed) return;
    }
}

static VALUE run_loop(VALUE self)
{
    farce_sched *s = get_sched(self);
    farce_loop *l = &s->loop;
    for (;;) {
        dispatch(l); /* may raise, as a fiber's exception does */
        if (l->closed) {
            farce_loop_finish_release(l); /* abandon or close from another thread */
            return Qnil;
        }
        /* Worker threads need the GVL to start a job and to hand back its
         * result; a loop that never blocks would make them wait a whole
         * time slice (100 ms) each time. Before the inbox is drained: what
         * they queue there must not wait for the next kernel wakeup. */
        if (s->offloads > 0) rb_thread_schedule();
        if (s->inbox_len) drain_inbox(s);
        if (RARRAY_LEN(s->interrupts)) {
            deliver_interrupts(s); /* may raise, as a fiber's exception does */
            if (l->closed) {
                farce_loop_finish_release(l);
                return Qnil;
            }
            continue;
        }
        if (l->parked <= 0) return Qnil;
        farce_loop_poll(l, -1); /* Go bounds the wait by the next timer */
    }
}

/* run ended by an exception: nobody reaps the completion operations in
 * flight until the next run, and the scheduler may be dropped meanwhile
 * (inflight_ops.c) */
static VALUE run_rescued(VALUE self)
{
    int state = 0;
    VALUE r = rb_protect(run_loop, self, &state);
    if (state) {
        farce_loop_stop_ops(&sched_of(self)->loop); /* raises nothing: the pending jump stays as it is */
        rb_jump_tag(state);
    }
    return r;
}

static VALUE run_ensure(VALUE self)
{
    farce_sched *s = sched_of(self);
    if (live(s)) farce_loop_turn_ends(&s->loop); /* a stall in the last turn is reported */
    s->running = s->loop.running = 0;
    s->turn_fiber = Qnil; /* left by a fiber that raised out of run */
    return Qnil;
}

/* call-seq: run -> nil
 * Runs the event loop until no fiber waits on this scheduler. */
static VALUE sched_run(VALUE self)
{
    farce_sched *s = get_sched(self);
    if (s->running) rb_raise(farce_eError, "Farce::Scheduler#run is already running (it is not re-entrant)");
    if (!RTEST(rb_funcall(cFiber, id_blocking_p, 0))) {
        rb_raise(farce_eError, "Farce::Scheduler#run must be called from a blocking fiber (the thread's own), "
                 "not from a fiber the scheduler runs: it is not re-entrant");
    }
    s->running = s->loop.running = 1;
    farce_stall_thread_changed(&s->loop.stall);
    return rb_ensure(run_rescued, self, run_ensure, self);
}

/* ---- construction and release --------------------------------------------- */

/* call-seq: __open(backend_name or nil) -> nil
 * nil: FARCE_BACKEND from the environment, else auto. */
static VALUE sched_open(VALUE self, VALUE backend)
{
    farce_sched *s = sched_of(self);
    if (s->loop.handle || s->loop.closed) rb_raise(farce_eError, "scheduler already initialized");
    s->loop.thread = rb_thread_current();
    farce_loop_start(&s->loop, NIL_P(backend) ? NULL : StringValueCStr(backend));
    return Qnil;
}

/* call-seq: __release -> nil
 * Frees the Go scheduler and forgets every wait without resuming it. In a
 * forked child it touches only C memory: no Go call, no descriptor closed. */
static VALUE sched_release(VALUE self)
{
    farce_sched *s = sched_of(self);
    if (s->loop.handle && !farce_loop_inert(&s->loop)) farce_stack_guard();
    if (!farce_loop_release(&s->loop)) return Qnil; /* handed to the loop's thread */
    rb_ary_clear(s->interrupts);
    st_clear(s->early_unblocks);
    s->inbox_len = 0;
    return Qnil;
}

/* ---- unwinding (lib/farce/unwind.rb) ----------------------------------------- */

/* Whether the loop's fibers may be resumed from here: live, not closed, on
 * the loop's thread. */
static int unwindable(const farce_sched *s)
{
    return live(s) && !s->loop.closed && rb_thread_current() == s->loop.thread;
}

/* call-seq: __parked_fibers -> [fiber, ...]
 * The live fibers parked in this scheduler's waits (sleep, block, a
 * descriptor wait, a completion operation), each once; [] off the loop's
 * thread or once released. */
static VALUE sched_parked_fibers(VALUE self)
{
    farce_sched *s = sched_of(self);
    VALUE list = rb_ary_new();
    if (!unwindable(s)) return list;
    st_table *seen = st_init_numtable();
    for (uint32_t i = 0; i < s->loop.nwaits; i++) {
        const farce_wait *e = &s->loop.waits[i];
        if (!e->gen || e->kind == FARCE_WAIT_ALARM || !e->fiber) continue;
        if (st_insert(seen, (st_data_t)e->fiber, 1)) continue; /* already listed */
        if (RTEST(rb_fiber_alive_p(e->fiber))) rb_ary_push(list, e->fiber);
    }
    st_free_table(seen);
    return list;
}

/* call-seq: __unwind_turn -> true or false
 * One iteration of the loop, without waiting in the kernel, between rounds
 * of unwinding (Unwinding repeats it while it ran something): completion
 * operations are cancelled and drained first, so that the fibers parked on
 * them (which leave only once the kernel let go of their buffers,
 * inflight_ops.c) are resumed with their completions here and finish
 * unwinding. Whether it resumed a fiber (false: nothing was ready, or the
 * loop is released). A resumed fiber's exception propagates. */
static VALUE sched_unwind_turn(VALUE self)
{
    farce_sched *s = sched_of(self);
    if (!unwindable(s)) return Qfalse;
    farce_loop *l = &s->loop;
    farce_loop_stop_ops(l);
    if (s->inbox_len) drain_inbox(s);
    if (!farce_loop_batch_pending(l)) farce_loop_poll(l, 0);
    long switched = dispatch(l);
    if (l->closed) {
        farce_loop_finish_release(l);
        return Qfalse;
    }
    return switched > 0 ? Qtrue : Qfalse;
}

static VALUE sched_closed_p(VALUE self)
{
    farce_sched *s = sched_of(self);
    return live(s) && !s->loop.closed ? Qfalse : Qtrue;
}

static VALUE sched_backend(VALUE self) { return sched_of(self)->loop.backend; }

static VALUE sched_fallback_reason(VALUE self) { return sched_of(self)->loop.fallback_reason; }

static VALUE sched_fiber_started(VALUE self)
{
    sched_of(self)->live_fibers++;
    return Qnil;
}

static VALUE sched_fiber_finished(VALUE self)
{
    farce_sched *s = sched_of(self);
    st_data_t fiber = (st_data_t)rb_fiber_current();
    if (s->early_unblocks->num_entries) st_delete(s->early_unblocks, &fiber, NULL);
    s->live_fibers--;
    return Qnil;
}

/* call-seq: __offload(delta) -> nil
 * The worker pool's count of jobs fibers wait for (see run_loop). */
static VALUE sched_offload(VALUE self, VALUE delta)
{
    farce_sched *s = sched_of(self);
    s->offloads += NUM2LONG(delta);
    if (s->offloads < 0) s->offloads = 0;
    return Qnil;
}

static VALUE sched_stats(VALUE self)
{
    farce_sched *s = sched_of(self); /* from any thread */
    farce_loop_check_usable(&s->loop);
    if (!s->loop.handle) rb_raise(farce_eError, "scheduler is closed");
    VALUE h = farce_loop_stats(&s->loop);
    rb_hash_aset(h, ID2SYM(rb_intern("fibers")), LONG2NUM(s->live_fibers));
    return h;
}

/* Parks the current fiber on a wait that finishes at the next poll (behind
 * that poll's timers and events when `last`). */
static void yield_fiber(farce_sched *s, int last)
{
    uint64_t token = 0;
    int64_t r = farce_core_yield(s->loop.core, s->loop.handle, last, &token);
    if (r < 0) farce_loop_raise(&s->loop, r, "yield");
    farce_loop_park(&s->loop, token, FARCE_WAIT_FIBER, Qundef);
}

/* The running fiber held the loop past its turn budget (event_loop.c). A
 * fiber that can park (farce_loop_can_park: the same test every wait
 * makes) yields to the loop, which resumes it after one
 * iteration. Any other gets no turn and goes on: a blocking fiber, a fiber
 * resumed inside another's turn, and the thread's own fiber outside `run`
 * (spawning before `run`, or between runs). That one used to run an
 * iteration of the loop itself, and so let scheduled fibers run between
 * two statements of the thread's own code whenever it took longer than the
 * budget: Ruby's test/fiber (TestFiberSleep#test_sleep: five fibers
 * spawned, five parked; a busy machine saw a sleep(0) fiber finish during
 * a Fiber.schedule) and its reference scheduler run them only once the
 * thread reaches `run` (or the scheduler's close). docs/contracts.md. */
static int give_turn(farce_loop *l)
{
    farce_sched *s = (farce_sched *)l;
    if (!farce_loop_can_park(l)) return 0;
    yield_fiber(s, 1);
    return 1;
}

struct start_args {
    farce_sched *s;
    VALUE fiber, previous;
};

static VALUE start_body(VALUE p)
{
    struct start_args *a = (struct start_args *)p;
    VALUE first = rb_fiber_resume(a->fiber, 0, NULL);
    drop_held_raise(a->s, a->fiber);
    return first;
}

static VALUE start_ensure(VALUE p)
{
    struct start_args *a = (struct start_args *)p;
    a->s->turn_fiber = a->previous;
    return Qnil;
}

/* call-seq: __start(fiber) -> whatever the fiber first yields
 * Fiber.schedule's first resume of a new fiber: its turn until it first
 * parks (which returns here) or ends; the spawner's turn goes on after. */
static VALUE sched_start(VALUE self, VALUE fiber)
{
    farce_sched *s = sched_of(self);
    struct start_args a = {s, fiber, s->turn_fiber};
    s->turn_fiber = fiber;
    return rb_ensure(start_body, (VALUE)&a, start_ensure, (VALUE)&a);
}

/* call-seq: __restore_errinfo(exception) -> nil
 * Sets $! back to exception: scheduler_close at thread exit (Ruby reads the
 * thread's exception from there once the hook returned, and Ruby code such
 * as a `break` out of a block clears it). */
static VALUE sched_restore_errinfo(VALUE self, VALUE exception)
{
    if (rb_obj_is_kind_of(exception, rb_eException)) rb_set_errinfo(exception);
    return Qnil;
}

/* call-seq: __turn_check -> nil
 * Fiber.schedule's turn check (Scheduler#fiber): the loop gets its turn
 * before the new fiber starts when the caller held it past the budget. */
static VALUE sched_turn_check(VALUE self)
{
    farce_sched *s = sched_of(self);
    if (!live(s)) return Qnil; /* a closed scheduler raises in the fiber's hooks */
    /* Only the loop's own thread may poll it (its driver state is not
     * synchronised): an idle
     * loop moves to the calling thread, as at any hook; Fiber.schedule
     * called by hand on another thread's busy scheduler gets no turn here
     * (the new fiber's hooks raise) */
    if (!farce_loop_try_claim(&s->loop)) return Qnil;
    /* Fiber.schedule outside the loop's turns (Farce.run's first fiber, a
     * spawner before `run`): application code runs on the loop's thread,
     * which the stall watchdog must see as a turn */
    if (s->loop.stall.turns && !s->loop.stall.turns->active) farce_loop_turn_begins(&s->loop);
    farce_loop_turn_check(&s->loop);
    return Qnil;
}

/* call-seq: __turn_budget=(seconds or nil) */
static VALUE sched_set_turn_budget(VALUE self, VALUE seconds)
{
    sched_of(self)->loop.turns.budget_ns = farce_turn_budget_ns(seconds);
    return seconds;
}

/* call-seq: __stall_threshold=(seconds or nil)
 * Stall detection on (seconds > 0) or off; reports go to __report_stall
 * (lib/farce/stall.rb). */
static VALUE sched_set_stall_threshold(VALUE self, VALUE seconds)
{
    farce_loop_watch_stalls(&get_sched(self)->loop, farce_turn_budget_ns(seconds));
    return seconds;
}

/* ---- hooks: waits ---------------------------------------------------------- */

/* call-seq: io_wait(io, events, timeout) -> events or false */
static VALUE sched_io_wait(VALUE self, VALUE io, VALUE events, VALUE timeout)
{
    farce_sched *s = get_sched(self);
    io = rb_io_get_io(io);
    /* first: a turn runs other fibers, and one of them may close io, and
     * its number may be a new IO's by the time this one waits (or name
     * another file: then this wait, asked for the old one, raises) */
    farce_loop_turn_check_on(&s->loop, io);
    int fd = farce_io_descriptor(io);
    int ev = NUM2INT(events);
    if (ev <= 0 || (ev & ~(RUBY_IO_READABLE | RUBY_IO_PRIORITY | RUBY_IO_WRITABLE))) {
        rb_raise(rb_eArgError, "io_wait: invalid events %d for fd %d (use IO::READABLE, IO::PRIORITY, IO::WRITABLE)", ev, fd);
    }
    int64_t tmo = farce_timeout_ns(timeout);
    farce_fd_ent *f = farce_fd_table_entry(&s->loop.fds, s->loop.handle, s->loop.backend, io, fd);
    if (!f->pollable) {
        /* no kernel wait: a regular file is always ready; on Windows
         * anything but a socket is polled (steps_windows.c) */
        int64_t got = f->steps->wait(&s->loop, io, fd, ev, tmo);
        return got == FARCE_RESUMED_ELSEWHERE ? INT2NUM(ev) : got > 0 ? LL2NUM(got) : Qfalse;
    }
    int64_t r = farce_loop_wait_fd(&s->loop, fd, (uint32_t)ev, tmo, FARCE_KNOWN_NOTHING);
    /* switched to by hand: report it ready, the caller's next call finds out */
    if (r == FARCE_RESUMED_ELSEWHERE) return INT2NUM(ev);
    /* closed while this fiber waited or sat ready in the loop's batch: the
     * readiness (or its absence) was the descriptor's, not io's (the Ruby
     * core and a thread without a scheduler raise too) */
    if (farce_io_fd_or_closed(io) != fd) farce_raise_closed(fd);
    return r > 0 ? LL2NUM(r) : Qfalse;
}

#if defined(RUBY_FIBER_SCHEDULER_VERSION) && RUBY_FIBER_SCHEDULER_VERSION >= 2
/* Ruby 3.2+: io_read(io, buffer, length, offset) */
static VALUE sched_io_read(VALUE self, VALUE io, VALUE buffer, VALUE length, VALUE offset)
{
    return farce_io_transfer(&get_sched(self)->loop, io, buffer, length, NUM2SIZET(offset), -1, FARCE_READ);
}
static VALUE sched_io_write(VALUE self, VALUE io, VALUE buffer, VALUE length, VALUE offset)
{
    return farce_io_transfer(&get_sched(self)->loop, io, buffer, length, NUM2SIZET(offset), -1, FARCE_WRITE);
}
#define IO_RW_ARITY 4
#else
/* Ruby 3.1: io_read(io, buffer, length) */
static VALUE sched_io_read(VALUE self, VALUE io, VALUE buffer, VALUE length)
{
    return farce_io_transfer(&get_sched(self)->loop, io, buffer, length, 0, -1, FARCE_READ);
}
static VALUE sched_io_write(VALUE self, VALUE io, VALUE buffer, VALUE length)
{
    return farce_io_transfer(&get_sched(self)->loop, io, buffer, length, 0, -1, FARCE_WRITE);
}
#define IO_RW_ARITY 3
#endif

/* Ruby 4.1: io_read(io, buffer, offset, length), one transfer that never
 * waits (io_transfer_v4.c); on older Rubies __io_read_v4 (tests). */
static VALUE sched_io_read_v4(VALUE self, VALUE io, VALUE buffer, VALUE offset, VALUE length)
{
    return farce_io_transfer_once(&get_sched(self)->loop, io, buffer, offset, length, -1, FARCE_READ);
}
static VALUE sched_io_write_v4(VALUE self, VALUE io, VALUE buffer, VALUE offset, VALUE length)
{
    return farce_io_transfer_once(&get_sched(self)->loop, io, buffer, offset, length, -1, FARCE_WRITE);
}

/* Whether the current fiber was unblocked before it blocked (see
 * early_unblocks): it must not park then. */
static int unblocked_early(farce_sched *s)
{
    if (RB_LIKELY(!s->early_unblocks->num_entries)) return 0;
    st_data_t fiber = (st_data_t)rb_fiber_current();
    return st_delete(s->early_unblocks, &fiber, NULL);
}

/* call-seq: kernel_sleep(duration = nil) -> true */
static VALUE sched_kernel_sleep(int argc, VALUE *argv, VALUE self)
{
    farce_sched *s = get_sched(self);
    rb_check_arity(argc, 0, 1);
    int64_t tmo = argc == 1 ? farce_timeout_ns(argv[0]) : -1;
    if (RB_UNLIKELY(!farce_loop_can_park(&s->loop))) {
        /* called by hand from a blocking fiber: the thread sleeps, as
         * Kernel#sleep does without a scheduler: nobody would resume a
         * blocking fiber that switched to the loop */
        if (tmo < 0) {
            rb_thread_sleep_forever();
        } else {
            struct timeval tv = {(time_t)(tmo / 1000000000LL), (suseconds_t)((tmo % 1000000000LL) / 1000)};
            rb_thread_wait_for(tv);
        }
        return Qtrue;
    }
    if (tmo != 0 && unblocked_early(s)) return Qtrue;
    /* untimed (Mutex#sleep, ConditionVariable#wait): no call into Go */
    uint64_t token = tmo < 0 ? farce_loop_defer_park(&s->loop) : 0;
    if (!token) {
        int64_t r = tmo == 0 ? farce_core_yield(s->loop.core, s->loop.handle, 0, &token)
                             : farce_core_park(s->loop.core, s->loop.handle, tmo, &token);
        if (r < 0) farce_loop_raise(&s->loop, r, "sleep");
    }
    /* registered for unblock: Mutex#sleep and ConditionVariable#wait park in
     * kernel_sleep and are woken by `unblock` */
    farce_loop_park_parkable(&s->loop, token, FARCE_WAIT_FIBER, Qtrue);
    return Qtrue;
}

/* call-seq: block(blocker, timeout = nil) -> true (woken) or false (timed out) */
static VALUE sched_block(int argc, VALUE *argv, VALUE self)
{
    farce_sched *s = get_sched(self);
    rb_check_arity(argc, 1, 2);
    /* A negative timeout times out at once, as Queue#pop(timeout:),
     * SizedQueue#push(timeout:) and Thread#join(limit) do without a
     * scheduler (they return nil): Ruby hands it to this hook unchecked.
     * NaN still raises (without a scheduler, Queue#pop sleeps for ever).
     * Converted before the look for an early unblock: a Numeric's own
     * to_f is Ruby code, and another thread's unblock may run during it. */
    int negative = argc == 2 && !NIL_P(argv[1]) && NUM2DBL(argv[1]) < 0;
    int64_t tmo = argc == 2 && !negative ? farce_timeout_ns(argv[1]) : -1;
    if (unblocked_early(s)) return Qtrue;
    if (negative) return Qfalse;
    VALUE blocker = NIL_P(argv[0]) ? Qtrue : argv[0];
    /* untimed (Queue#pop, Mutex#lock): a reserved token, no call into Go;
     * the fiber must be able to park before it takes one */
    uint64_t token = tmo < 0 && farce_loop_can_park(&s->loop) ? farce_loop_defer_park(&s->loop) : 0;
    int64_t result;
    if (token) {
        result = farce_loop_park_parkable(&s->loop, token, FARCE_WAIT_FIBER, blocker);
    } else {
        int64_t r = farce_core_park(s->loop.core, s->loop.handle, tmo, &token);
        if (r < 0) farce_loop_raise(&s->loop, r, "block");
        result = farce_loop_park(&s->loop, token, FARCE_WAIT_FIBER, blocker); /* refuses a fiber that cannot park */
    }
    return result == FARCE_RESULT_TIMED_OUT ? Qfalse : Qtrue;
}

/* call-seq: unblock(blocker, fiber) -> nil
 * Safe from any thread: another thread queues the wakeup for the loop and
 * interrupts its kernel wait. */
static VALUE sched_unblock(VALUE self, VALUE blocker, VALUE fiber)
{
    farce_sched *s = sched_of(self);
    if (!live(s)) return Qnil;
    st_data_t token;
    if (!st_lookup(s->loop.blocked, (st_data_t)fiber, &token)) {
        /* not blocked yet (or any more): remember it for its next block */
        if (rb_obj_is_fiber(fiber) && RTEST(rb_fiber_alive_p(fiber))) st_insert(s->early_unblocks, (st_data_t)fiber, 1);
        return Qnil;
    }
    if (rb_thread_current() == s->loop.thread) {
        farce_loop_wake(&s->loop, (uint64_t)token); /* at the next poll, before its timers */
        return Qnil;
    }
    if (s->inbox_len == s->inbox_cap) {
        long cap = s->inbox_cap ? s->inbox_cap * 2 : 16;
        REALLOC_N(s->inbox, uint64_t, cap);
        s->inbox_cap = cap;
    }
    s->inbox[s->inbox_len++] = (uint64_t)token;
    farce_write_wake(&s->loop.wake_fd);
    return Qnil;
}

/* call-seq: __alarm(fiber, seconds, exception_class, arguments) -> token
 * After `seconds`, raise exception_class.exception(*arguments) in fiber.
 * The entry's extra is [deadline, exception_class, *arguments]: the
 * deadline (farce_monotonic_ns; INT64_MAX for none) is for
 * __raise_held_alarms. */
static VALUE sched_alarm(VALUE self, VALUE fiber, VALUE seconds, VALUE klass, VALUE args)
{
    farce_sched *s = get_sched(self);
    int64_t tmo = farce_timeout_ns(seconds);
    Check_Type(args, T_ARRAY);
    int64_t deadline = tmo < 0 ? INT64_MAX : farce_monotonic_ns() + tmo;
    uint64_t token = 0;
    int64_t r = farce_core_park(s->loop.core, s->loop.handle, tmo, &token);
    if (r < 0) farce_loop_raise(&s->loop, r, "timeout");
    farce_wait *e = farce_loop_wait_at(&s->loop, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = FARCE_WAIT_ALARM;
    e->fiber = fiber;
    e->extra = rb_ary_freeze(rb_ary_plus(rb_ary_new_from_args(2, LL2NUM(deadline), klass), args));
    return ULL2NUM(token);
}

/* How long an alarm past its due time waits for the next look while its
 * fiber is not the one running: the loop raises it when it comes back, and
 * until then another fiber holds the thread. The longer that lasts, the
 * less often it is looked at (from grace up to 0.1 s), so a thread held
 * for minutes does not wake the watcher a hundred times a second; looked
 * at, because the loop may come back and resume this fiber for another
 * reason, ahead of its alarm in the same batch, and the fiber may hold the
 * thread then. */
static int64_t overdue_look_ns(int64_t overdue, int64_t grace)
{
    int64_t look = overdue < grace ? grace : overdue;
    return look > 100000000 ? 100000000 : look;
}

/* Raises the alarm at slot into the loop's thread (Thread#raise: it is
 * queued for that thread and interrupts what it waits in), if it is still
 * pending and its fiber still holds the thread. The exception is made
 * first: exception_class.exception(*arguments) may run Ruby code, and
 * another thread (the loop's) with it, so the entry is looked at again
 * after. Thread#raise calls the exception's #exception (Ruby code in
 * Timeout's classes), where Ruby may let the loop's thread run before the
 * exception is queued: s->held makes that fiber's turn wait for it
 * (take_held_raise). The entry's fiber is cleared first: the loop's
 * dispatch skips an entry without a fiber (farce_loop_next), so the alarm
 * is raised once, and __cancel_alarm in timeout_after's ensure still frees
 * it. */
static VALUE thread_raise(VALUE p)
{
    farce_sched *s = (farce_sched *)p;
    return rb_funcall(s->loop.thread, id_raise, 1, s->held.exception);
}

static void raise_held_alarm(farce_sched *s, uint32_t slot)
{
    farce_loop *l = &s->loop;
    uint32_t gen = l->waits[slot].gen;
    VALUE fiber = l->waits[slot].fiber, alarm = l->waits[slot].extra;
    VALUE exception = rb_make_exception((int)RARRAY_LEN(alarm) - 1, RARRAY_CONST_PTR(alarm) + 1);
    if (!live(s) || l->closed || slot >= l->nwaits || s->turn_fiber != fiber) return;
    farce_wait *e = &l->waits[slot];
    if (e->gen != gen || e->kind != FARCE_WAIT_ALARM || e->fiber != fiber) return;
    e->fiber = Qfalse;
    s->held.fiber = fiber;
    s->held.exception = exception;
    s->held.raising = 1;
    int state = 0;
    rb_protect(thread_raise, (VALUE)s, &state);
    s->held.raising = 0;
    RB_GC_GUARD(alarm);
    RB_GC_GUARD(fiber);
    if (state) rb_jump_tag(state);
}

/* A fiber whose turn ends (it parks: yield_to_loop) or whose alarm is
 * cancelled (its Timeout block is over) while the watcher raises into it
 * takes that exception first, here, where it is still the fiber it is for.
 * The watcher checked that this fiber held the thread, but Thread#raise can
 * let this thread run before it queues the exception (it calls the
 * exception's #exception, Ruby code where Ruby may switch threads), and once
 * queued, Ruby raises it at the thread's next interrupt check, wherever that
 * is: in the loop (out of Farce.run) or in the next fiber, when the turn
 * had ended by then. So the turn waits for the watcher to have queued it
 * (rb_thread_schedule gives the watcher the GVL) and checks: the exception
 * is raised here, or was already. Nothing between the watcher's check and
 * its s->held, nor between this one's turn_fiber and s->held, lets another
 * thread run (no Ruby code, no interrupt check), so one of the two sees the
 * other. */
static VALUE wait_for_the_watcher(VALUE p)
{
    farce_sched *s = (farce_sched *)p;
    while (s->held.raising) rb_thread_schedule();
    rb_thread_check_ints(); /* it looks at the thread's queue itself, whichever fiber the flag was set on */
    return Qnil;
}

static void take_held_raise_now(farce_sched *s)
{
    s->held.fiber = s->held.exception = Qnil;
    wait_for_the_watcher((VALUE)s);
}
/* (every park asks: the test is inlined, the rest is not) */
static inline void take_held_raise(farce_sched *s, VALUE fiber)
{
    if (RB_UNLIKELY(s->held.fiber == fiber)) take_held_raise_now(s);
}

/* The loop (or a spawner), once a fiber's turn ended without a park or its
 * alarm's cancel (it was switched away from by hand, or ended by an
 * exception of its own past its Timeout's ensure) while the watcher raised
 * into it: that exception, meant for a turn that is over, is taken here and
 * dropped; anything else raised meanwhile goes on. */
static void drop_held_raise_now(farce_sched *s)
{
    VALUE exception = s->held.exception;
    s->held.fiber = s->held.exception = Qnil;
    int state = 0;
    rb_protect(wait_for_the_watcher, (VALUE)s, &state);
    if (!state) return;
    if (rb_errinfo() != exception) rb_jump_tag(state);
    rb_set_errinfo(Qnil);
    RB_GC_GUARD(exception);
}
/* (after every fiber the loop resumes: the test is inlined) */
static inline void drop_held_raise(farce_sched *s, VALUE fiber)
{
    if (RB_UNLIKELY(s->held.fiber == fiber)) drop_held_raise_now(s);
}

/* call-seq: __raise_held_alarms(grace) -> seconds until the next look, or nil
 * For Farce::HeldAlarms' watcher thread (lib/farce/held_alarms.rb), never
 * the loop's: when an alarm is more than grace seconds past its deadline
 * and its fiber is the one running (s->turn_fiber: the loop has not come
 * back since, so it could not raise it), raises it into the loop's thread,
 * as Timeout does without a scheduler. A fiber that holds the thread in a
 * C call that waits without asking the scheduler (a blocking fiber's
 * sleep, Ruby 3.4's Happy Eyeballs connect) is interrupted there. The
 * watcher gets the GVL only where the loop's thread lets it go: a fiber
 * that parks is never raised into from here (the loop raises its alarm at
 * its wait), and one that runs Ruby code without letting the loop back is
 * raised into at Ruby's next thread switch (100 ms time slices), as
 * without a scheduler. One alarm per look, the
 * earliest (the innermost Timeout); nested ones follow at later looks if
 * their fiber still holds the thread. With the GVL: the loop's thread is
 * in a wait without it, or waiting for it, so its state holds still. */
static VALUE sched_raise_held_alarms(VALUE self, VALUE grace_v)
{
    farce_sched *s = sched_of(self);
    farce_loop *l = &s->loop;
    /* on the loop's own thread Thread#raise would raise right here */
    if (!live(s) || l->closed || rb_thread_current() == l->thread) return Qnil;
    int64_t grace = farce_timeout_ns(grace_v), now = farce_monotonic_ns(), next = INT64_MAX;
    if (grace < 0) grace = 0;
    VALUE holder = s->turn_fiber;
    uint32_t held = UINT32_MAX;
    int64_t held_deadline = INT64_MAX;
    for (uint32_t i = 0; i < l->nwaits; i++) {
        const farce_wait *e = &l->waits[i];
        if (!e->gen || e->kind != FARCE_WAIT_ALARM || !e->fiber) continue;
        int64_t deadline = NUM2LL(RARRAY_AREF(e->extra, 0));
        if (deadline == INT64_MAX) continue; /* never due */
        int64_t overdue = now - deadline - grace, look;
        if (overdue < 0) {
            look = -overdue;
        } else if (e->fiber == holder && !NIL_P(holder)) {
            if (deadline < held_deadline) {
                held = i;
                held_deadline = deadline;
            }
            continue;
        } else if (s->running) {
            look = overdue_look_ns(overdue, grace);
        } else {
            /* outside `run` (the thread's own code holds it) nothing
             * resumes the fiber before the loop runs again, which raises
             * the alarm itself; no look meanwhile, so that a watcher
             * asleep for good lets Ruby see a deadlock of that code */
            continue;
        }
        if (look < next) next = look;
    }
    if (held != UINT32_MAX) {
        raise_held_alarm(s, held);
        if (next > grace) next = grace; /* a nested alarm of the same fiber, or the loop's next look */
    }
    return next == INT64_MAX ? Qnil : DBL2NUM((double)next / 1e9);
}

/* call-seq: __cancel_alarm(token) -> nil */
static VALUE sched_cancel_alarm(VALUE self, VALUE token_v)
{
    farce_sched *s = sched_of(self);
    uint64_t token = NUM2ULL(token_v);
    uint32_t slot = farce_token_slot(token);
    farce_loop *l = &s->loop;
    if (slot < l->nwaits && l->waits[slot].gen == farce_token_gen(token) && l->waits[slot].kind == FARCE_WAIT_ALARM) {
        memset(&l->waits[slot], 0, sizeof(farce_wait));
        if (live(s)) {
            farce_core_cancel(l->core, l->handle, token);
        }
    }
    /* a raise the watcher started before the block ended lands here, in
     * the Timeout's ensure, as Timeout's own thread's may without a
     * scheduler: the deadline had passed */
    if (RB_UNLIKELY(!NIL_P(s->held.fiber))) take_held_raise(s, rb_fiber_current());
    return Qnil;
}

/* call-seq: yield -> nil
 * Ruby 4.0: lets every other ready fiber run, then resumes the caller on the
 * next loop iteration. Unlike kernel_sleep(0), `unblock` cannot end it. */
static VALUE sched_yield(VALUE self)
{
    yield_fiber(get_sched(self), 0);
    return Qnil;
}

/* Whether target can be interrupted: a Fiber, or what Ruby 4.1 passes in
 * its place (ruby/ruby#18793), an object standing for one blocking
 * operation that answers alive? (the operation is still going on), raise
 * (into its fiber, while it is) and transfer. */
static int interrupt_target_p(VALUE target)
{
    return rb_obj_is_fiber(target) ||
           (rb_respond_to(target, id_alive_p) && rb_respond_to(target, id_raise) && rb_respond_to(target, id_transfer));
}

/* call-seq: fiber_interrupt(fiber, exception) -> nil
 * Ruby 4.0 (IO#close on an IO that fibers are blocked on): raise exception
 * (an Exception or a class) in fiber, which is blocked in one of this
 * scheduler's waits. Ruby 4.1 may pass an operation's stand-in instead of
 * the Fiber (interrupt_target_p). Safe from any thread: the loop raises
 * it, after waking up if it was waiting in the kernel. */
static VALUE sched_fiber_interrupt(VALUE self, VALUE fiber, VALUE exception)
{
    farce_sched *s = sched_of(self);
    if (!interrupt_target_p(fiber)) {
        rb_raise(rb_eTypeError, "fiber_interrupt: %"PRIsVALUE" is not a Fiber, nor answers alive?, raise and transfer",
                 rb_obj_class(fiber));
    }
    if (!live(s)) return Qnil;
    if (fiber == rb_fiber_current()) rb_exc_raise(rb_make_exception(1, &exception));
    if (!RTEST(rb_obj_is_fiber(fiber) ? rb_fiber_alive_p(fiber) : rb_funcall(fiber, id_alive_p, 0))) return Qnil;
    rb_ary_push(s->interrupts, rb_assoc_new(fiber, exception));
    if (rb_thread_current() != s->loop.thread) farce_write_wake(&s->loop.wake_fd);
    return Qnil;
}

/* call-seq: io_close(io_or_descriptor) -> nil
 * Ruby 4.0 calls this just before it closes a descriptor: fibers waiting on
 * it are woken at once and raise IOError, and its registration is dropped.
 * Returns nil so that Ruby closes the descriptor itself. From a thread other
 * than the scheduler's, nothing is done here: the close scan finds it. */
static VALUE sched_io_close(VALUE self, VALUE target)
{
    farce_loop_io_close(&sched_of(self)->loop, target);
    return Qnil;
}

/* call-seq: __select_ready(io, events) -> events ready now (0 if none)
 * For io_select: what the kernel reports this instant, through the core's
 * one mapping of POLLHUP and friends (a hang-up is ready for everything
 * asked), ignoring what the core remembers of the descriptor; plus READABLE
 * when Ruby holds buffered input for the IO (as IO.select counts it). Never
 * parks. */
static VALUE sched_select_ready(VALUE self, VALUE io, VALUE events)
{
    farce_sched *s = get_sched(self);
    rb_io_t *fptr;
    io = rb_io_get_io(io);
    GetOpenFile(io, fptr);
    rb_io_check_closed(fptr);
    int ev = NUM2INT(events) & (RUBY_IO_READABLE | RUBY_IO_PRIORITY | RUBY_IO_WRITABLE), got = 0;
    if ((ev & RUBY_IO_READABLE) && rb_io_read_pending(fptr)) got |= RUBY_IO_READABLE;
    if (!(ev & ~got)) return INT2NUM(got);
    int without_core = farce_ready_without_core(farce_io_descriptor(io), ev & ~got);
    if (without_core >= 0) return INT2NUM(got | without_core);
    int64_t r = farce_core_probe(s->loop.core, farce_io_descriptor(io), (uint32_t)(ev & ~got));
    if (r == -EBADF) rb_raise(rb_eIOError, "closed stream");
    if (r < 0) farce_loop_raise(&s->loop, r, "IO.select");
    if (r > 0) got |= (int)r & ev;
    return INT2NUM(got);
}

/* call-seq: __process_wait(pid, flags) -> Process::Status, nil (WNOHANG),
 * false (switched to by hand: call again), or :thread when the loop cannot
 * wait for this process (no pidfd): lib/farce/scheduler.rb then waits in a
 * thread. */
static VALUE sched_process_wait(VALUE self, VALUE pid, VALUE flags)
{
    VALUE status = farce_loop_process_wait(&get_sched(self)->loop, pid, flags);
    return status == Qundef ? ID2SYM(rb_intern("thread")) : status;
}

void farce_fiber_scheduler_init(VALUE mFarce)
{
    cScheduler = rb_define_class_under(mFarce, "Scheduler", rb_cObject);
    cFiber = rb_const_get(rb_cObject, rb_intern("Fiber"));
    id_blocking_p = rb_intern("blocking?");
    id_alive_p = rb_intern("alive?");
    id_raise = rb_intern("raise");
    id_transfer = rb_intern("transfer");
    rb_define_alloc_func(cScheduler, sched_alloc);

    rb_define_private_method(cScheduler, "__open", sched_open, 1);
    rb_define_private_method(cScheduler, "__release", sched_release, 0);
    rb_define_private_method(cScheduler, "__fiber_started", sched_fiber_started, 0);
    rb_define_private_method(cScheduler, "__fiber_finished", sched_fiber_finished, 0);
    rb_define_private_method(cScheduler, "__alarm", sched_alarm, 4);
    rb_define_private_method(cScheduler, "__cancel_alarm", sched_cancel_alarm, 1);
    rb_define_private_method(cScheduler, "__raise_held_alarms", sched_raise_held_alarms, 1);
    rb_define_private_method(cScheduler, "__offload", sched_offload, 1);
    rb_define_private_method(cScheduler, "__process_wait", sched_process_wait, 2);
    rb_define_private_method(cScheduler, "__turn_check", sched_turn_check, 0);
    rb_define_private_method(cScheduler, "__start", sched_start, 1);
    rb_define_private_method(cScheduler, "__restore_errinfo", sched_restore_errinfo, 1);
    rb_define_private_method(cScheduler, "__parked_fibers", sched_parked_fibers, 0);
    rb_define_private_method(cScheduler, "__unwind_turn", sched_unwind_turn, 0);
    rb_define_private_method(cScheduler, "__turn_budget=", sched_set_turn_budget, 1);
    rb_define_private_method(cScheduler, "__stall_threshold=", sched_set_stall_threshold, 1);

    rb_define_method(cScheduler, "run", sched_run, 0);
    rb_define_method(cScheduler, "closed?", sched_closed_p, 0);
    rb_define_method(cScheduler, "backend", sched_backend, 0);
    rb_define_method(cScheduler, "fallback_reason", sched_fallback_reason, 0);
    rb_define_method(cScheduler, "stats", sched_stats, 0);

    rb_define_method(cScheduler, "io_wait", sched_io_wait, 3);
#if FARCE_SINGLE_TRANSFER_HOOKS
    rb_define_method(cScheduler, "io_read", sched_io_read_v4, 4);
    rb_define_method(cScheduler, "io_write", sched_io_write_v4, 4);
    (void)sched_io_read; /* the version 2/3 forms: unused on this Ruby */
    (void)sched_io_write;
#else
    rb_define_method(cScheduler, "io_read", sched_io_read, IO_RW_ARITY);
    rb_define_method(cScheduler, "io_write", sched_io_write, IO_RW_ARITY);
#endif
    /* the version 4 forms under their own names on every Ruby (tests) */
    rb_define_private_method(cScheduler, "__io_read_v4", sched_io_read_v4, 4);
    rb_define_private_method(cScheduler, "__io_write_v4", sched_io_write_v4, 4);
    /* which form io_read/io_write/io_pread/io_pwrite have in this build */
    rb_define_const(mFarce, "SINGLE_TRANSFER_HOOKS", FARCE_SINGLE_TRANSFER_HOOKS ? Qtrue : Qfalse);
    rb_define_method(cScheduler, "kernel_sleep", sched_kernel_sleep, -1);
    rb_define_method(cScheduler, "block", sched_block, -1);
    rb_define_method(cScheduler, "unblock", sched_unblock, 2);
    rb_define_method(cScheduler, "yield", sched_yield, 0);
    rb_define_method(cScheduler, "fiber_interrupt", sched_fiber_interrupt, 2);
    rb_define_method(cScheduler, "io_close", sched_io_close, 1);
    rb_define_private_method(cScheduler, "__select_ready", sched_select_ready, 2);
    farce_offload_init(mFarce, cScheduler, file_ops_loop);
}
