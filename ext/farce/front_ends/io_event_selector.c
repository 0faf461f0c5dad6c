/*
 * Farce::IOEventSelector: an io-event selector (the event loop interface
 * Async and Falcon run on) over the loop (event_loop.h).
 * lib/farce/io_event.rb publishes it as IO::Event::Selector::Farce, so
 * IO_EVENT_SELECTOR=Farce picks it.
 *
 * io-event selectors use Fiber#transfer: a waiting fiber transfers to the
 * loop fiber, and `select` transfers to the fibers whose waits finished.
 * Anyone may transfer to a waiting fiber (Async's timers do); the wait
 * notices that the loop did not clear its entry, cancels itself and io_wait
 * returns false. The contract io-event's own selectors keep, kept here:
 * io_wait (and io_read/io_write when they must wait) always suspends the
 * caller, even when the descriptor is ready at once, and `select` resumes it
 * (the loop's suspend_when_ready); `select` reaps what the kernel has
 * ready and returns how many fibers it resumed.
 *
 * What is left here is what only io-event has: the loop fiber, the ready
 * list (push/resume/yield/raise), select, wakeup, and starting the Go core
 * lazily. The core starts at the first operation that needs it (a
 * descriptor or process wait, or a select that has to wait), not in `new`:
 * Falcon's master runs a short reactor (`Sync { endpoint.bound }`) before
 * it forks its workers, and a child of a process whose Go runtime started
 * can never use Go, so starting it there would leave every worker without
 * farce.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <ruby.h>
#include <ruby/io.h>
#include "front_ends/io_event_selector.h"
#include "hook_io/io_transfer.h"
#include "loop/event_loop.h"
#include "loop/wait_table.h"
#include "loop/stall.h"

static VALUE cSelector;
static ID id_alive_p, id_transfer, id_raise, id_process_wait;

typedef struct {
    farce_loop loop; /* first: the loop's callbacks get &s->loop */
    VALUE loop_fiber;

    /* The ready list: positions grow without bound and map to ring[pos & mask],
     * so an entry keeps its position while queued even when the ring grows,
     * and resume/yield/raise can clear the entry they pushed. */
    VALUE *ring;
    uint64_t head, tail, mask;
} farce_selector;

static const rb_data_type_t sel_type;

/* ---- how its fibers switch ------------------------------------------------- */

/* A fiber going back to the loop fiber ends its turn; what the loop fiber
 * runs next (Async's timers resume fibers without us) is a new one. */
static inline void next_turn(farce_loop *l)
{
    farce_loop_turn_ends(l);
    farce_loop_turn_begins(l);
}

static VALUE transfer_to_loop(VALUE parking)
{
    farce_selector *s = RTYPEDDATA_DATA(((const farce_parking *)parking)->owner); /* the loop's own owner */
    next_turn(&s->loop);
    return rb_fiber_transfer(s->loop_fiber, 0, NULL);
}

/* Transfers to the fibers whose waits finished; returns how many. A
 * fiber's exception propagates with the batch cursor already past it. */
static long dispatch(farce_loop *l)
{
    long resumed = 0;
    farce_wait w;
    int64_t result;
    while (farce_loop_next(l, &w, &result)) {
        resumed++;
        VALUE arg = LONG2FIX((long)result);
        rb_fiber_transfer(w.fiber, 1, &arg);
    }
    return resumed;
}

/* Anything but the loop fiber can transfer to the loop and be transferred back. */
static int can_park(VALUE self) { return rb_fiber_current() != ((farce_selector *)rb_check_typeddata(self, &sel_type))->loop_fiber; }

static int give_turn(farce_loop *l);

static const farce_front_end selector_front_end = {"IO::Event::Selector::Farce", transfer_to_loop, 1, can_park, give_turn};

/* ---- GC ------------------------------------------------------------------ */

static void sel_mark(void *p)
{
    farce_selector *s = p;
    farce_loop_mark(&s->loop);
    rb_gc_mark(s->loop_fiber);
    for (uint64_t pos = s->head; pos < s->tail; pos++) rb_gc_mark(s->ring[pos & s->mask]);
}

static void sel_free(void *p)
{
    farce_selector *s = p;
    farce_loop_free(&s->loop);
    xfree(s->ring);
    xfree(s);
}

static size_t sel_memsize(const void *p)
{
    const farce_selector *s = p;
    return sizeof(*s) + farce_loop_memsize(&s->loop) + (s->ring ? (s->mask + 1) * sizeof(VALUE) : 0);
}

static const rb_data_type_t sel_type = {
    "Farce::IOEventSelector",
    {sel_mark, sel_free, sel_memsize},
    0, 0, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE sel_alloc(VALUE klass)
{
    farce_selector *s;
    VALUE obj = TypedData_Make_Struct(klass, farce_selector, &sel_type, s);
    farce_loop_init(&s->loop, &selector_front_end, obj);
    s->loop_fiber = Qnil;
    return obj;
}

/* As the scheduler's sched_of: the receiver's type checked inline, a
 * misuse through rb_check_typeddata (which raises). */
static inline farce_selector *sel_of(VALUE self)
{
    if (RB_LIKELY(RB_TYPE_P(self, T_DATA) && RTYPEDDATA_P(self) && RTYPEDDATA_TYPE(self) == &sel_type))
        return (farce_selector *)RTYPEDDATA_DATA(self);
    return rb_check_typeddata(self, &sel_type);
}

static farce_selector *get_sel(VALUE self)
{
    farce_selector *s = sel_of(self);
    farce_loop_check_usable(&s->loop);
    farce_loop_check_thread(&s->loop);
    return s;
}

/* ---- the ready list ------------------------------------------------------- */

static uint64_t ready_push(farce_selector *s, VALUE obj)
{
    uint64_t cap = s->ring ? s->mask + 1 : 0;
    if (s->tail - s->head == cap) {
        uint64_t ncap = cap ? cap * 2 : 64;
        VALUE *n = ALLOC_N(VALUE, ncap);
        for (uint64_t pos = s->head; pos < s->tail; pos++) n[pos & (ncap - 1)] = s->ring[pos & s->mask];
        xfree(s->ring);
        s->ring = n;
        s->mask = ncap - 1;
    }
    uint64_t pos = s->tail++;
    s->ring[pos & s->mask] = obj;
    return pos;
}

/* Clears the entry pushed at pos if the loop has not taken it yet: the
 * fiber is running again by other means, and must not be transferred to
 * later from wherever it will be waiting then. */
static void ready_clear(farce_selector *s, uint64_t pos)
{
    if (pos >= s->head && pos < s->tail) s->ring[pos & s->mask] = Qnil;
}

static int ready_any(const farce_selector *s) { return s->tail != s->head; }

/* Transfers to every entry that was queued when this started; entries
 * pushed meanwhile wait for the next select. Returns whether there were any. */
static int run_ready(farce_selector *s)
{
    uint64_t end = s->tail;
    if (s->head == end) return 0;
    while (s->head < end && s->ring) {
        uint64_t pos = s->head++;
        VALUE obj = s->ring[pos & s->mask];
        s->ring[pos & s->mask] = Qnil;
        if (NIL_P(obj)) continue;
        farce_loop_turn_begins(&s->loop);
        if (rb_obj_is_fiber(obj)) {
            if (RTEST(rb_fiber_alive_p(obj))) rb_fiber_transfer(obj, 0, NULL);
        } else if (RTEST(rb_funcall(obj, id_alive_p, 0))) {
            rb_funcall(obj, id_transfer, 0);
        }
        if (s->loop.closed) break;
    }
    return 1;
}

/* ---- the loop ------------------------------------------------------------- */

/* call-seq: select(duration = nil) -> count of fibers resumed for events
 * Runs the ready list, then waits up to duration (not at all when something
 * ran or is ready) for descriptor events and transfers to their fibers. */
static VALUE sel_select(int argc, VALUE *argv, VALUE self)
{
    farce_selector *s = get_sel(self);
    farce_loop *l = &s->loop;
    rb_check_arity(argc, 0, 1);
    int64_t block_ns = farce_timeout_ns(argc ? argv[0] : Qnil);
    l->idle_duration = 0.0;
    farce_loop_turn_ends(l);
    /* the ready list is looked at below: a wakeup from another thread
     * before this point is seen there, one after it by the poll */
    l->wake_pending = 0;

    /* completions taken by a select that an exception cut short */
    long resumed = dispatch(l);
    if (l->closed) {
        farce_loop_finish_release(l); /* close from another thread */
        return LONG2NUM(resumed);
    }
    /* the stall watchdog lives in the core: start it before fibers run */
    if (!l->handle && l->stall.threshold_ns > 0 && ready_any(s)) farce_loop_start(l, NULL);
    if (run_ready(s) || resumed) block_ns = 0;
    if (l->closed) return LONG2NUM(resumed);
    if (!l->handle) {
        /* no core yet, so nothing waits on it: there is only something to
         * do when this select has to wait (for a wakeup or the duration) */
        if (block_ns == 0 || ready_any(s)) return LONG2NUM(resumed);
        farce_loop_start(l, NULL);
    }
    /* a few full batches before timers and the ready list get a turn */
    for (int round = 0; round < 4; round++) {
        int64_t n = farce_loop_poll(l, round == 0 && !ready_any(s) ? block_ns : 0);
        if (n == -EINTR) break;
        resumed += dispatch(l);
        if (l->closed || n < FARCE_BATCH) break;
    }
    if (l->closed) farce_loop_finish_release(l);
    /* Async runs its timers and resumes their fibers itself after select:
     * their turn starts here */
    farce_loop_turn_begins(l);
    return LONG2NUM(resumed);
}

/* ---- the io-event interface ----------------------------------------------- */

/* call-seq: new(loop_fiber) */
static VALUE sel_initialize(VALUE self, VALUE loop_fiber)
{
    farce_selector *s = sel_of(self);
    if (!NIL_P(s->loop_fiber) || s->loop.closed) rb_raise(farce_eError, "selector already initialized");
    farce_core_check_usable(); /* fail here, not at the first wait, in a child that can never use Go */
    s->loop_fiber = loop_fiber;
    s->loop.thread = rb_thread_current();
    /* FARCE_STALL_MS (lib/farce/stall.rb) */
    VALUE threshold = rb_funcall(rb_define_module("Farce"), rb_intern("stall_threshold_from_environment"), 0);
    if (!NIL_P(threshold)) farce_loop_watch_stalls(&s->loop, farce_turn_budget_ns(threshold));
    return self;
}

static VALUE sel_loop(VALUE self) { return sel_of(self)->loop_fiber; }

/* call-seq: backend -> :io_uring, :epoll or :poll
 * Asking starts the core, which is what picks the backend. */
static VALUE sel_backend(VALUE self)
{
    farce_selector *s = get_sel(self);
    farce_loop_start(&s->loop, NULL);
    return s->loop.backend;
}

/* call-seq: stats -> Hash (the core's counters; starts the core) */
static VALUE sel_stats(VALUE self)
{
    farce_selector *s = sel_of(self); /* from any thread */
    farce_loop_check_usable(&s->loop);
    farce_loop_start(&s->loop, NULL);
    return farce_loop_stats(&s->loop);
}

static VALUE sel_idle_duration(VALUE self) { return DBL2NUM(sel_of(self)->loop.idle_duration); }

/* call-seq: close -> nil
 * Releases the Go scheduler; waiting fibers are forgotten. In a forked
 * child only C memory is touched (no Go call, no descriptor closed). */
static VALUE sel_close(VALUE self)
{
    farce_selector *s = sel_of(self);
    if (s->loop.handle && !farce_loop_inert(&s->loop)) farce_stack_guard();
    if (!farce_loop_release(&s->loop)) return Qnil; /* handed to the loop's thread */
    s->loop_fiber = Qnil;
    s->head = s->tail = 0;
    return Qnil;
}

static VALUE sel_closed_p(VALUE self)
{
    farce_selector *s = sel_of(self);
    return (s->loop.closed || farce_loop_inert(&s->loop)) ? Qtrue : Qfalse;
}

/* call-seq: wakeup -> true if the loop was in its kernel wait
 * From any thread, as io-event's selectors (docs/contracts.md): Async's
 * Scheduler#unblock and #interrupt call push and wakeup from the thread
 * that unblocks. Callers hold the GVL, and so does the loop's thread
 * whenever it is not in its kernel wait: the loop sets in_kernel_wait
 * before it lets go of the GVL, so a wakeup that sees it unset comes before
 * the wait, and leaves wake_pending for the poll to see (a select that
 * looked at its ready list already, then ran Ruby code: the close scan). A
 * wakeup that sees it set writes the wake descriptor, which ends the kernel
 * wait, or keeps the next one from starting. Never raises, not even on a
 * closed selector: Async may still hold it there. */
static VALUE sel_wakeup(VALUE self)
{
    farce_selector *s = sel_of(self);
    if (s->loop.closed || farce_loop_inert(&s->loop)) return Qfalse;
    if (!s->loop.handle || !s->loop.in_kernel_wait) {
        s->loop.wake_pending = 1;
        return Qfalse;
    }
    farce_write_wake(&s->loop.wake_fd);
    return Qtrue;
}

/* call-seq: transfer -> whatever the loop passes back */
static VALUE sel_transfer(VALUE self)
{
    farce_selector *s = get_sel(self);
    next_turn(&s->loop);
    return rb_fiber_transfer(s->loop_fiber, 0, NULL);
}

enum switch_kind { SWITCH_TRANSFER, SWITCH_RAISE, SWITCH_TO_LOOP };

struct switch_args {
    VALUE self;
    enum switch_kind kind;
    VALUE target;
    int argc;
    const VALUE *argv;
    int kw; /* raise: the caller passed keywords (cause:) */
    uint64_t pos;
};

static VALUE do_switch(VALUE p)
{
    struct switch_args *a = (struct switch_args *)p;
    switch (a->kind) {
    case SWITCH_TRANSFER: return rb_fiber_transfer(a->target, a->argc, a->argv);
    case SWITCH_RAISE: return rb_funcallv_kw(a->target, id_raise, a->argc, a->argv, a->kw);
    default: return rb_fiber_transfer(a->target, 0, NULL);
    }
}

static VALUE unqueue(VALUE p)
{
    struct switch_args *a = (struct switch_args *)p;
    farce_selector *s = sel_of(a->self);
    ready_clear(s, a->pos);
    return Qnil;
}

/* Queues the current fiber to be transferred to by the loop, switches as
 * asked, and removes the queue entry if it was not used by the time this
 * fiber runs again. */
static VALUE switch_queued(VALUE self, enum switch_kind kind, VALUE target, int argc, const VALUE *argv)
{
    farce_selector *s = get_sel(self);
    struct switch_args a = {self, kind, target, argc, argv, rb_keyword_given_p(), 0};
    next_turn(&s->loop);
    a.pos = ready_push(s, rb_fiber_current());
    return rb_ensure(do_switch, (VALUE)&a, unqueue, (VALUE)&a);
}

/* The running fiber held the loop past its turn budget (event_loop.c): it
 * goes on the ready list and transfers to the loop fiber, as `yield` does;
 * the next select transfers back. Not from the loop fiber itself. */
static int give_turn(farce_loop *l)
{
    farce_selector *s = (farce_selector *)l;
    if (NIL_P(s->loop_fiber) || rb_fiber_current() == s->loop_fiber) return 0;
    switch_queued(l->owner, SWITCH_TO_LOOP, s->loop_fiber, 0, NULL);
    return 1;
}

/* call-seq: turn_budget -> seconds or nil (none) */
static VALUE sel_turn_budget(VALUE self)
{
    int64_t ns = sel_of(self)->loop.turns.budget_ns;
    return ns > 0 ? DBL2NUM(ns / 1e9) : Qnil;
}

/* call-seq: turn_budget = seconds or nil
 * How long a fiber may run before a read, write or wait that would not
 * block gives the loop a turn first (default 0.5 ms; nil: never). */
static VALUE sel_set_turn_budget(VALUE self, VALUE seconds)
{
    sel_of(self)->loop.turns.budget_ns = farce_turn_budget_ns(seconds);
    return seconds;
}

/* call-seq: __stall_threshold=(seconds or nil)
 * Stall detection on (seconds > 0) or off (lib/farce/stall.rb); applied when
 * the core starts if it has not yet. */
static VALUE sel_set_stall_threshold(VALUE self, VALUE seconds)
{
    farce_selector *s = get_sel(self);
    farce_loop_watch_stalls(&s->loop, farce_turn_budget_ns(seconds));
    return seconds;
}

/* call-seq: resume(fiber, *arguments) */
static VALUE sel_resume(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 1, UNLIMITED_ARGUMENTS);
    return switch_queued(self, SWITCH_TRANSFER, argv[0], argc - 1, argv + 1);
}

/* call-seq: yield -> nil (runs again on the next select) */
static VALUE sel_yield(VALUE self)
{
    farce_selector *s = get_sel(self);
    return switch_queued(self, SWITCH_TO_LOOP, s->loop_fiber, 0, NULL);
}

/* call-seq: raise(fiber, *arguments) */
static VALUE sel_raise(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 1, UNLIMITED_ARGUMENTS);
    return switch_queued(self, SWITCH_RAISE, argv[0], argc - 1, argv + 1);
}

/* call-seq: push(fiber) -> nil
 * Anything answering alive? and transfer may be queued. From any thread,
 * as io-event's selectors (Async's Scheduler#unblock pushes from the
 * thread that unblocks, then calls wakeup): the ready list is touched only
 * with the GVL held, by this and by the loop's select, which reads it
 * again after every transfer (run_ready). Another thread neither claims
 * an idle loop here (it stays the loop's thread's) nor raises on a closed
 * or inherited selector (dropped: nobody will select it again). */
static VALUE sel_push(VALUE self, VALUE fiber)
{
    farce_selector *s = sel_of(self);
    if (s->loop.closed || farce_loop_inert(&s->loop)) {
        if (rb_thread_current() != s->loop.thread) return Qnil;
        farce_loop_check_usable(&s->loop); /* raises: the loop's own thread pushed after close */
    }
    ready_push(s, fiber);
    return Qnil;
}

static VALUE sel_ready_p(VALUE self)
{
    farce_selector *s = sel_of(self);
    return ready_any(s) ? Qtrue : Qfalse;
}

#define EVENT_MASK (RUBY_IO_READABLE | RUBY_IO_PRIORITY | RUBY_IO_WRITABLE)

/* call-seq: io_wait(fiber, io, events) -> ready events, or false when the
 * fiber was transferred to by someone else first (Async's timers). Always
 * suspends: select resumes it. */
static VALUE sel_io_wait(VALUE self, VALUE fiber, VALUE io, VALUE events)
{
    farce_selector *s = get_sel(self);
    io = rb_io_get_io(io);
    int fd = farce_io_descriptor(io);
    int ev = NUM2INT(events) & EVENT_MASK;
    if (ev == 0) rb_raise(rb_eArgError, "io_wait: no events to wait for on fd %d", fd);
    farce_fd_ent *f = farce_fd_table_entry(&s->loop.fds, s->loop.handle, s->loop.backend, io, fd);
    if (!f->pollable) {
        /* No kernel wait: a regular file is always ready; on Windows
         * anything but a socket that is not ready now is polled
         * (steps_windows.c), the loop running meanwhile. */
        const farce_fd_steps *steps = f->steps; /* static: still there after the switch, unlike f */
        if (!steps->ready_now(fd, ev)) {
            int64_t r = steps->wait(&s->loop, io, fd, ev, -1);
            return r == FARCE_RESUMED_ELSEWHERE ? Qfalse : LL2NUM(r & ev);
        }
        switch_queued(self, SWITCH_TO_LOOP, s->loop_fiber, 0, NULL); /* ready now: still a turn of the loop */
        return INT2NUM(steps->ready_now(fd, ev));
    }
    int64_t r = farce_loop_wait_fd(&s->loop, fd, (uint32_t)ev, -1, FARCE_KNOWN_NOTHING);
    if (r == FARCE_RESUMED_ELSEWHERE) return Qfalse;
    /* Closed while this fiber waited (another fiber closed it before the
     * loop's select): what the kernel reported was the dead descriptor's
     * (poll's POLLNVAL, io_uring's EBADF), not io's readiness. io-event's
     * EPoll never resumes such a fiber (the close dropped its
     * registration), URing resumes it with EBADF; an IOError as io_read
     * and the scheduler's io_wait raise, never a readiness that was not. */
    if (farce_io_fd_or_closed(io) != fd) farce_raise_closed(fd);
    return r > 0 ? LL2NUM(r & ev) : Qfalse;
}

/* call-seq: io_read(fiber, io, buffer, length, offset = 0) -> count or -errno */
static VALUE sel_io_read(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 4, 5);
    return farce_io_transfer(&get_sel(self)->loop, argv[1], argv[2], argv[3], argc > 4 ? NUM2SIZET(argv[4]) : 0, -1,
                             FARCE_READ);
}

/* call-seq: io_write(fiber, io, buffer, length, offset = 0) -> count or -errno */
static VALUE sel_io_write(int argc, VALUE *argv, VALUE self)
{
    rb_check_arity(argc, 4, 5);
    return farce_io_transfer(&get_sel(self)->loop, argv[1], argv[2], argv[3], argc > 4 ? NUM2SIZET(argv[4]) : 0, -1,
                             FARCE_WRITE);
}

/* Positional calls are for files, which have no readiness to wait for, so
 * they run directly (Ruby 3.3 routes IO#pread and IO#pwrite here). A
 * negative position gets -EINVAL, as from pread(2). */

/* call-seq: io_pread(fiber, io, buffer, from, length, offset) -> count or -errno */
static VALUE sel_io_pread(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return INT2NUM(-EINVAL);
    return farce_io_transfer(&get_sel(self)->loop, io, buffer, length, NUM2SIZET(offset), pos, FARCE_READ);
}

/* call-seq: io_pwrite(fiber, io, buffer, from, length, offset) -> count or -errno */
static VALUE sel_io_pwrite(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE length, VALUE offset)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return INT2NUM(-EINVAL);
    return farce_io_transfer(&get_sel(self)->loop, io, buffer, length, NUM2SIZET(offset), pos, FARCE_WRITE);
}

/* io-event's selectors follow the Ruby they are built for (io-event#211):
 * on Ruby 4.1 (scheduler interface version 4) Async calls io_read(fiber,
 * io, buffer, offset, length) and io_pread(fiber, io, buffer, from, offset,
 * length), one transfer that never waits (io_transfer_v4.c). On older
 * Rubies these are __io_read_v4 and friends (tests). */
static VALUE sel_io_read_v4(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE offset, VALUE length)
{
    return farce_io_transfer_once(&get_sel(self)->loop, io, buffer, offset, length, -1, FARCE_READ);
}

static VALUE sel_io_write_v4(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE offset, VALUE length)
{
    return farce_io_transfer_once(&get_sel(self)->loop, io, buffer, offset, length, -1, FARCE_WRITE);
}

static VALUE sel_io_pread_v4(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return INT2NUM(-EINVAL);
    return farce_io_transfer_once(&get_sel(self)->loop, io, buffer, offset, length, pos, FARCE_READ);
}

static VALUE sel_io_pwrite_v4(VALUE self, VALUE fiber, VALUE io, VALUE buffer, VALUE from, VALUE offset, VALUE length)
{
    off_t pos = NUM2OFFT(from);
    if (pos < 0) return INT2NUM(-EINVAL);
    return farce_io_transfer_once(&get_sel(self)->loop, io, buffer, offset, length, pos, FARCE_WRITE);
}

/* call-seq: io_close(io_or_descriptor) -> nil
 * Ruby 4.0 calls this before closing a descriptor: its waiters raise
 * IOError at once and the number can be reused. */
static VALUE sel_io_close(VALUE self, VALUE target)
{
    farce_loop_io_close(&sel_of(self)->loop, target);
    return Qnil;
}

/* call-seq: process_wait(fiber, pid, flags) -> Process::Status, nil (WNOHANG),
 * or false when another fiber transferred here first (Async retries). */
static VALUE sel_process_wait(VALUE self, VALUE fiber, VALUE pid, VALUE flags)
{
    VALUE status = farce_loop_process_wait(&get_sel(self)->loop, pid, flags);
    if (status != Qundef) return status;
    /* any child, a process group, or no pidfd: io-event has a thread wait */
    return rb_funcall(rb_path2class("IO::Event::Selector"), id_process_wait, 2, pid, flags);
}

void farce_io_event_selector_init(VALUE mFarce)
{
    id_alive_p = rb_intern("alive?");
    id_transfer = rb_intern("transfer");
    id_raise = rb_intern("raise");
    id_process_wait = rb_intern("process_wait");
    cSelector = rb_define_class_under(mFarce, "IOEventSelector", rb_cObject);
    rb_define_alloc_func(cSelector, sel_alloc);
    rb_define_method(cSelector, "initialize", sel_initialize, 1);
    rb_define_method(cSelector, "loop", sel_loop, 0);
    rb_define_method(cSelector, "backend", sel_backend, 0);
    rb_define_method(cSelector, "stats", sel_stats, 0);
    rb_define_method(cSelector, "idle_duration", sel_idle_duration, 0);
    rb_define_method(cSelector, "turn_budget", sel_turn_budget, 0);
    rb_define_method(cSelector, "turn_budget=", sel_set_turn_budget, 1);
    rb_define_private_method(cSelector, "__stall_threshold=", sel_set_stall_threshold, 1);
    rb_define_method(cSelector, "close", sel_close, 0);
    rb_define_method(cSelector, "closed?", sel_closed_p, 0);
    rb_define_method(cSelector, "wakeup", sel_wakeup, 0);
    rb_define_method(cSelector, "transfer", sel_transfer, 0);
    rb_define_method(cSelector, "resume", sel_resume, -1);
    rb_define_method(cSelector, "yield", sel_yield, 0);
    rb_define_method(cSelector, "raise", sel_raise, -1);
    rb_define_method(cSelector, "push", sel_push, 1);
    rb_define_method(cSelector, "ready?", sel_ready_p, 0);
    rb_define_method(cSelector, "select", sel_select, -1);
    rb_define_method(cSelector, "io_wait", sel_io_wait, 3);
#if FARCE_SINGLE_TRANSFER_HOOKS
    rb_define_method(cSelector, "io_read", sel_io_read_v4, 5);
    rb_define_method(cSelector, "io_write", sel_io_write_v4, 5);
    rb_define_method(cSelector, "io_pread", sel_io_pread_v4, 6);
    rb_define_method(cSelector, "io_pwrite", sel_io_pwrite_v4, 6);
    (void)sel_io_read; /* the version 2/3 forms: unused on this Ruby */
    (void)sel_io_write;
    (void)sel_io_pread;
    (void)sel_io_pwrite;
#else
    rb_define_method(cSelector, "io_read", sel_io_read, -1);
    rb_define_method(cSelector, "io_write", sel_io_write, -1);
    rb_define_method(cSelector, "io_pread", sel_io_pread, 6);
    rb_define_method(cSelector, "io_pwrite", sel_io_pwrite, 6);
#endif
    /* the version 4 forms under their own names on every Ruby (tests) */
    rb_define_private_method(cSelector, "__io_read_v4", sel_io_read_v4, 5);
    rb_define_private_method(cSelector, "__io_write_v4", sel_io_write_v4, 5);
    rb_define_private_method(cSelector, "__io_pread_v4", sel_io_pread_v4, 6);
    rb_define_private_method(cSelector, "__io_pwrite_v4", sel_io_pwrite_v4, 6);
    rb_define_method(cSelector, "io_close", sel_io_close, 1);
    rb_define_method(cSelector, "process_wait", sel_process_wait, 3);
}
