//go:build ignore

/*
 * farce's Ruby extension: the Fiber::Scheduler hooks that run often, written
 * against Ruby's C API, forwarding waits to the Go core (farce_core.h).
 *
 * What lives here and why (DESIGN.md): this file owns every Ruby VALUE. The
 * Go core names waits by tokens (slot + generation); `slots` maps a slot to
 * the fiber parked on it, and Ruby's GC marks that table. Go never switches
 * fibers or raises: every export returns, then this file switches or raises.
 * Blocking waits run without the GVL and are interrupted by writing to the
 * core's wakeup descriptor.
 *
 * The build (`//go:build ignore` above) keeps Go from compiling this file;
 * extconf.rb compiles it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/io/buffer.h>
#include <ruby/thread.h>
#include <ruby/fiber/scheduler.h>
#include "core_loader.h"
#include "selector.h"
#include "fd_table.h"
#include "glue.h"

#define RAISE_CORE(s, code, what) farce_raise_core_error((s)->handle, (code), (what), (s)->backend)

void farce_offload_init(VALUE mFarce, VALUE cScheduler); /* offload.c */

VALUE farce_eError;
static VALUE cScheduler;
static ID id_raise;

#define BATCH 128                /* fairness budget: fibers resumed per poll */
#define CLOSE_SCAN_NS 50000000LL /* how often parked descriptors are checked for close */

/* KIND_OP: a completion operation (io_uring read/write) whose memory the
 * kernel owns until its completion is reaped; extra pins the IO::Buffer. */
enum slot_kind { KIND_NONE, KIND_FIBER, KIND_FD_FIBER, KIND_ALARM, KIND_OP };

/* What the shim keeps for one Go wait slot. */
typedef struct {
    uint32_t gen;     /* generation of the token parked here; 0 when empty */
    uint8_t kind;
    VALUE fiber;      /* fiber to resume (alarm: fiber to raise in) */
    VALUE extra;      /* block: the blocker; alarm: [exception class, *arguments] */
} slot_ent;

typedef struct {
    int64_t handle;   /* Go core handle; 0 once released */
    int wake_fd;
    uint64_t fork_generation;
    int running;
    VALUE thread;
    VALUE backend;
    VALUE fallback_reason;
    VALUE interrupts;  /* [fiber, exception] pairs from fiber_interrupt, raised by the loop */
    int ops;           /* the core performs completion operations (io_uring) */

    slot_ent *slots;
    uint32_t nslots;
    farce_fd_table fds; /* descriptor identity and facts */

    farce_completion batch[BATCH];
    int batch_pos, batch_len;

    st_table *blocked; /* fiber -> token of its `block` wait */
    uint64_t *inbox;   /* tokens woken by other threads, applied by the loop */
    long inbox_len, inbox_cap;

    long offloads;     /* jobs on worker threads that fibers wait for */
    long live_fibers;  /* started by Fiber.schedule, not finished */
    long parked;       /* fibers in a wait of ours, resumed or not */
    long fd_parked;    /* of which waiting on a descriptor */
    int64_t last_scan;
} farce_sched;

/* ---- GC ------------------------------------------------------------------ */

static void sched_mark(void *p)
{
    farce_sched *s = p;
    rb_gc_mark(s->thread);
    rb_gc_mark(s->backend);
    rb_gc_mark(s->fallback_reason);
    rb_gc_mark(s->interrupts);
    for (uint32_t i = 0; i < s->nslots; i++) {
        if (s->slots[i].gen) {
            rb_gc_mark(s->slots[i].fiber); /* pinned: the blocked table is keyed by address */
            rb_gc_mark(s->slots[i].extra);
        }
    }
    farce_fd_table_mark(&s->fds);
}

static void sched_free(void *p)
{
    farce_sched *s = p;
    if (s->handle && s->fork_generation == farce_fork_generation) {
        farce_core_release_later(s->handle);
    }
    if (s->blocked) st_free_table(s->blocked);
    xfree(s->slots);
    farce_fd_table_free(&s->fds);
    xfree(s->inbox);
    xfree(s);
}

static size_t sched_memsize(const void *p)
{
    const farce_sched *s = p;
    return sizeof(*s) + s->nslots * sizeof(slot_ent) + farce_fd_table_memsize(&s->fds) + s->inbox_cap * sizeof(uint64_t);
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
    s->thread = s->backend = s->fallback_reason = Qnil;
    s->interrupts = rb_ary_new();
    s->blocked = st_init_numtable();
    return obj;
}

/* ---- helpers -------------------------------------------------------------- */

static int sched_inert(const farce_sched *s) { return s->fork_generation != farce_fork_generation; }

/* The scheduler behind self, or an exception saying why it cannot be used. */
static farce_sched *get_sched(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (sched_inert(s)) {
        rb_raise(farce_eError, "this Farce::Scheduler was created before fork and is inert in the child; "
                 "create a new scheduler after fork");
    }
    if (!s->handle) rb_raise(farce_eError, "scheduler is closed");
    return s;
}

/* Ruby timeout (nil or seconds) to nanoseconds; -1 means none. */
static int64_t timeout_ns(VALUE timeout)
{
    if (NIL_P(timeout)) return -1;
    double d = NUM2DBL(timeout);
    if (d != d) rb_raise(rb_eArgError, "timeout is NaN");
    if (d < 0) rb_raise(rb_eArgError, "timeout must not be negative (got %f)", d);
    if (d > 9.0e9) return -1; /* centuries: as good as forever, and no overflow */
    return (int64_t)(d * 1e9);
}

static slot_ent *slot_at(farce_sched *s, uint32_t slot)
{
    if (slot >= s->nslots) s->slots = farce_slot_table_grow(s->slots, &s->nslots, slot, sizeof(slot_ent));
    return &s->slots[slot];
}

/* ---- parking -------------------------------------------------------------- */

static VALUE yield_to_loop(VALUE unused) { return rb_fiber_yield(0, NULL); }

/* Forget a wait whose fiber runs again without the loop having resumed it
 * (an exception was raised into it, or someone resumed it by hand). */
static void abandon_wait(farce_sched *s, uint64_t token)
{
    uint32_t slot = farce_token_slot(token);
    if (slot >= s->nslots) return;
    slot_ent *e = &s->slots[slot];
    if (e->gen != farce_token_gen(token)) return; /* the loop resumed it: nothing to undo */
    if (e->kind == KIND_OP) return; /* never abandoned: see park_op */
    if (e->kind == KIND_FD_FIBER) s->fd_parked--;
    if (e->extra != Qundef && e->extra) {
        st_data_t key = (st_data_t)e->fiber;
        st_delete(s->blocked, &key, NULL);
    }
    memset(e, 0, sizeof(*e));
    s->parked--;
    if (s->handle && !sched_inert(s)) farce_core.cancel(s->handle, token);
}

/* Park the current fiber on token until the loop resumes it; returns the
 * wait's result. An exception raised into the fiber while it is parked
 * cancels the wait and propagates. */
static int64_t park(farce_sched *s, uint64_t token, int kind, VALUE blocker)
{
    VALUE fiber = rb_fiber_current();
    slot_ent *e = slot_at(s, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = (uint8_t)kind;
    e->fiber = fiber;
    e->extra = blocker;
    if (blocker != Qundef) st_insert(s->blocked, (st_data_t)fiber, (st_data_t)token);
    s->parked++;
    if (kind == KIND_FD_FIBER) s->fd_parked++;

    int state = 0;
    VALUE result = rb_protect(yield_to_loop, Qnil, &state);
    if (state) {
        abandon_wait(s, token);
        rb_jump_tag(state);
    }
    slot_ent *now = &s->slots[farce_token_slot(token)];
    if (now->gen == farce_token_gen(token) && now->fiber == fiber) {
        /* resumed by someone other than the loop: a spurious wakeup */
        abandon_wait(s, token);
        return FARCE_RESULT_WOKEN;
    }
    return FIXNUM_P(result) ? FIX2LONG(result) : FARCE_RESULT_WOKEN;
}

/* Park the current fiber on a completion operation (token) whose memory
 * belongs to `pin` (an IO::Buffer), and return the operation's result (bytes
 * or -errno). States of the operation, from the shim's side:
 *   submitted  - slot holds fiber + pin (marked by sched_mark); the kernel
 *                may read or write the memory at any time.
 *   cancelling - an exception (Thread#raise, Timeout, Fiber#raise,
 *                fiber_interrupt) or a close reached the fiber: the core
 *                was asked to cancel (farce_cancel_op), and the fiber parks
 *                again. Its exception is held, later ones are dropped.
 *   reaped     - the loop resumed the fiber with the completion
 *                (resume_completion cleared the slot): the kernel is done.
 *   released   - park_op returns or re-raises the held exception; only now
 *                may the caller's frame (and so the buffer) go away.
 * The fiber never leaves before "reaped". If the scheduler is closed
 * meanwhile, its core cancels and reaps every operation before it releases
 * the ring (URing.Close), and this fiber is never resumed. */
static int64_t park_op(farce_sched *s, uint64_t token, VALUE pin)
{
    VALUE fiber = rb_fiber_current();
    slot_ent *e = slot_at(s, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = KIND_OP;
    e->fiber = fiber;
    e->extra = pin;
    s->parked++;
    s->fd_parked++;

    int held_state = 0;
    VALUE held = Qnil;
    for (;;) {
        int state = 0;
        VALUE result = rb_protect(yield_to_loop, Qnil, &state);
        const slot_ent *now = &s->slots[farce_token_slot(token)];
        if (!(now->gen == farce_token_gen(token) && now->fiber == fiber && now->kind == KIND_OP)) {
            /* reaped: resume_completion cleared the slot and passed the result */
            RB_GC_GUARD(pin);
            if (held_state) {
                if (rb_obj_is_kind_of(held, rb_eException)) rb_exc_raise(held);
                rb_jump_tag(held_state);
            }
            return FIXNUM_P(result) ? FIX2LONG(result) : -EINTR;
        }
        if (state) {
            if (!held_state) {
                held_state = state;
                held = rb_errinfo();
            }
            rb_set_errinfo(Qnil);
            if (s->handle && !sched_inert(s)) farce_core.cancel_op(s->handle, token);
        }
        /* else: resumed by hand (spurious): the operation is still in flight */
    }
}

/* ---- the loop ------------------------------------------------------------- */

static void resume_completion(farce_sched *s, farce_completion c)
{
    uint32_t slot = farce_token_slot(c.token);
    if (slot >= s->nslots) return;
    slot_ent *e = &s->slots[slot];
    if (e->gen != farce_token_gen(c.token) || !e->fiber) return; /* cancelled meanwhile */
    VALUE fiber = e->fiber, extra = e->extra;
    int kind = e->kind;
    memset(e, 0, sizeof(*e));
    if (kind == KIND_ALARM) {
        if (RTEST(rb_fiber_alive_p(fiber))) {
            rb_fiber_raise(fiber, (int)RARRAY_LEN(extra), RARRAY_CONST_PTR(extra));
        }
        return;
    }
    s->parked--;
    if (kind == KIND_FD_FIBER || kind == KIND_OP) s->fd_parked--;
    if (kind != KIND_OP && extra != Qundef && extra) {
        st_data_t key = (st_data_t)fiber;
        st_delete(s->blocked, &key, NULL);
    }
    VALUE arg = LONG2FIX((long)c.result);
    rb_fiber_resume(fiber, 1, &arg);
}

/* Wakeups other threads asked for while they held the GVL. */
static void drain_inbox(farce_sched *s)
{
    for (long i = 0; i < s->inbox_len; i++) farce_core.wake(s->handle, s->inbox[i]);
    s->inbox_len = 0;
}

/* Ruby 3.1-3.4 have no hook for IO#close: every CLOSE_SCAN_NS the loop looks
 * for parked descriptors whose IO was closed and wakes their fibers. */
static void scan_closed(farce_sched *s)
{
    if (!s->fd_parked) return;
    int64_t now = farce_monotonic_ns();
    if (now - s->last_scan < CLOSE_SCAN_NS) return;
    s->last_scan = now;
    farce_fd_table_forget_closed(&s->fds, s->handle);
}

/* Whether fiber is parked in one of this scheduler's waits. */
static int fiber_parked(const farce_sched *s, VALUE fiber)
{
    for (uint32_t i = 0; i < s->nslots; i++) {
        const slot_ent *e = &s->slots[i];
        if (e->gen && e->kind != KIND_ALARM && e->fiber == fiber) return 1;
    }
    return 0;
}

/* Raises the exceptions fiber_interrupt queued into their fibers, oldest
 * first. A fiber parked in one of our waits leaves it through park()'s
 * rb_protect, which cancels the wait; a fiber no longer parked (it finished,
 * or never waited here) is left alone. An exception the fiber does not
 * rescue propagates out of run, as any fiber's does; the rest stay queued. */
static void deliver_interrupts(farce_sched *s)
{
    while (RARRAY_LEN(s->interrupts) > 0) {
        VALUE pair = rb_ary_shift(s->interrupts);
        VALUE fiber = RARRAY_AREF(pair, 0), exception = RARRAY_AREF(pair, 1);
        if (!fiber_parked(s, fiber) || !RTEST(rb_fiber_alive_p(fiber))) continue;
        rb_fiber_raise(fiber, 1, &exception);
        if (!s->handle) return;
    }
}

static VALUE run_loop(VALUE self)
{
    farce_sched *s = get_sched(self);
    for (;;) {
        while (s->batch_pos < s->batch_len) {
            farce_completion c = s->batch[s->batch_pos++];
            resume_completion(s, c); /* may raise: the batch cursor is already past c */
            if (!s->handle) return Qnil;
        }
        /* Worker threads need the GVL to start a job and to hand back its
         * result; a loop that never blocks would make them wait a whole
         * time slice (100 ms) each time. Before the inbox is drained: what
         * they queue there must not wait for the next kernel wakeup. */
        if (s->offloads > 0) rb_thread_schedule();
        if (s->inbox_len) drain_inbox(s);
        if (RARRAY_LEN(s->interrupts)) {
            deliver_interrupts(s); /* may raise, as a fiber's exception does */
            if (!s->handle) return Qnil;
            continue;
        }
        if (s->parked <= 0) return Qnil;
        scan_closed(s);
        int64_t n = farce_core.poll(s->handle, 0, s->batch, BATCH);
        if (n == 0) {
            n = farce_poll_without_gvl(s->handle, &s->wake_fd, s->fd_parked ? CLOSE_SCAN_NS : -1, s->batch, BATCH);
            s->batch_pos = 0;
            s->batch_len = n > 0 ? (int)n : 0;
            rb_thread_check_ints(); /* traps, Thread#raise, Timeout: may raise, batch kept */
        }
        if (n == -EINTR) {
            /* even a zero-timeout poll is interrupted by signals (Ruby's timer) */
            rb_thread_check_ints();
            continue;
        }
        if (n < 0) RAISE_CORE(s, n, "poll");
        s->batch_pos = 0;
        s->batch_len = (int)n;
    }
}

static VALUE run_done(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    s->running = 0;
    return Qnil;
}

/* call-seq: run -> nil
 * Runs the event loop until no fiber waits on this scheduler. */
static VALUE sched_run(VALUE self)
{
    farce_sched *s = get_sched(self);
    if (s->running) rb_raise(farce_eError, "Farce::Scheduler#run is already running (it is not re-entrant)");
    if (!RTEST(rb_funcall(rb_const_get(rb_cObject, rb_intern("Fiber")), rb_intern("blocking?"), 0))) {
        rb_raise(farce_eError, "Farce::Scheduler#run must be called from a blocking fiber (the thread's own), "
                 "not from a fiber the scheduler runs: it is not re-entrant");
    }
    s->running = 1;
    s->thread = rb_thread_current();
    return rb_ensure(run_loop, self, run_done, self);
}

/* ---- construction and release --------------------------------------------- */

/* call-seq: __open(backend_name) -> [backend, fallback_reason] */
static VALUE sched_open(VALUE self, VALUE backend)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (s->handle) rb_raise(farce_eError, "scheduler already initialized");
    farce_core_load();
    farce_core_release_orphans();
    char name[64] = "", reason[512] = "";
    int wake_fd = -1;
    int64_t h = farce_core.new_(StringValueCStr(backend), name, sizeof(name), reason, sizeof(reason), &wake_fd);
    if (h <= 0) rb_raise(farce_eError, "cannot start farce with backend %"PRIsVALUE": %s", backend, reason);
    s->handle = h;
    s->wake_fd = wake_fd;
    s->fork_generation = farce_fork_generation;
    s->thread = rb_thread_current();
    s->backend = ID2SYM(rb_intern(name));
    s->fallback_reason = reason[0] ? rb_str_freeze(rb_str_new_cstr(reason)) : Qnil;
    s->ops = farce_core.ops_supported && farce_core.ops_supported(h) == 1;
    return Qnil;
}

/* call-seq: __release -> nil
 * Frees the Go scheduler and forgets every wait without resuming it. In a
 * forked child it touches only C memory: no Go call, no descriptor closed. */
static VALUE sched_release(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (s->handle && !sched_inert(s)) farce_core.close(s->handle);
    s->handle = 0;
    memset(s->slots, 0, s->nslots * sizeof(slot_ent));
    farce_fd_table_clear(&s->fds);
    st_clear(s->blocked);
    rb_ary_clear(s->interrupts);
    s->batch_pos = s->batch_len = 0;
    s->inbox_len = 0;
    s->parked = s->fd_parked = 0;
    return Qnil;
}

static VALUE sched_closed_p(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    return (!s->handle || sched_inert(s)) ? Qtrue : Qfalse;
}

static VALUE sched_backend(VALUE self) { return ((farce_sched *)rb_check_typeddata(self, &sched_type))->backend; }

static VALUE sched_fallback_reason(VALUE self)
{
    return ((farce_sched *)rb_check_typeddata(self, &sched_type))->fallback_reason;
}

static VALUE sched_fiber_started(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    s->live_fibers++;
    return Qnil;
}

static VALUE sched_fiber_finished(VALUE self)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    s->live_fibers--;
    return Qnil;
}

/* call-seq: __offload(delta) -> nil
 * The worker pool's count of jobs fibers wait for (see run_loop). */
static VALUE sched_offload(VALUE self, VALUE delta)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    s->offloads += NUM2LONG(delta);
    if (s->offloads < 0) s->offloads = 0;
    return Qnil;
}

static VALUE sched_stats(VALUE self)
{
    farce_sched *s = get_sched(self);
    int64_t v[FARCE_STAT_COUNT];
    int64_t r = farce_core.stats(s->handle, v, FARCE_STAT_COUNT);
    if (r < 0) RAISE_CORE(s, r, "stats");
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("backend")), s->backend);
    rb_hash_aset(h, ID2SYM(rb_intern("fibers")), LONG2NUM(s->live_fibers));
    rb_hash_aset(h, ID2SYM(rb_intern("parked_fibers")), LONG2NUM(s->parked));
    rb_hash_aset(h, ID2SYM(rb_intern("pending_waits")), LL2NUM(v[FARCE_STAT_PENDING_WAITS]));
    rb_hash_aset(h, ID2SYM(rb_intern("ready_waits")), LL2NUM(v[FARCE_STAT_READY_WAITS]));
    rb_hash_aset(h, ID2SYM(rb_intern("timers")), LL2NUM(v[FARCE_STAT_TIMERS]));
    rb_hash_aset(h, ID2SYM(rb_intern("registered_descriptors")), LL2NUM(v[FARCE_STAT_REGISTERED_FDS]));
    rb_hash_aset(h, ID2SYM(rb_intern("iterations")), LL2NUM(v[FARCE_STAT_ITERATIONS]));
    rb_hash_aset(h, ID2SYM(rb_intern("completed_waits")), LL2NUM(v[FARCE_STAT_COMPLETED]));
    rb_hash_aset(h, ID2SYM(rb_intern("goroutines")), LL2NUM(v[FARCE_STAT_GOROUTINES]));
    rb_hash_aset(h, ID2SYM(rb_intern("completion_ops")), s->ops ? Qtrue : Qfalse);
    return h;
}

/* ---- hooks: waits ---------------------------------------------------------- */

/* Waits for events on fd; returns ready events, 0 on timeout, raises IOError
 * when the IO is closed meanwhile. */
static int64_t wait_fd(farce_sched *s, int fd, uint32_t events, int64_t tmo, int known)
{
    uint64_t token = 0;
    farce_stack_guard();
    int64_t r = farce_core.wait_fd(s->handle, fd, events, tmo, known, &token);
    if (r > 0) return r;
    if (r < 0) RAISE_CORE(s, r, "wait on descriptor");
    if (tmo == 0) {
        farce_core.cancel(s->handle, token);
        return 0;
    }
    int64_t result = park(s, token, KIND_FD_FIBER, Qundef);
    if (result == FARCE_RESULT_CLOSED) rb_raise(rb_eIOError, "closed stream");
    return result;
}

/* call-seq: io_wait(io, events, timeout) -> events or false */
static VALUE sched_io_wait(VALUE self, VALUE io, VALUE events, VALUE timeout)
{
    farce_sched *s = get_sched(self);
    io = rb_io_get_io(io);
    int fd = farce_io_descriptor(io);
    int ev = NUM2INT(events);
    if (ev <= 0 || (ev & ~(RUBY_IO_READABLE | RUBY_IO_PRIORITY | RUBY_IO_WRITABLE))) {
        rb_raise(rb_eArgError, "io_wait: invalid events %d for fd %d (use IO::READABLE, IO::PRIORITY, IO::WRITABLE)", ev, fd);
    }
    int64_t tmo = timeout_ns(timeout);
    farce_fd_ent *f = farce_fd_table_entry(&s->fds, s->handle, s->backend, io, fd);
    if (!f->pollable) return INT2NUM(ev);
    int64_t r = wait_fd(s, fd, (uint32_t)ev, tmo, FARCE_KNOWN_UNKNOWN);
    return r > 0 ? LL2NUM(r) : Qfalse;
}

/* Whether reads and writes on f go through completion operations: the core
 * performs them (io_uring) and f is a non-blocking socket or pipe. */
static inline int use_ops(const farce_sched *s, const farce_fd_ent *f)
{
    return s->ops && f->stream && f->pollable && !f->blocking;
}

/* IO::Buffer#locked? without raising (3.1 has no C accessor for it). */
static ID id_locked_p;

/* Runs one completion operation on len bytes at ptr, memory owned by
 * buffer, and returns its result (bytes or -errno). The buffer is locked
 * (unless its owner already did) so that it cannot be resized or freed while
 * the kernel uses it, and pinned in the slot table until the completion is
 * reaped (park_op). A cancellation that did not come from an exception
 * (the descriptor was closed) raises IOError, as a closed wait does. */
static int64_t run_op(farce_sched *s, VALUE io, int fd, VALUE buffer, int kind, void *ptr, size_t len)
{
    uint64_t token = 0;
    farce_stack_guard();
    int locked = RTEST(rb_funcall(buffer, id_locked_p, 0));
    if (!locked) rb_io_buffer_lock(buffer);
    int64_t r = farce_core.submit_op(s->handle, kind, fd, (uint64_t)(uintptr_t)ptr, (uint64_t)len, -1, &token);
    if (r < 0) {
        if (!locked) rb_io_buffer_unlock(buffer);
        RAISE_CORE(s, r, kind == FARCE_OP_READ ? "read" : "write");
    }
    /* a pending exception must not reach this fiber between submission
     * and park_op: park_op is the only place that handles it */
    int64_t result = park_op(s, token, buffer);
    if (!locked) rb_io_buffer_unlock(buffer);
    /* Only the core cancels an operation park_op did not: the descriptor
     * was closed (close scan, io_close) or its number changed hands. An
     * operation holds the open file, so one that finished otherwise after
     * the IO was closed (end of file once the peer closed too) is reported
     * as the close, as a readiness wait would. */
    if (result == -ECANCELED || farce_io_fd_or_closed(io) != fd) rb_raise(rb_eIOError, "closed stream");
    return result;
}

enum xfer_dir { XFER_READ, XFER_WRITE };

/* The loop behind io_read and io_write: moves at least `length` bytes
 * between buffer[offset...] and the IO (one successful call when length is
 * 0) and returns the count, or -errno when nothing moved; a read stops early
 * at end of file.
 *
 * A read is tried first unless the last one drained the stream; a blocking
 * descriptor is waited on before every call, so it never blocks the loop.
 * With completion operations (io_uring), an EAGAIN turns the next step into
 * an operation that completes when the kernel can do it: for a read, every
 * later read of that stream too, until one finds it empty (no separate
 * wait, no EAGAIN read); for a write, just the rest of this one (sockets
 * are mostly writable, so a plain write comes first). */
static VALUE xfer(VALUE self, VALUE io, VALUE buffer, VALUE length_v, size_t offset, enum xfer_dir dir)
{
    int reading = dir == XFER_READ;
    farce_sched *s = get_sched(self);
    io = rb_io_get_io(io);
    int fd = farce_io_descriptor(io);
    size_t length = NUM2SIZET(length_v);
    int events = reading ? RUBY_IO_READABLE : RUBY_IO_WRITABLE;
    size_t total = 0;
    int waited = 0; /* the last step was a wait: try the call now, whatever we knew before */
    int op_next = 0;
    for (;;) {
        void *base;
        size_t size;
        if (reading) {
            rb_io_buffer_get_bytes_for_writing(buffer, &base, &size);
        } else {
            const void *readable;
            rb_io_buffer_get_bytes_for_reading(buffer, &readable, &size);
            base = (void *)(uintptr_t)readable; /* only ever written out */
        }
        if (offset > size || length > size - offset) {
            rb_raise(rb_eArgError, "%s: length %zu at offset %zu exceeds the buffer (%zu bytes)",
                     reading ? "io_read" : "io_write", length, offset, size);
        }
        size_t room = size - offset - total;
        if (room == 0) return SIZET2NUM(total);
        char *at = (char *)base + offset + total;
        farce_fd_ent *f = farce_fd_table_entry(&s->fds, s->handle, s->backend, io, fd);
        if (reading && use_ops(s, f) && (f->async || f->drained)) op_next = 1;
        if (op_next) {
            op_next = 0;
            int64_t n = run_op(s, io, fd, buffer, reading ? FARCE_OP_READ : FARCE_OP_WRITE, at, room);
            f = farce_fd_table_entry(&s->fds, s->handle, s->backend, io, fd);
            if (n > 0 || (n == 0 && !reading)) {
                total += (size_t)n;
                if (reading) f->drained = (size_t)n < room;
                if (total >= length) return SIZET2NUM(total);
                continue;
            }
            if (n == 0) return SIZET2NUM(total); /* end of file */
            if (n == -EINTR) {
                rb_thread_check_ints();
                continue;
            }
            if (n == -EAGAIN || n == -EWOULDBLOCK) { /* no fast poll: wait for readiness */
                if (reading) f->async = f->drained = 0;
                wait_fd(s, fd, events, -1, FARCE_KNOWN_NOT_READY);
                waited = 1;
                continue;
            }
            return total ? SIZET2NUM(total) : LL2NUM(n);
        }
        int drained = reading && f->drained;
        if (!waited && f->pollable && (drained || f->blocking)) {
            if (drained) f->drained = 0;
            wait_fd(s, fd, events, -1, drained ? FARCE_KNOWN_DRAINED : FARCE_KNOWN_UNKNOWN);
            waited = 1;
            continue;
        }
        waited = 0;
        ssize_t n = reading ? read(fd, at, room) : write(fd, at, room);
        if (n > 0 || (n == 0 && !reading)) {
            total += (size_t)n;
            if (reading) {
                f->drained = f->stream && (size_t)n < room;
                f->async = 0;
            }
            if (total >= length) return SIZET2NUM(total);
            continue;
        }
        if (n == 0) return SIZET2NUM(total); /* end of file */
        int e = errno;
        if (e == EINTR) {
            rb_thread_check_ints();
            continue;
        }
        if (e == EAGAIN || e == EWOULDBLOCK) {
            if (use_ops(s, f)) {
                if (reading) f->async = 1;
                else op_next = 1;
                continue;
            }
            wait_fd(s, fd, events, -1, FARCE_KNOWN_NOT_READY);
            waited = 1;
            continue;
        }
        return total ? SIZET2NUM(total) : LONG2NUM(-e);
    }
}

#if defined(RUBY_FIBER_SCHEDULER_VERSION) && RUBY_FIBER_SCHEDULER_VERSION >= 2
/* Ruby 3.2+: io_read(io, buffer, length, offset) */
static VALUE sched_io_read(VALUE self, VALUE io, VALUE buffer, VALUE length, VALUE offset)
{
    return xfer(self, io, buffer, length, NUM2SIZET(offset), XFER_READ);
}
static VALUE sched_io_write(VALUE self, VALUE io, VALUE buffer, VALUE length, VALUE offset)
{
    return xfer(self, io, buffer, length, NUM2SIZET(offset), XFER_WRITE);
}
#define IO_RW_ARITY 4
#else
/* Ruby 3.1: io_read(io, buffer, length) */
static VALUE sched_io_read(VALUE self, VALUE io, VALUE buffer, VALUE length)
{
    return xfer(self, io, buffer, length, 0, XFER_READ);
}
static VALUE sched_io_write(VALUE self, VALUE io, VALUE buffer, VALUE length)
{
    return xfer(self, io, buffer, length, 0, XFER_WRITE);
}
#define IO_RW_ARITY 3
#endif

/* call-seq: kernel_sleep(duration = nil) -> true */
static VALUE sched_kernel_sleep(int argc, VALUE *argv, VALUE self)
{
    farce_sched *s = get_sched(self);
    rb_check_arity(argc, 0, 1);
    int64_t tmo = argc == 1 ? timeout_ns(argv[0]) : -1;
    uint64_t token = 0;
    farce_stack_guard();
    int64_t r = tmo == 0 ? farce_core.yield(s->handle, &token) : farce_core.park(s->handle, tmo, &token);
    if (r < 0) RAISE_CORE(s, r, "sleep");
    /* registered for unblock: Mutex#sleep and ConditionVariable#wait park in
     * kernel_sleep and are woken by `unblock` */
    park(s, token, KIND_FIBER, Qtrue);
    return Qtrue;
}

/* call-seq: block(blocker, timeout = nil) -> true (woken) or false (timed out) */
static VALUE sched_block(int argc, VALUE *argv, VALUE self)
{
    farce_sched *s = get_sched(self);
    rb_check_arity(argc, 1, 2);
    int64_t tmo = argc == 2 ? timeout_ns(argv[1]) : -1;
    uint64_t token = 0;
    farce_stack_guard();
    int64_t r = farce_core.park(s->handle, tmo, &token);
    if (r < 0) RAISE_CORE(s, r, "block");
    VALUE blocker = NIL_P(argv[0]) ? Qtrue : argv[0];
    return park(s, token, KIND_FIBER, blocker) == FARCE_RESULT_TIMED_OUT ? Qfalse : Qtrue;
}

/* call-seq: unblock(blocker, fiber) -> nil
 * Safe from any thread: another thread queues the wakeup for the loop and
 * interrupts its kernel wait. */
static VALUE sched_unblock(VALUE self, VALUE blocker, VALUE fiber)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (!s->handle || sched_inert(s)) return Qnil;
    st_data_t token;
    if (!st_lookup(s->blocked, (st_data_t)fiber, &token)) return Qnil; /* not blocked (any more) */
    if (rb_thread_current() == s->thread) {
        farce_stack_guard();
        farce_core.wake(s->handle, (uint64_t)token);
        return Qnil;
    }
    if (s->inbox_len == s->inbox_cap) {
        long cap = s->inbox_cap ? s->inbox_cap * 2 : 16;
        REALLOC_N(s->inbox, uint64_t, cap);
        s->inbox_cap = cap;
    }
    s->inbox[s->inbox_len++] = (uint64_t)token;
    farce_write_wake(&s->wake_fd);
    return Qnil;
}

/* call-seq: __alarm(fiber, seconds, exception_class, arguments) -> token
 * After `seconds`, raise exception_class.new(*arguments) in fiber. */
static VALUE sched_alarm(VALUE self, VALUE fiber, VALUE seconds, VALUE klass, VALUE args)
{
    farce_sched *s = get_sched(self);
    int64_t tmo = timeout_ns(seconds);
    Check_Type(args, T_ARRAY);
    uint64_t token = 0;
    farce_stack_guard();
    int64_t r = farce_core.park(s->handle, tmo, &token);
    if (r < 0) RAISE_CORE(s, r, "timeout");
    slot_ent *e = slot_at(s, farce_token_slot(token));
    e->gen = farce_token_gen(token);
    e->kind = KIND_ALARM;
    e->fiber = fiber;
    e->extra = rb_ary_freeze(rb_ary_plus(rb_ary_new_from_args(1, klass), args));
    return ULL2NUM(token);
}

/* call-seq: __cancel_alarm(token) -> nil */
static VALUE sched_cancel_alarm(VALUE self, VALUE token_v)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    uint64_t token = NUM2ULL(token_v);
    uint32_t slot = farce_token_slot(token);
    if (slot < s->nslots && s->slots[slot].gen == farce_token_gen(token) && s->slots[slot].kind == KIND_ALARM) {
        memset(&s->slots[slot], 0, sizeof(slot_ent));
        if (s->handle && !sched_inert(s)) {
            farce_stack_guard();
            farce_core.cancel(s->handle, token);
        }
    }
    return Qnil;
}

/* call-seq: yield -> nil
 * Ruby 4.0: lets every other ready fiber run, then resumes the caller on the
 * next loop iteration. Unlike kernel_sleep(0), `unblock` cannot end it. */
static VALUE sched_yield(VALUE self)
{
    farce_sched *s = get_sched(self);
    uint64_t token = 0;
    farce_stack_guard();
    int64_t r = farce_core.yield(s->handle, &token);
    if (r < 0) RAISE_CORE(s, r, "yield");
    park(s, token, KIND_FIBER, Qundef);
    return Qnil;
}

/* call-seq: fiber_interrupt(fiber, exception) -> nil
 * Ruby 4.0 (IO#close on an IO that fibers are blocked on): raise exception
 * (an Exception or a class) in fiber, which is blocked in one of this
 * scheduler's waits. Safe from any thread: the loop raises it, after
 * waking up if it was waiting in the kernel. */
static VALUE sched_fiber_interrupt(VALUE self, VALUE fiber, VALUE exception)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (!rb_obj_is_fiber(fiber)) rb_raise(rb_eTypeError, "fiber_interrupt: %"PRIsVALUE" is not a Fiber", rb_obj_class(fiber));
    if (!s->handle || sched_inert(s)) return Qnil;
    if (fiber == rb_fiber_current()) rb_exc_raise(rb_make_exception(1, &exception));
    if (!RTEST(rb_fiber_alive_p(fiber))) return Qnil;
    rb_ary_push(s->interrupts, rb_assoc_new(fiber, exception));
    if (rb_thread_current() != s->thread) farce_write_wake(&s->wake_fd);
    return Qnil;
}

/* call-seq: io_close(io_or_descriptor) -> nil
 * Ruby 4.0 calls this just before it closes a descriptor: fibers waiting on
 * it are woken at once and raise IOError, and its registration is dropped.
 * Returns nil so that Ruby closes the descriptor itself. From a thread other
 * than the scheduler's, nothing is done here: the close scan finds it. */
static VALUE sched_io_close(VALUE self, VALUE target)
{
    farce_sched *s = rb_check_typeddata(self, &sched_type);
    if (!s->handle || sched_inert(s) || rb_thread_current() != s->thread) return Qnil;
    int fd;
    if (RB_INTEGER_TYPE_P(target)) {
        fd = NUM2INT(target);
    } else {
        fd = farce_io_fd_or_closed(rb_io_get_io(target));
    }
    if (fd < 0 || fd >= s->fds.nfds || !s->fds.fds[fd].io) return Qnil;
    farce_stack_guard();
    farce_fd_table_forget(&s->fds, s->handle, fd);
    return Qnil;
}

/* call-seq: __select_ready(io, events) -> events ready now (0 if none)
 * For io_select: what poll(2) reports this instant, plus READABLE when Ruby
 * holds buffered input for the IO (as IO.select counts it). Never parks. */
static VALUE sched_select_ready(VALUE self, VALUE io, VALUE events)
{
    rb_io_t *fptr;
    io = rb_io_get_io(io);
    GetOpenFile(io, fptr);
    rb_io_check_closed(fptr);
    int ev = NUM2INT(events), got = 0;
    if ((ev & RUBY_IO_READABLE) && rb_io_read_pending(fptr)) got |= RUBY_IO_READABLE;
    struct pollfd p = {farce_io_descriptor(io), 0, 0};
    if (ev & RUBY_IO_READABLE) p.events |= POLLIN;
    if (ev & RUBY_IO_WRITABLE) p.events |= POLLOUT;
    if (ev & RUBY_IO_PRIORITY) p.events |= POLLPRI;
    int n;
    do n = poll(&p, 1, 0); while (n < 0 && errno == EINTR);
    if (n > 0) {
        if (p.revents & POLLNVAL) rb_raise(rb_eIOError, "closed stream");
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) got |= ev & RUBY_IO_READABLE;
        if (p.revents & (POLLOUT | POLLERR)) got |= ev & RUBY_IO_WRITABLE;
        if (p.revents & POLLPRI) got |= ev & RUBY_IO_PRIORITY;
    }
    return INT2NUM(got);
}

/* call-seq: __pidfd_open(pid) -> descriptor or nil when the kernel lacks pidfd */
static VALUE farce_pidfd_open(VALUE mod, VALUE pid)
{
#ifdef SYS_pidfd_open
    long fd = syscall(SYS_pidfd_open, (pid_t)NUM2INT(pid), 0);
    if (fd >= 0) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        return INT2NUM((int)fd);
    }
    if (errno == ESRCH) rb_syserr_fail(ESRCH, "pidfd_open");
#endif
    return Qnil;
}

static VALUE farce_core_loaded_p(VALUE mod) { return farce_core_loaded() ? Qtrue : Qfalse; }

void Init_farce_shim(void)
{
    farce_core_loader_init();
    id_raise = rb_intern("raise");
    id_locked_p = rb_intern("locked?");
    VALUE mFarce = rb_define_module("Farce");
    farce_eError = rb_define_class_under(mFarce, "Error", rb_eStandardError);
    cScheduler = rb_define_class_under(mFarce, "Scheduler", rb_cObject);
    rb_define_alloc_func(cScheduler, sched_alloc);
    rb_define_singleton_method(mFarce, "core_loaded?", farce_core_loaded_p, 0);
    rb_define_singleton_method(mFarce, "__pidfd_open", farce_pidfd_open, 1);

    rb_define_private_method(cScheduler, "__open", sched_open, 1);
    rb_define_private_method(cScheduler, "__release", sched_release, 0);
    rb_define_private_method(cScheduler, "__fiber_started", sched_fiber_started, 0);
    rb_define_private_method(cScheduler, "__fiber_finished", sched_fiber_finished, 0);
    rb_define_private_method(cScheduler, "__alarm", sched_alarm, 4);
    rb_define_private_method(cScheduler, "__cancel_alarm", sched_cancel_alarm, 1);
    rb_define_private_method(cScheduler, "__offload", sched_offload, 1);

    rb_define_method(cScheduler, "run", sched_run, 0);
    rb_define_method(cScheduler, "closed?", sched_closed_p, 0);
    rb_define_method(cScheduler, "backend", sched_backend, 0);
    rb_define_method(cScheduler, "fallback_reason", sched_fallback_reason, 0);
    rb_define_method(cScheduler, "stats", sched_stats, 0);

    rb_define_method(cScheduler, "io_wait", sched_io_wait, 3);
    rb_define_method(cScheduler, "io_read", sched_io_read, IO_RW_ARITY);
    rb_define_method(cScheduler, "io_write", sched_io_write, IO_RW_ARITY);
    rb_define_method(cScheduler, "kernel_sleep", sched_kernel_sleep, -1);
    rb_define_method(cScheduler, "block", sched_block, -1);
    rb_define_method(cScheduler, "unblock", sched_unblock, 2);
    rb_define_method(cScheduler, "yield", sched_yield, 0);
    rb_define_method(cScheduler, "fiber_interrupt", sched_fiber_interrupt, 2);
    rb_define_method(cScheduler, "io_close", sched_io_close, 1);
    rb_define_private_method(cScheduler, "__select_ready", sched_select_ready, 2);
    farce_offload_init(mFarce, cScheduler);
    farce_selector_init(mFarce);
}
